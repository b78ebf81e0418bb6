"""Functional simulation at big shapes: Knit's JIT backend against eager NumPy, and the sizes NKI's
own simulator skips.

    python3 bench/big_shapes.py                 # sections c and d, a few minutes on 2 cores
    python3 bench/big_shapes.py --sections d    # only the 2048x2048 comparison
    python3 bench/big_shapes.py --quick         # smaller section c shapes, fewer repeats

The output is also written to bench/results/ (bench/record.py).

Sections (issue 25's numbering; every time is the best of --repeats runs, time.perf_counter, after
one warm-up run that compiles the bodies):
  d. tensor_add, softmax, rmsnorm and layernorm (examples/kernels/python) at 2048x2048 fp32:
     `Compiled.run(..., backend="jit", check_races=False)` against the eager NumPy interpreter
     (bench/numpy_eager.py) on the same inputs, in one process, alternating kernel by kernel.
     The goal is Knit at least 1.5x faster. Each row's output is compared byte for byte with the
     reference interpreter's (`Compiled.reference`), and the eager output allclose with Knit's.
     Both wall time and process CPU time are printed: on a shared machine the CPU time is the
     steadier figure, the wall time the one the goal is about. A fifth row, marked (extra), is
     NKIBench's silu (examples/kernels/python/nkibench/silu.py): a chain of element-wise
     instructions led by a plain activation(exp), outside the goal.
  c. functional runs at the shapes NKI's simulator skips (4096..16384): each row in a fresh
     subprocess, with the JIT backend, and the eager NumPy interpreter in another fresh
     subprocess where it covers the kernel. A row prints the first run (importing Knit's modules
     and compiling the bodies included), the best warm run, each process's peak resident memory
     while it runs the kernel (VmHWM, reset once the inputs exist: the inputs themselves count,
     their generation's float64 temporaries do not) and the ratio of the warm times.
"""
import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/: record, numpy_eager
import record  # noqa: E402

record.use_tree(os.path.join("examples", "kernels", "python"))
os.environ.setdefault("KNIT_PROGRESS", "0")

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

THIS = os.path.abspath(__file__)
GOAL = 1.5  # section d: Knit at least this many times faster than eager NumPy
GOAL_KERNELS = ("tensor_add", "softmax", "rmsnorm", "layernorm")  # issue 25's section d


def progress(msg):
    print(f"[big_shapes] {msg}", file=sys.stderr, flush=True)


def timed(repeats, fn):
    """(best wall seconds, best process CPU seconds) of `repeats` calls of fn."""
    wall, cpu = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        fn()
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
    return min(wall), min(cpu)


def ms(s):
    return f"{s * 1e3:.1f} ms" if s < 10 else f"{s:.1f} s"


def inputs(kernel, shape, seed=0):
    """(kernel function, args) of an example kernel at shape (rows, cols) fp32; matmul: a square
    bf16 [n, n] @ [n, n] given as (lhsT, rhs)."""
    rng = np.random.default_rng(seed)

    def randn(*s, dtype=np.float32):
        return rng.standard_normal(s).astype(dtype)

    rows, cols = shape
    if kernel == "matmul":
        from matmul import matmul_kernel
        return matmul_kernel, (randn(rows, rows, dtype=ml_dtypes.bfloat16), randn(rows, cols, dtype=ml_dtypes.bfloat16))
    if kernel == "silu":  # NKIBench's silu: activation(exp), tensor_scalar, reciprocal, multiply
        from nkibench.silu import silu_kernel
        return silu_kernel, (randn(rows, cols),)
    if kernel == "tensor_add":
        from tensor_add import tensor_add_kernel
        return tensor_add_kernel, (randn(rows, cols), randn(rows, cols))
    if kernel == "softmax":
        from softmax import softmax_kernel
        return softmax_kernel, (randn(rows, cols),)
    if kernel == "rmsnorm":
        from rmsnorm import rmsnorm_kernel
        return rmsnorm_kernel, (randn(rows, cols), randn(cols))
    if kernel == "layernorm":
        from layernorm import layernorm_kernel
        return layernorm_kernel, (randn(rows, cols), randn(cols), randn(cols))
    raise ValueError(kernel)


