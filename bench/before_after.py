"""The same benchmarks against two builds of Knit, back to back: the "no worse than before" check.

    python3 bench/before_after.py --before /work/wt/baseline --after /work/main
    python3 bench/before_after.py --before B --after A --benchmarks jit_speed --rounds 2 -- --quick

Each round runs every benchmark on the build before and then on the build after (alternating,
so that the machine's load, which moves by tens of percent on a shared VM, weighs on both
alike), each in a fresh process with KNIT_BENCH_TREE naming the checkout measured; every run
writes its own results file to bench/results/, named by that checkout's commit. Arguments
after `--` go to jit_speed.py. Then, per benchmark, a table of each row's figure before and
after (the best over the rounds), after / before, and each side's ratio against the baseline
measured in its own run (less sensitive to the load than the times); a row met on one side only
is marked. On a loaded machine one round is not enough: with the same build on both sides
(bench/results/2026-12-05-9caeb20-before_after.txt, load average 8) single rows moved by
0.7-5x; use several rounds and look at the ratios.
The comparison itself is written to bench/results/ as well.

A checkout is measured as it is: its python/knit with the extension built there (_core, _cppc)
and its examples/. An extension compiles C++ kernel files against the headers and precompiled
header of the checkout it was built in (paths fixed at build time), so build each checkout in
place (`cmake -S X -B X/build -G Ninja && ninja -C X/build knit_precompiled_header`); an
extension copied from elsewhere compiles them against another checkout's headers.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

import record

BENCHMARKS = ("jit_speed", "calibration")


def seconds(text):
    """'12.8 ms' -> 0.0128; None for '-'."""
    value, _, unit = text.partition(" ")
    scale = {"us": 1e-6, "ms": 1e-3, "s": 1.0}.get(unit)
    return float(value) * scale if scale else None


def run(benchmark, tree, extra):
    """One run of `benchmark` measuring `tree`; returns its rows (the --json output)."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    env = dict(os.environ, KNIT_BENCH_TREE=tree)
    env.pop("PYTHONPATH", None)  # the tree's python/ is what gets measured, nothing else
    argv = [sys.executable, os.path.join(record.BENCH, f"{benchmark}.py"), "--json", out]
    argv += extra if benchmark == "jit_speed" else []
    print(f"[before_after] {benchmark} on {tree}", file=sys.stderr, flush=True)
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=False)
    try:
        if done.returncode != 0:
            raise SystemExit(f"{benchmark} on {tree} failed (exit {done.returncode})")
        with open(out) as f:
            return json.load(f)
    finally:
        os.remove(out)


def best(runs, key):
    """{row name: row} keeping, per row, the run with the smallest `key` (the least disturbed)."""
    rows = {}
    for r in (row for rows_ in runs for row in rows_):
        if key(r) is not None and (r["name"] not in rows or key(r) < key(rows[r["name"]])):
            rows[r["name"]] = r
        rows.setdefault(r["name"], r)
    return rows


def compare_jit_speed(before, after):
    b, a = best(before, lambda r: seconds(r["knit"])), best(after, lambda r: seconds(r["knit"]))
    lines = [f"{'benchmark':<70}{'before':>10}{'after':>10}{'after/before':>14}{'ratio before':>17}"
             f"{'ratio after':>17}  verdict before -> after"]
    for name, rb in b.items():
        ra = a.get(name)
        if ra is None:
            lines.append(f"{name:<70}{rb['knit']:>10}{'(no row)':>10}")
            continue
        tb, ta = seconds(rb["knit"]), seconds(ra["knit"])
        change = f"{ta / tb:.2f}x" if tb and ta else "-"
        verdicts = rb["verdict"] if rb["verdict"] == ra["verdict"] else f"{rb['verdict']} -> {ra['verdict']}"
        if (rb["verdict"] == "met") != (ra["verdict"] == "met"):
            verdicts += "  << met before, not after" if rb["verdict"] == "met" else "  << met after, not before"
        lines.append(f"{name:<70}{rb['knit']:>10}{ra['knit']:>10}{change:>14}{rb['ratio']:>17}{ra['ratio']:>17}"
                     f"  {verdicts}")
    return lines


def compare_calibration(before, after):
    b, a = before[-1], after[-1]  # simulated figures are deterministic: the last run of each
    by_name = {r["name"]: r for r in a}
    lines = [f"{'row':<20}{'before ms':>11}{'after ms':>11}{'error before':>14}{'error after':>13}  row"]
    for rb in b:
        ra = by_name.get(rb["name"], {})
        lines.append(f"{rb['name']:<20}{rb['simulated_ms']:>11.2f}{ra.get('simulated_ms', float('nan')):>11.2f}"
                     f"{100 * rb['error']:>13.1f}%{100 * ra.get('error', float('nan')):>12.1f}%  "
                     f"{'FITTED' if rb['fitted'] else 'validation'}")
    for label, rows in (("before", b), ("after", a)):
        errs = [abs(r["error"]) for r in rows if not r["fitted"]]
        lines.append(f"validation mean |error| {label}: {100 * sum(errs) / len(errs):.1f}%")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="checkout with the build before the changes")
    ap.add_argument("--after", required=True, help="checkout with the build after them")
    ap.add_argument("--benchmarks", default=",".join(BENCHMARKS), help="comma-separated (default: all)")
    ap.add_argument("--rounds", type=int, default=1, help="before/after pairs per benchmark (default 1)")
    ap.add_argument("extra", nargs=argparse.REMAINDER, help="-- then arguments for jit_speed.py")
    opts = ap.parse_args()
    extra = opts.extra[1:] if opts.extra[:1] == ["--"] else opts.extra
    trees = {"before": os.path.abspath(opts.before), "after": os.path.abspath(opts.after)}
    for label, tree in trees.items():
        if not glob.glob(os.path.join(tree, "python", "knit", "_core*.so")):
            raise SystemExit(f"{label}: no built extension in {tree}/python/knit (build that checkout first)")
    benchmarks = [b for b in opts.benchmarks.split(",") if b]
    results = {b: {"before": [], "after": []} for b in benchmarks}
    for _ in range(opts.rounds):
        for b in benchmarks:
            for label, tree in trees.items():
                results[b][label].append(run(b, tree, extra))
    with record.recorded("before_after", trees["after"]):
        for label, tree in trees.items():
            print(f"{label}: {tree} at {record.commit(tree)}")
        print(f"rounds: {opts.rounds}; jit_speed arguments: {' '.join(extra) or '(none)'}")
        for b in benchmarks:
            print(f"\n{b}")
            compare = compare_jit_speed if b == "jit_speed" else compare_calibration
            for line in compare(results[b]["before"], results[b]["after"]):
                print(line)


if __name__ == "__main__":
    main()
