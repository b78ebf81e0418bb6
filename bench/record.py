"""What every benchmark here shares: which checkout it measures, and where its output goes.

The measured checkout (its python/ package with the built extension, and its examples/) is the
one holding this script, or $KNIT_BENCH_TREE when set: a before/after comparison runs the same
benchmark scripts against two builds (bench/baseline.sh). Child processes inherit the variable,
so they measure the same build.

Each benchmark prints its output and, through `recorded`, also writes all of it to
bench/results/<YYYY-MM-DD>-<commit>-<benchmark>.txt, where <commit> is the measured checkout's
short HEAD, with "-dirty" when tracked files differ from it (untracked files do not count). A
second run on the same day and commit gets "-2", "-3", ... instead of overwriting the first.
"""
import contextlib
import os
import subprocess
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(BENCH, "results")
TREE = os.path.abspath(os.environ.get("KNIT_BENCH_TREE") or os.path.dirname(BENCH))


def use_tree(*extra):
    """Puts the measured checkout's python/ (and `extra` folders under it) first on sys.path."""
    for path in (os.path.join(TREE, "python"), *(os.path.join(TREE, e) for e in extra)):
        if path in sys.path:
            sys.path.remove(path)
        sys.path.insert(0, path)


def commit(tree):
    """`tree`'s short HEAD commit, "-dirty" appended when tracked files have changes."""
    def git(*args):
        done = subprocess.run(["git", "-C", tree, *args], check=False, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else None

    head = git("rev-parse", "--short", "HEAD")
    if head is None:
        return "unknown"
    return head + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def results_path(benchmark, tree_commit, day=None):
    """A new file name under bench/results/ for this run (never an existing one)."""
    stem = f"{day or time.strftime('%Y-%m-%d', time.gmtime())}-{tree_commit}-{benchmark}"
    path, n = os.path.join(RESULTS, stem + ".txt"), 1
    while os.path.exists(path):
        n += 1
        path = os.path.join(RESULTS, f"{stem}-{n}.txt")
    return path


class _Tee:
    """A text stream that writes to the real stdout and keeps a copy."""

    def __init__(self, out):
        self.out, self.lines = out, []

    def write(self, text):
        self.lines.append(text)
        return self.out.write(text)

    def flush(self):
        self.out.flush()


@contextlib.contextmanager
def recorded(benchmark, tree=None):
    """Runs the body with stdout also captured; then writes what it printed to a new results
    file (also when the body fails, with the error as the last line) and names the file on
    stderr. Prints first the command, the measured checkout (`tree`, default TREE) and both
    commits; the file is named by the measured checkout's."""
    tree = tree or TREE
    tree_commit = commit(tree)
    tee = _Tee(sys.stdout)
    sys.stdout = tee
    failed = None
    try:
        print(f"command: {' '.join([os.path.relpath(sys.argv[0]), *sys.argv[1:]])}")
        print(f"measured: {tree} at {tree_commit} (benchmark scripts at {commit(BENCH)})")
        yield
    except BaseException as e:
        failed = e
        raise
    finally:
        sys.stdout = tee.out
        if failed is not None:
            tee.lines.append(f"\nthe run failed: {type(failed).__name__}: {failed}\n")
        os.makedirs(RESULTS, exist_ok=True)
        path = results_path(benchmark, tree_commit)
        with open(path, "w") as f:
            f.write("".join(tee.lines))
        print(f"[{benchmark}] output written to {os.path.relpath(path)}", file=sys.stderr)