def same_bytes(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


# ---- d. 2048x2048 against eager NumPy, one process -------------------------------------------


def section_d(n, repeats):
    import numpy_eager

    import knit

    print(f"\nd. {n}x{n} fp32, JIT backend vs eager NumPy (best of {repeats}; goal: >= {GOAL:g}x faster)")
    print(f"   {'kernel':<11} {'knit wall':>10} {'eager wall':>11} {'ratio':>7}   {'knit cpu':>9} {'eager cpu':>10} "
          f"{'ratio':>7}   verdict   evidence")
    met = True
    for label in (*GOAL_KERNELS, "silu"):  # silu: an element-wise chain of a plain activation, not a goal row
        progress(f"d. {label} {n}x{n}")
        kernel, args = inputs(label, (n, n))
        c = knit.compile(kernel, *args)
        out = c.run(*args, backend="jit", check_races=False)  # warm-up: compiles the bodies
        counts = c.last_run
        ref = c.reference(*args)
        eager = numpy_eager.run(kernel, *args)
        identical = same_bytes(out, ref)
        close = bool(np.allclose(eager, out, rtol=1e-4, atol=1e-5))
        knit_w, knit_c = timed(repeats, lambda c=c, args=args: c.run(*args, backend="jit", check_races=False))
        eager_w, eager_c = timed(repeats, lambda kernel=kernel, args=args: numpy_eager.run(kernel, *args))
        ratio, cpu_ratio = eager_w / knit_w, eager_c / knit_c
        ok = identical and close and counts["interpreted"] == 0
        verdict = ("met" if ratio >= GOAL else f"missed by {GOAL / ratio:.2f}x") if ok else "not met: evidence"
        if label not in GOAL_KERNELS:
            verdict = "(extra)" if ok else verdict
        else:
            met = met and ok and ratio >= GOAL
        ev = (f"native {counts['native']} / interpreted {counts['interpreted']}; "
              f"{'same bytes as' if identical else 'DIFFERS from'} Compiled.reference; "
              f"eager {'allclose' if close else 'NOT allclose'}")
        print(f"   {label:<11} {ms(knit_w):>10} {ms(eager_w):>11} {ratio:>6.2f}x   {ms(knit_c):>9} {ms(eager_c):>10} "
              f"{cpu_ratio:>6.2f}x   {verdict:<9} {ev}")
    print("   ratio = eager time / Knit time (above 1: Knit faster)")
    return met


def runs_only(n):
    import knit

    for label in GOAL_KERNELS:
        kernel, args = inputs(label, (n, n))
        c = knit.compile(kernel, *args)
        for _ in range(11):
            c.run(*args, backend="jit", check_races=False)


# ---- c. big shapes, each in a fresh process --------------------------------------------------


def peak_rss_bytes():
    """The process's peak resident set since the last reset_peak_rss (VmHWM), else since it
    started (ru_maxrss)."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def reset_peak_rss():
    """Starts VmHWM again from the current resident set (Linux: clear_refs 5), so the peak is the
    runs' own and not the input generation's (float64 draws before the cast to fp32)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def child(spec):
    """Runs in a subprocess: spec = "side,kernel,rows,cols,repeats" (side: knit | eager). Prints
    {"first": s, "best": s, "peak_bytes": n, "native": n, "interpreted": n} as JSON."""
    side, kernel, rows, cols, repeats = spec.split(",")
    fn, args = inputs(kernel, (int(rows), int(cols)))
    gc.collect()
    reset_peak_rss()
    result = {}
    if side == "knit":
        import knit

        c = knit.compile(fn, *args)
        start = time.perf_counter()
        c.run(*args, backend="jit", check_races=False)
        result["first"] = time.perf_counter() - start
        result["best"] = timed(int(repeats), lambda: c.run(*args, backend="jit", check_races=False))[0]
        result["native"], result["interpreted"] = c.last_run["native"], c.last_run["interpreted"]
    else:
        import numpy_eager

        start = time.perf_counter()
        numpy_eager.run(fn, *args)
        result["first"] = time.perf_counter() - start
        result["best"] = timed(int(repeats), lambda: numpy_eager.run(fn, *args))[0]
    result["peak_bytes"] = peak_rss_bytes()
    print(json.dumps(result))


def run_child(side, kernel, rows, cols, repeats):
    r = subprocess.run([sys.executable, THIS, "--child", f"{side},{kernel},{rows},{cols},{repeats}"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["exit code " + str(r.returncode)])[-1]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def section_c(shapes, repeats, eager):
    print(f"\nc. functional runs at big shapes, JIT backend; each side in a fresh process "
          f"(best of {repeats} warm runs)")
    print(f"   {'kernel':<11} {'shape':<18} {'knit first':>10} {'knit warm':>10} {'knit peak':>10}   "
          f"{'eager warm':>10} {'eager peak':>10} {'ratio':>7}   instructions")
    for kernel, rows, cols in shapes:
        shape = f"{rows}x{cols}" + (" bf16" if kernel == "matmul" else " fp32")
        progress(f"c. {kernel} {shape}")
        k = run_child("knit", kernel, rows, cols, repeats)
        if "error" in k:
            print(f"   {kernel:<11} {shape:<18} failed: {k['error']}")
            continue
        # Eager NumPy's matmul runs one small np.matmul per nc_matmul: minutes at 4096^3.
        skip_eager = not eager or (kernel == "matmul" and rows > 2048)
        e = {"error": "skipped"} if skip_eager else run_child("eager", kernel, rows, cols, repeats)
        e_warm, e_peak, ratio = ("-", "-", "-") if "error" in e else (
            ms(e["best"]), f"{e['peak_bytes'] / 2**30:.2f} GiB", f"{e['best'] / k['best']:.2f}x")
        print(f"   {kernel:<11} {shape:<18} {ms(k['first']):>10} {ms(k['best']):>10} "
              f"{k['peak_bytes'] / 2**30:>6.2f} GiB   {e_warm:>10} {e_peak:>10} {ratio:>7}   "
              f"native {k['native']} / interpreted {k['interpreted']}")
    print("   matmul: lhsT [n, n] @ rhs [n, n] bf16 with an fp32 PSUM (eager only up to 2048: one np.matmul per "
          "nc_matmul takes minutes at 4096); ratio = eager warm / Knit warm")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sections", default="dc", help="which sections to run (default dc)")
    ap.add_argument("--quick", action="store_true", help="section c at smaller shapes, fewer repeats")
    ap.add_argument("--repeats", type=int, help="timed runs per measurement (default 7, --quick 3)")
    ap.add_argument("--no-eager-c", action="store_true", help="section c without the eager NumPy processes")
    ap.add_argument("--runs-only", action="store_true",
                    help="no table: compile section d's four kernels and run each 11 times (a whole-process workload "
                    "for comparing two builds from outside, e.g. with /usr/bin/time; KNIT_BENCH_TREE picks the build)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    if opts.child:
        return child(opts.child)
    if opts.runs_only:
        return runs_only(2048)
    repeats = opts.repeats or (3 if opts.quick else 7)
    if opts.quick:
        shapes = [(k, 4096, 4096) for k in GOAL_KERNELS] + [("matmul", 2048, 2048)]
    else:
        shapes = [(k, 4096, 4096) for k in GOAL_KERNELS]
        shapes += [(k, 16384, 4096) for k in GOAL_KERNELS]
        shapes += [("rmsnorm", 4096, 16384), ("matmul", 4096, 4096)]
    with record.recorded("big_shapes"):
        start = time.perf_counter()
        print(f"machine: {os.cpu_count()} cores, {sys.platform}; python {sys.version.split()[0]}, "
              f"numpy {np.__version__}")
        if "d" in opts.sections:
            section_d(2048, repeats)
        if "c" in opts.sections:
            section_c(shapes, max(2, repeats // 2), not opts.no_eager_c)
        print("\nload average at the end " + ", ".join(f"{x:.2f}" for x in os.getloadavg()) +
              f"; whole run {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
