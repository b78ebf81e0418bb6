"""knit.compare_profiles and `knit profile --compare A.json B.json`: what a change did, per engine
and per source line (docs/profiling.md).

Both sides are by-line documents (LineProfile.to_json(), the output of `knit profile --by-line
--json`, docs/cli.md). Lines are matched by their file's name and their text, so an edit that
moves a line keeps it matched; the k-th line of one text in a file matches the k-th of the other.
"""
from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ._lines import SCHEMA_VERSION as BY_LINE_SCHEMA
from .errors import KnitError

SCHEMA_VERSION = 1
_FIGURES = ("total_busy_ns", "total_wait_ns", "critical_path_ns", "instructions", "dma_bytes")
_HOW_TO_MAKE = "write one with `knit profile FILE::KERNEL --by-line --json > A.json` or LineProfile.json()"


def by_line_document(x: Any) -> dict[str, Any]:
    """A by-line document from a Profile, a LineProfile, a parsed document or a JSON file's path."""
    if hasattr(x, "by_line"):
        x = x.by_line()
    if hasattr(x, "to_json"):
        return x.to_json()
    if isinstance(x, str | os.PathLike):
        try:
            with open(x) as f:
                doc = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            raise KnitError(f"{os.fspath(x)}: not a readable by-line profile ({e}); {_HOW_TO_MAKE}") from None
        return _checked(doc, os.fspath(x))
    if isinstance(x, dict):
        return _checked(x, "the document")
    raise TypeError(f"compare_profiles takes Profiles, LineProfiles, by-line JSON documents or their paths, "
                    f"not {type(x).__name__}")


def _checked(doc: Any, name: str) -> dict[str, Any]:
    if not isinstance(doc, dict) or "lines" not in doc or "schema_version" not in doc:
        raise KnitError(f"{name}: not a by-line profile (no schema_version and lines); {_HOW_TO_MAKE}")
    if doc["schema_version"] != BY_LINE_SCHEMA:
        raise KnitError(f"{name}: by-line schema_version {doc['schema_version']}, this Knit reads "
                        f"{BY_LINE_SCHEMA}; make it again with this Knit")
    return doc


def _keyed(lines: Iterable[dict[str, Any]]) -> dict[tuple[str, str, int], dict[str, Any]]:
    """{(file name, source text, occurrence): line}: the k-th line of one text in a file is k."""
    seen: Counter[tuple[str, str]] = Counter()
    out = {}
    for entry in sorted(lines, key=lambda e: (e["file"], e["line"])):
        base = (os.path.basename(entry["file"]), entry.get("source") or f"line {entry['line']}")
        out[(*base, seen[base])] = entry
        seen[base] += 1
    return out


def _engine(queue: str) -> str:
    return "dma" if queue.startswith("dma") else queue


def _engine_busy(doc: dict[str, Any]) -> dict[str, float]:
    busy: dict[str, float] = {}
    for entry in doc["lines"]:
        for q, ns in entry["busy_ns"].items():
            busy[_engine(q)] = busy.get(_engine(q), 0.0) + ns
    return busy


@dataclass
class LineDelta:
    """One source line in both runs (before or after is None where the line has no instructions)."""

    file: str
    source: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None

    def figure(self, name: str) -> tuple[float, float, float]:
        """(before, after, after - before) of one of the line's figures (0 where absent)."""
        a = self.before[name] if self.before else 0
        b = self.after[name] if self.after else 0
        return a, b, b - a

    @property
    def line(self) -> int:
        return (self.after or self.before or {}).get("line", 0)

    @property
    def size(self) -> float:
        """How much the line changed: busy time and time on the critical path."""
        return abs(self.figure("total_busy_ns")[2]) + abs(self.figure("critical_path_ns")[2])

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"file": self.file, "source": self.source,
                               "line_before": self.before["line"] if self.before else None,
                               "line_after": self.after["line"] if self.after else None}
        for name in _FIGURES:
            a, b, d = self.figure(name)
            out[name] = {"before": a, "after": b, "delta": d}
        return out


