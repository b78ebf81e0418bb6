"""The code blocks of README.md, bench/README.md and docs/*.md run, so the docs cannot rot.

- ```python blocks run as scripts, each in a fresh namespace, from a temporary folder in which
  `examples/` is the repository's. A block right after `<!-- continues -->` runs in the
  namespace the previous Python block of the same file left, so a page can build an example up
  step by step.
- ```sh blocks: each line that is a `knit ...` command runs as `python3 -m knit ...` from the
  repository root; other lines (`./dev`, `pip`, ...) are not run.
- ```cpp blocks are C++ kernel files: they compile with knit.cpp.load (a file needs at least one
  KNIT_KERNEL mark). A block with `int main(` is a program of its own: it must compile
  (clang++ -fsyntax-only against Knit's headers).
- A block right after `<!-- fragment: why -->` is not complete on its own (a signature, a
  `...` body) and is skipped with that reason. Keep them few.
- IR text blocks (```tir) parse and print back unchanged, unless marked `<!-- fragment -->`.
Other fences (plain ```, ```text, ```cmake) are output or syntax and are not run. Relative links
between the files must resolve (test_links_resolve)."""
import os
import re
import runpy
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", REPO / "bench" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
MARK = re.compile(r"<!--\s*(fragment|continues)\s*(?::\s*(.*?))?\s*-->")


class Block:
    def __init__(self, doc, line, lang, text, mark, reason):
        self.doc, self.line, self.lang, self.text = doc, line, lang, text
        self.mark, self.reason = mark, reason

    @property
    def id(self):
        return f"{self.doc.relative_to(REPO)}:{self.line}"


def blocks(doc):
    """The fenced blocks of one Markdown file, with the mark in the line before each (blank lines
    between a mark and its fence are allowed)."""
    lines = doc.read_text().splitlines()
    out, i, mark, reason = [], 0, None, None
    while i < len(lines):
        line = lines[i]
        m = MARK.fullmatch(line.strip())
        if m:
            mark, reason = m.group(1), m.group(2) or ""
        elif line.startswith("```"):
            lang, start, body = line[3:].strip(), i + 1, []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            out.append(Block(doc, start, lang, "\n".join(body) + "\n", mark, reason))
            mark = reason = None
        elif line.strip():
            mark = reason = None
        i += 1
    return out


ALL = [b for doc in DOCS for b in blocks(doc)]


def of(lang):
    return [pytest.param(b, id=b.id) for b in ALL if b.lang == lang]


def skip_fragment(block):
    if block.mark == "fragment":
        pytest.skip(f"marked a fragment in the doc: {block.reason or 'no reason given'}")


# Namespaces left by the Python blocks, per file, for `<!-- continues -->` blocks. Tests run in
# file order, so a continued block finds its predecessor's namespace.
_namespaces = {}


@pytest.mark.parametrize("block", of("python"))
def test_python_block(block, tmp_path, monkeypatch):
    skip_fragment(block)
    previous = _namespaces.get(block.doc)
    if block.mark == "continues" and previous is None:
        pytest.fail(f"{block.id}: marked `continues` but no Python block ran before it in this file")
    # A real file (named for the doc and line), so tracebacks, kernel locations and inspect work.
    # The line padding makes line numbers in tracebacks those of the doc.
    script = tmp_path / f"{block.doc.stem}_L{block.line}.py"
    script.write_text("\n" * block.line + block.text)
    # Blocks name example files by repository-relative paths; whatever they write lands here.
    (tmp_path / "examples").symlink_to(REPO / "examples")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KNIT_PROGRESS", "0")
    init = None
    if block.mark == "continues":
        init = {k: v for k, v in previous.items() if k not in ("__name__", "__file__", "__builtins__")}
    modules, environ = set(sys.modules), dict(os.environ)
    try:
        _namespaces[block.doc] = runpy.run_path(str(script), init_globals=init, run_name="__main__")
    finally:
        # A block may set environment switches (KNIT_UNINITIALIZED=warn, ...): restore them.
        os.environ.clear()
        os.environ.update(environ)
        # knit.compat.install() aliases `nki` modules; do not leak them into other tests.
        import knit.compat

        knit.compat.uninstall()
        for name in set(sys.modules) - modules:
            if name.split(".")[0] in ("nki", "neuronxcc"):
                del sys.modules[name]


def knit_commands(text):
    return [line.split("#")[0].strip() for line in text.splitlines() if line.startswith("knit ")]


@pytest.mark.parametrize("block", [p for p in of("sh") if knit_commands(p.values[0].text)])
@pytest.mark.slow
def test_knit_command_block(block, tmp_path):
    skip_fragment(block)
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"), KNIT_PROGRESS="0")
    for command in knit_commands(block.text):
        argv = [sys.executable, "-m", "knit", *shlex.split(command)[1:]]
        r = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"{block.id}: `{command}` failed:\n{r.stdout}\n{r.stderr}"


@pytest.mark.parametrize("block", of("cpp"))
def test_cpp_block(block, tmp_path):
    skip_fragment(block)
    import knit.cpp

    source = tmp_path / f"{block.doc.stem}_L{block.line}.cpp"
    source.write_text("\n" * (block.line - 1) + block.text)
    if "int main(" in block.text:
        # A program of its own (linked against knit::knit), not a kernel file: a kernel file
        # cannot call the simulator. Check that it compiles against Knit's headers.
        from knit import _cppc

        clang = os.environ.get("KNIT_CLANGXX", "/usr/lib/llvm-19/bin/clang++")
        includes = [f"-I{d}" for d in _cppc.include_dirs()]
        r = subprocess.run([clang, "-std=c++20", "-fsyntax-only", *includes, str(source)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"{block.id}: the program does not compile:\n{r.stderr}"
        return
    module = knit.cpp.load(str(source))
    assert module.kernels, f"{block.id}: no KNIT_KERNEL in the block"


@pytest.mark.parametrize("block", of("tir"))
def test_ir_block(block):
    skip_fragment(block)
    from knit import _core

    printed = _core.roundtrip_ir(block.text)
    # The printer drops comments and trailing blanks; everything else must print back as written.
    written = "\n".join(re.sub(r"\s*#.*$", "", line).rstrip() for line in block.text.splitlines())
    written = "\n".join(line for line in written.splitlines() if line.strip()) + "\n"
    assert printed == written, f"{block.id}: the IR does not print back as written"


def test_marks_are_used():
    """A mark applies to the next fence; a mark followed by prose is a mistake in the doc."""
    for doc in DOCS:
        lines = doc.read_text().splitlines()
        for i, line in enumerate(lines):
            if MARK.fullmatch(line.strip()):
                rest = [after for after in lines[i + 1:] if after.strip()]
                assert rest and rest[0].startswith("```"), f"{doc.relative_to(REPO)}:{i + 1}: mark not before a block"


def slug(heading):
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def test_links_resolve():
    """Relative links between the docs point at files that exist, and #anchors at headings."""
    bad = []
    for doc in DOCS:
        text = doc.read_text()
        text = re.sub(r"```.*?```", "", text, flags=re.S)  # links inside code are not links
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            file = (doc.parent / path).resolve() if path else doc
            if not file.exists():
                bad.append(f"{doc.relative_to(REPO)}: {target} (no such file)")
            elif anchor and file.suffix == ".md":
                headings = re.findall(r"^#+ (.*)$", re.sub(r"```.*?```", "", file.read_text(), flags=re.S), re.M)
                if anchor not in {slug(h) for h in headings}:
                    bad.append(f"{doc.relative_to(REPO)}: {target} (no such heading)")
    assert bad == [], "broken links:\n" + "\n".join(bad)
