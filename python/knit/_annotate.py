"""Text views of a LineProfile (knit/_lines.py): the annotated source, like `perf annotate`, and
the ranked table of the hottest lines with the critical path first."""
from __future__ import annotations

import ast
import linecache
import os
from typing import Any

# A LineProfile and its LineStats (knit/_lines.py, which imports this module: naming its classes
# here would make an import cycle).
LineProfile = Any
LineStats = Any

HOT_MARK = ">>"
_GAP = "..."
_HEADER = f"{'':2} {'time us':>9} {'share':>6} {'instrs':>12} {'engine':>6} {'wait us':>9} {'path':>6}  |"
_BLANK = " " * (len(_HEADER) - 1) + "|"


def _gutter(s: LineStats, hot: bool, path_ns: float) -> str:
    trips = f"x{s.trips}" if s.trips > 1 else ""
    count = f"{s.instructions} {trips}".rstrip()
    wait = f"{s.total_wait_ns / 1e3:9.2f}" if s.total_wait_ns > 0 else " " * 9
    path = f"{100 * s.path_ns / path_ns:5.1f}%" if s.path_ns > 0 and path_ns > 0 else " " * 6
    return (f"{HOT_MARK if hot else '':2} {s.total_ns / 1e3:9.2f} {100 * s.share:5.1f}% {count:>12} "
            f"{s.engine:>6} {wait} {path}  |")


def _short(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return path if rel.startswith("..") else rel


def _function_spans(path: str, wanted: set[int]) -> list[tuple[int, int]]:
    """The (first, last) lines of the outermost functions holding a wanted line, in file order
    (Python: from the syntax tree; C++: see _brace_spans); wanted lines outside any function
    make one span from the first to the last of them."""
    spans = _python_spans(path, wanted) if path.endswith(".py") else _brace_spans(path, wanted)
    spans = [s for s in spans if not any(o != s and o[0] <= s[0] and s[1] <= o[1] for o in spans)]
    covered = {n for a, b in spans for n in range(a, b + 1)}
    rest = sorted(n for n in wanted if n not in covered)
    if rest:
        spans.append((rest[0], rest[-1]))
    return sorted(set(spans))


def _python_spans(path: str, wanted: set[int]) -> list[tuple[int, int]]:
    try:
        tree = ast.parse("".join(linecache.getlines(path)))
    except SyntaxError:
        return []
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None:
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if any(first <= n <= node.end_lineno for n in wanted):
                spans.append((first, node.end_lineno))
    return spans


_BRACE_REACH = 400  # lines searched above and below a wanted line


def _brace_spans(path: str, wanted: set[int]) -> list[tuple[int, int]]:
    """For a brace language, as kernel files are formatted: a function starts at the nearest line
    above that begins in column 0 with code (not a comment, directive or brace) and ends at the
    next line that is a `}` in column 0."""
    lines = linecache.getlines(path)
    spans = set()
    for n in wanted:
        first = next((k for k in range(n, max(n - _BRACE_REACH, 0), -1) if _starts_definition(lines[k - 1])), 0)
        last = next((k for k in range(n, min(n + _BRACE_REACH, len(lines)) + 1) if lines[k - 1].startswith("}")), 0)
        if first and last:
            spans.add((first, last))
    return sorted(spans)


def _starts_definition(text: str) -> bool:
    return bool(text[:1].strip()) and not text.startswith(("//", "/*", "#", "}", "{"))


def annotate(profile: LineProfile, top: int = 3) -> str:
    """The critical path, then each source file's functions that produced instructions, one
    gutter of figures per line (blank for lines without instructions), the `top` busiest lines
    marked with >>."""
    hot = {(s.file, s.line) for s in profile.rows[:top] if s.total_ns > 0}
    by_file: dict[str, dict[int, LineStats]] = {}
    for (file, line), s in profile.lines.items():
        by_file.setdefault(file, {})[line] = s
    order = sorted(by_file, key=lambda f: -sum(s.total_ns for s in by_file[f].values()))
    path_ns = profile.critical_path.total_ns
    out = [_headline(profile), _path_summary(profile), _HEADER + f"{'line':>6}  source"]
    for file in order:
        stats = by_file[file]
        out.append(f"{'':{len(_HEADER)}} {_short(file)}")
        if not linecache.getlines(file):
            for n in sorted(stats):
                out.append(_gutter(stats[n], (file, n) in hot, path_ns) + f"{n:>6}  (source not available)")
            continue
        for k, (first, last) in enumerate(_function_spans(file, set(stats))):
            if k:
                out.append(_BLANK + f"{_GAP:>6}")
            for n in range(first, last + 1):
                text = linecache.getline(file, n).rstrip("\n")
                gutter = _gutter(stats[n], (file, n) in hot, path_ns) if n in stats else _BLANK
                out.append(f"{gutter}{n:>6}  {text}")
    return "\n".join(out)


def _headline(profile: LineProfile) -> str:
    return (f"kernel {profile.kernel_name} on {profile.target}: {profile.total_ns / 1e3:.2f} us "
            f"({profile.launch_ns / 1e3:.1f} us of it launch overhead); engines busy "
            f"{profile.busy_ns / 1e3:.2f} us in all")


def _path_summary(profile: LineProfile) -> str:
    path = profile.critical_path
    tail = max(path.tail_ns, 0.0)  # a rounding below 0 prints as 0
    lines = [f"critical path: {path.total_ns / 1e3:.2f} us over {path.instructions} instructions, then "
             f"{tail / 1e3:.2f} us until the last result is visible and {profile.launch_ns / 1e3:.1f} us "
             f"launch; these lines bound the latency, in path order (us on the path, of it engine-busy):"]
    for p in path.lines:
        share = 100 * p.ns / path.total_ns if path.total_ns else 0.0
        lines.append(f"  {_short(p.file)}:{p.line:<5} {p.ns / 1e3:9.2f} us {share:5.1f}%  "
                     f"busy {p.busy_ns / 1e3:7.2f} us  {p.instructions:4} instr  "
                     f"{linecache.getline(p.file, p.line).strip()}")
    return "\n".join(lines)


def ranked_table(profile: LineProfile, n: int = 10) -> str:
    """The critical path, then the n busiest lines with their figures."""
    out = [_headline(profile), _path_summary(profile),
           f"{'busy us':>9} {'share':>6} {'instrs':>7} {'trips':>6} {'engine':>6} {'wait us':>9} {'DMA KiB':>9}  line"]
    for s in profile.rows[:n]:
        out.append(f"{s.total_ns / 1e3:9.2f} {100 * s.share:5.1f}% {s.instructions:7} {s.trips:6} {s.engine:>6} "
                   f"{s.total_wait_ns / 1e3:9.2f} {s.dma_bytes / 1024:9.1f}  {_short(s.file)}:{s.line}  "
                   f"{linecache.getline(s.file, s.line).strip()}")
    return "\n".join(out)