class ProfileComparison:
    """Two by-line profiles side by side: latency, engine busy time and per-line deltas (after -
    before). `lines` is ordered by how much each line changed; str() is a report."""

    def __init__(self, before: dict[str, Any], after: dict[str, Any]):
        self.before, self.after = before, after
        keyed_a, keyed_b = _keyed(before["lines"]), _keyed(after["lines"])
        keys = list(keyed_a) + [k for k in keyed_b if k not in keyed_a]
        self.lines = sorted((LineDelta(k[0], k[1], keyed_a.get(k), keyed_b.get(k)) for k in keys),
                            key=lambda d: -d.size)
        busy_a, busy_b = _engine_busy(before), _engine_busy(after)
        self.engines = {e: (busy_a.get(e, 0.0), busy_b.get(e, 0.0)) for e in sorted({*busy_a, *busy_b})}

    @property
    def latency_ns(self) -> tuple[float, float]:
        return self.before["total_ns"], self.after["total_ns"]

    @property
    def speedup(self) -> float:
        a, b = self.latency_ns
        return a / b if b else 0.0

    def to_json(self) -> dict[str, Any]:
        a, b = self.latency_ns
        return {"schema_version": SCHEMA_VERSION,
                "before": {"kernel": self.before["kernel"], "target": self.before["target"]},
                "after": {"kernel": self.after["kernel"], "target": self.after["target"]},
                "total_ns": {"before": a, "after": b, "delta": b - a},
                "critical_path_ns": {"before": self.before["critical_path"]["total_ns"],
                                     "after": self.after["critical_path"]["total_ns"],
                                     "delta": self.after["critical_path"]["total_ns"]
                                     - self.before["critical_path"]["total_ns"]},
                "engines": {e: {"before": x, "after": y, "delta": y - x} for e, (x, y) in self.engines.items()},
                "lines": [d.to_json() for d in self.lines]}

    def __str__(self) -> str:
        return _report(self)

    def __repr__(self) -> str:
        return str(self)


def _us(ns: float) -> str:
    """A delta in us; '0' for none (below the printed precision: sums in another order differ in
    the last bits)."""
    return f"{ns / 1e3:+.2f}" if abs(ns) >= 5 else "0"


def _report(c: ProfileComparison, n: int = 15) -> str:
    a, b = c.latency_ns
    pct = 100 * (b - a) / a if a else 0.0
    out = [f"{c.before['kernel']} ({c.before['target']}) -> {c.after['kernel']} ({c.after['target']}): "
           f"{a / 1e3:.2f} us -> {b / 1e3:.2f} us ({pct:+.1f}%, speedup {c.speedup:.2f}x)",
           f"  {'engine':<8}{'busy before':>12}{'after':>10}{'delta us':>10}"]
    for e, (x, y) in c.engines.items():
        out.append(f"  {e:<8}{x / 1e3:>12.2f}{y / 1e3:>10.2f}{_us(y - x):>10}")
    out.append(f"  {'busy us':>9}{'wait us':>9}{'path us':>9}{'instrs':>8}{'DMA KiB':>10}  line (before -> after)")
    for d in c.lines[:n]:
        busy, wait, path, count, nbytes = (d.figure(f)[2] for f in _FIGURES)
        where = f"{d.before['line'] if d.before else '-'} -> {d.after['line'] if d.after else '-'}"
        out.append(f"  {_us(busy):>9}{_us(wait):>9}{_us(path):>9}{int(count):>+8}{nbytes / 1024:>+10.1f}  "
                   f"{d.file}:{where}  {d.source}")
    if len(c.lines) > n:
        out.append(f"  ... {len(c.lines) - n} more lines (to_json() has them all)")
    return "\n".join(out)


def compare_profiles(before: Any, after: Any) -> ProfileComparison:
    """Per-engine and per-line deltas from `before` to `after`: each a Profile, a LineProfile, a
    by-line JSON document or the path of one (`knit profile --by-line --json`)."""
    return ProfileComparison(by_line_document(before), by_line_document(after))
