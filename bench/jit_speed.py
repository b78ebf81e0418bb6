"""How fast Knit executes kernels on the CPU, each figure against a baseline measured in the same run.

    python3 bench/jit_speed.py              # about 2 min on 2 cores
    python3 bench/jit_speed.py --quick      # smaller sizes, fewer repeats
    python3 bench/jit_speed.py --markdown   # table as Markdown

The output is also written to bench/results/ (bench/record.py). A row's verdict is "met" only
when its time meets the goal and its evidence holds: the JIT rows ran every instruction natively
(native / interpreted counts in the row) and their output matched the baseline's check.

Sections (every time is the best of --repeats runs, time.perf_counter):
  a. matmul (examples/kernels/python/matmul.py), bf16 inputs, fp32 PSUM: `c.run(backend="jit",
     check_races=False)` after one warm-up run, against torch.matmul on fp32 tensors of the same
     shape (torch's default threads); plus jit-strict against the reference backend at a small size
     for scale.
  b. softmax, RMSNorm, LayerNorm, tensor add: the JIT backend against the reference backend and
     against an eager NumPy-per-instruction interpreter (bench/numpy_eager.py, outputs checked
     allclose to Knit's before it is timed). Each eager row counts both sides' instructions and
     DMA bytes; diagnostic rows time tensor add on narrow tiles, where the fixed cost of an
     instruction dominates, to split each side's time into per-instruction and per-byte costs.
  c. the same softmax and vector add in Triton's CPU interpreter (TRITON_INTERPRET=1), if Triton is
     installed.
  d. cold and warm start of each example kernel, each in a fresh subprocess sharing one new
     KNIT_CACHE_DIR: knit.compile + .program (lowering), then the first and a second run, with
     KNIT_JIT_THRESHOLD=0 so that the first run compiles every body natively (its native /
     interpreted counts are in the row, and its output is compared with the reference
     backend's after the timings). The
     C++ examples (examples/kernels/cpp, at their knit-run shapes) add loading the file:
     Clang + the JIT, or the disk cache; each is started cold with an empty cache (against the
     <knit/knit.h> the build precompiled), cold again as an edited file, and warm.
  e. timing-only simulation speed: executed instructions / wall time of knit.profile on a large
     matmul given as shape placeholders; the first profile of the program (which also computes
     the per-instruction costs it keeps for later ones) reported on its own.
"""
import argparse
import importlib
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/: record, numpy_eager
import record  # noqa: E402

ROOT = record.TREE  # the checkout measured: this one, or $KNIT_BENCH_TREE
EXAMPLES = os.path.join(ROOT, "examples", "kernels", "python")
record.use_tree(os.path.join("examples", "kernels", "python"))
os.environ.setdefault("KNIT_PROGRESS", "0")  # no progress bar on stderr in the middle of the table

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

THIS = os.path.abspath(__file__)


# ---- measuring -------------------------------------------------------------------------------


def best_of(repeats, fn):
    """The fastest of `repeats` calls of fn (seconds); the minimum is the least noisy estimate on a
    shared machine, where other load only ever adds time."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def progress(msg):
    print(f"[jit_speed] {msg}", file=sys.stderr, flush=True)


def fmt_time(s):
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.0f} us"
    if s < 1:
        return f"{s * 1e3:.1f} ms"
    return f"{s:.2f} s"


# ---- table rows ------------------------------------------------------------------------------


@dataclass
class Evidence:
    """What a row's verdict rests on besides its time: the instructions Knit executed (native /
    interpreted) and how its output was checked. Any problem makes the verdict "not met"."""
    instructions: str = "-"
    output: str = "-"
    problems: tuple = ()


def evidence(counts=None, output_ok=None, output=""):
    """counts: a run's Compiled.last_run; output_ok / output: the check of its output and what it
    was compared with ("same bytes as the reference backend"). The rows with counts measure the
    native path, so an instruction left to the reference executors (or none run natively) means
    the row does not measure what it says."""
    instructions, problems = "-", []
    if counts is not None:
        native, interpreted = counts["native"], counts["interpreted"]
        instructions = f"{native} / {interpreted}"
        if native == 0:
            problems.append("nothing ran natively")
        elif interpreted:
            problems.append(f"{interpreted} instructions interpreted")
    if output_ok is not None and not output_ok:
        problems.append(f"output check failed ({output})")
        output = f"FAILED: {output}"
    return Evidence(instructions, output or "-", tuple(problems))


@dataclass
class Row:
    name: str
    knit: str
    base: str
    ratio: str
    goal: str
    verdict: str
    evidence: Evidence
    note: str = ""


def _factor(x):
    return f"{x:.0f}x" if x >= 100 else f"{x:.1f}x" if x >= 10 else f"{x:.2f}x"


def _verdict(factor, ev):
    """factor = how many times faster Knit has to get to meet the goal (<= 1: met). A row whose
    evidence fails is "not met" whatever its time: a fast wrong answer meets no goal."""
    if ev.problems:
        return "not met: " + "; ".join(ev.problems)
    return "met" if factor <= 1 else f"missed by {_factor(factor)}"


def _relative(speedup):
    """Knit against the baseline in words: '3.26x faster' or '9.5x slower'."""
    return f"{_factor(speedup)} faster" if speedup >= 1 else f"{_factor(1 / speedup)} slower"


def speedup_row(name, knit_s, base_s, base_name, goal, ev, note=""):
    """Knit should be `goal` times faster than the baseline (goal None: for information)."""
    speedup = base_s / knit_s
    return Row(name, fmt_time(knit_s), f"{fmt_time(base_s)} {base_name}", _relative(speedup),
               f">= {goal:g}x faster" if goal else "info", _verdict(goal / speedup, ev) if goal else "-", ev, note)


def slowdown_row(name, knit_s, base_s, base_name, goal, ev, note=""):
    """Knit may take at most `goal` times the baseline's time."""
    slowdown = knit_s / base_s
    return Row(name, fmt_time(knit_s), f"{fmt_time(base_s)} {base_name}", _relative(1 / slowdown),
               f"<= {goal:g}x slower", _verdict(slowdown / goal, ev), ev, note)


def limit_row(name, knit_s, limit_s, ev, note=""):
    """Knit's time should be at most limit_s."""
    return Row(name, fmt_time(knit_s), "-", "-", f"<= {limit_s * 1e3:g} ms", _verdict(knit_s / limit_s, ev), ev,
               note)


def failed_row(name, why):
    return Row(name, "-", "-", "-", "-", "not measured", Evidence(), why)


def same_bytes(a, b):
    """Outputs (an array or a tuple of arrays) identical byte for byte, shapes and dtypes too."""
    a = a if isinstance(a, tuple) else (a,)
    b = b if isinstance(b, tuple) else (b,)
    return len(a) == len(b) and all(
        x.dtype == y.dtype and x.shape == y.shape and np.ascontiguousarray(x).tobytes() ==
        np.ascontiguousarray(y).tobytes() for x, y in zip(a, b))


# ---- inputs ----------------------------------------------------------------------------------

RNG = np.random.default_rng(0)


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def norm_kernels(rows, cols):
    """(label, kernel, args) for section b: the four row-wise example kernels at [rows, cols] fp32."""
    from layernorm import layernorm_kernel
    from rmsnorm import rmsnorm_kernel
    from softmax import softmax_kernel
    from tensor_add import tensor_add_kernel

    x, y, w, b = randn(rows, cols), randn(rows, cols), randn(cols), randn(cols)
    return [("softmax", softmax_kernel, (x,)), ("rmsnorm", rmsnorm_kernel, (x, w)),
            ("layernorm", layernorm_kernel, (x, w, b)), ("tensor_add", tensor_add_kernel, (x, y))]


# ---- a. matmul against torch -----------------------------------------------------------------


def bench_matmul(n, n_ref, repeats):
    import torch

    import knit
    from matmul import matmul_kernel

    rows = []
    lhsT, rhs = randn(n, n, dtype=ml_dtypes.bfloat16), randn(n, n, dtype=ml_dtypes.bfloat16)
    c = knit.compile(matmul_kernel, lhsT, rhs)
    _ = c.program  # the property lowers on first access: do it now, outside the timings
    progress(f"matmul {n}^3 bf16: JIT warm-up run")
    out = c.run(lhsT, rhs, backend="jit", check_races=False)
    knit_s = best_of(repeats, lambda: c.run(lhsT, rhs, backend="jit", check_races=False))
    counts = c.last_run  # of the last timed run

    # torch on fp32 copies of the same (bf16-representable) values: lhsT.T @ rhs.
    a = torch.from_numpy(lhsT.astype(np.float32)).T.contiguous()
    b = torch.from_numpy(rhs.astype(np.float32))
    expect = torch.matmul(a, b)  # also torch's warm-up
    torch_s = best_of(repeats, lambda: torch.matmul(a, b))
    # Knit rounds the fp32 sums to bf16 on the way out: compare at bf16 precision.
    close = np.allclose(out.astype(np.float32), expect.numpy(), rtol=1e-2, atol=1e-2 * np.sqrt(n))
    ev = evidence(counts, close, "allclose to torch at bf16 precision")
    rows.append(slowdown_row(f"a. matmul {n}^3 bf16, JIT vs torch fp32 ({torch.get_num_threads()} threads)",
                             knit_s, torch_s, "torch", 3, ev))

    # The reference backend is too slow at n; measure it at n_ref to show the scale.
    progress(f"matmul {n_ref}^3 bf16: jit-strict vs reference backend")
    lhsT, rhs = randn(n_ref, n_ref, dtype=ml_dtypes.bfloat16), randn(n_ref, n_ref, dtype=ml_dtypes.bfloat16)
    c = knit.compile(matmul_kernel, lhsT, rhs)
    # jit-strict: compiled whatever the size (at --quick's the default backend would interpret it).
    out = c.run(lhsT, rhs, backend="jit-strict", check_races=False)
    jit_s = best_of(repeats, lambda: c.run(lhsT, rhs, backend="jit-strict", check_races=False))
    counts = c.last_run
    ref_out = c.run(lhsT, rhs, backend="reference", check_races=False)
    ref_s = best_of(repeats, lambda: c.run(lhsT, rhs, backend="reference", check_races=False))
    ev = evidence(counts, same_bytes(out, ref_out), "same bytes as the reference backend")
    rows.append(speedup_row(f"a. matmul {n_ref}^3 bf16, jit-strict vs reference backend", jit_s, ref_s, "reference",
                            None, ev, "for scale; the reference backend is too slow at the size above"))
    return rows


# ---- b. row kernels against the reference backend and eager NumPy ---------------------------


def mib(n):
    return f"{n / 2**20:.1f} MiB"


def eager_comparison(c, counts, jit_s, kernel, args, repeats, backend="jit"):
    """(eager seconds, evidence, note): the eager interpreter on the same inputs, checked allclose
    to Knit's output `c` computed, and both sides' instruction counts and DMA bytes (None seconds:
    the outputs differ, so the eager time would compare different work)."""
    import numpy_eager

    out = c.run(*args, backend=backend, check_races=False)
    eager = numpy_eager.run(kernel, *args)
    diff = float(np.max(np.abs(eager.astype(np.float64) - out.astype(np.float64))))
    close = bool(np.allclose(eager, out, rtol=1e-4, atol=1e-5))
    ev = evidence(counts, close, f"eager allclose to Knit, max |diff| {diff:.2g}")
    if not close:
        return None, ev, ""
    eager_s = best_of(repeats, lambda: numpy_eager.run(kernel, *args))
    tally = numpy_eager.count(kernel, *args)
    knit_n = counts["native"] + counts["interpreted"]
    note = (f"instructions: Knit {knit_n}, eager {tally['instructions']}; DMA bytes: Knit "
            f"{mib(c.stats['dma_bytes'])}, eager {mib(tally['dma_bytes'])}; per instruction: Knit "
            f"{fmt_time(jit_s / knit_n)}, eager {fmt_time(eager_s / tally['instructions'])}")
    return eager_s, ev, note


def bench_row_kernels(rows_n, cols_n, repeats):
    """Returns (table rows, {label: JIT seconds}, {label: (JIT seconds, eager seconds, DMA bytes,
    instructions)}): section c reuses the JIT times, bench_eager_split the eager figures."""
    import knit

    rows, jit_times, eager_times = [], {}, {}
    for label, kernel, args in norm_kernels(rows_n, cols_n):
        progress(f"{label} {rows_n}x{cols_n}: JIT, reference backend, eager NumPy")
        shape = f"{rows_n}x{cols_n} fp32"
        c = knit.compile(kernel, *args)
        out = c.run(*args, backend="jit", check_races=False)  # warm-up: compiles the instruction bodies
        jit_s = best_of(repeats, lambda c=c, args=args: c.run(*args, backend="jit", check_races=False))
        counts = c.last_run
        jit_times[label] = jit_s
        ref_out = c.run(*args, backend="reference", check_races=False)
        ref_s = best_of(repeats, lambda c=c, args=args: c.run(*args, backend="reference", check_races=False))
        ev = evidence(counts, same_bytes(out, ref_out), "same bytes as the reference backend")
        rows.append(speedup_row(f"b. {label} {shape}, JIT vs reference backend", jit_s, ref_s, "reference", 20, ev))

        # Only an eager interpreter that computes the same thing is a fair baseline.
        eager_s, ev, note = eager_comparison(c, counts, jit_s, kernel, args, repeats)
        if eager_s is None:
            rows.append(failed_row(f"b. {label} {shape}, JIT vs eager NumPy", ev.output))
            continue
        rows.append(speedup_row(f"b. {label} {shape}, JIT vs eager NumPy", jit_s, eager_s, "eager", 50, ev, note))
        eager_times[label] = (jit_s, eager_s, c.stats["dma_bytes"], counts["native"] + counts["interpreted"])
    return rows, jit_times, eager_times


def bench_eager_split(rows_n, cols_n, narrow, repeats, wide):
    """Where the time against eager NumPy goes: tensor add on [rows_n, narrow] tiles runs as many
    instructions as at [rows_n, cols_n] on almost no data, so its time per instruction is each
    side's fixed cost of an instruction; what the wide run takes beyond that, per DMA byte, is
    each side's cost of moving and computing data. `wide`: section b's tensor_add figures."""
    import knit
    from tensor_add import tensor_add_kernel

    progress(f"tensor_add {rows_n}x{narrow}: fixed cost per instruction")
    args = (randn(rows_n, narrow), randn(rows_n, narrow))
    c = knit.compile(tensor_add_kernel, *args)
    # jit-strict: compiled however small (the default backend would interpret a kernel this small).
    c.run(*args, backend="jit-strict", check_races=False)
    jit_s = best_of(repeats, lambda: c.run(*args, backend="jit-strict", check_races=False))
    counts = c.last_run
    eager_s, ev, note = eager_comparison(c, counts, jit_s, tensor_add_kernel, args, repeats, "jit-strict")
    name = f"b. (diagnostic) tensor_add {rows_n}x{narrow} fp32, jit-strict vs eager NumPy"
    if eager_s is None:
        return [failed_row(name, ev.output)]
    n = counts["native"] + counts["interpreted"]
    if wide and wide[3] == n:
        w_jit, w_eager, w_bytes, _ = wide
        extra = w_bytes - c.stats["dma_bytes"]
        note += (f". Split of the {rows_n}x{cols_n} run (same {n} instructions): Knit {fmt_time(jit_s / n)} per "
                 f"instruction + {extra / (w_jit - jit_s) / 1e9:.1f} GB/s of DMA bytes, eager "
                 f"{fmt_time(eager_s / n)} + {extra / (w_eager - eager_s) / 1e9:.1f} GB/s; fixed costs are "
                 f"{100 * jit_s / w_jit:.0f}% of Knit's {rows_n}x{cols_n} time and "
                 f"{100 * eager_s / w_eager:.0f}% of eager's")
    return [speedup_row(name, jit_s, eager_s, "eager", None, ev, note)]


# ---- c. Triton's interpreter -----------------------------------------------------------------


def triton_child(rows_n, cols_n, repeats):
    """Runs in a subprocess with TRITON_INTERPRET=1 (read when triton is imported). Softmax uses
    128-row blocks like the NKI kernel; vector add is Triton's usual 1-D block, its fastest form
    here. Prints {"softmax": s, "tensor_add": s} as JSON."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def softmax_kernel(out_ptr, in_ptr, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr):
        rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
        cols = tl.arange(0, BLOCK)[None, :]
        mask = cols < n_cols
        x = tl.load(in_ptr + rows * n_cols + cols, mask=mask, other=-float("inf"))
        e = tl.exp(x - tl.max(x, axis=1)[:, None])
        tl.store(out_ptr + rows * n_cols + cols, e / tl.sum(e, axis=1)[:, None], mask=mask)

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

    x, y = torch.randn(rows_n, cols_n), torch.randn(rows_n, cols_n)
    out = torch.empty_like(x)
    block = triton.next_power_of_2(cols_n)

    def softmax():
        softmax_kernel[(triton.cdiv(rows_n, 128),)](out, x, cols_n, ROWS=128, BLOCK=block)

    def add():
        add_kernel[(triton.cdiv(x.numel(), 128 * block),)](x, y, out, x.numel(), BLOCK=128 * block)

    softmax()
    assert torch.allclose(out, torch.softmax(x, dim=1), rtol=1e-4, atol=1e-6), "Triton softmax is wrong"
    softmax_s = best_of(repeats, softmax)
    add()
    assert torch.equal(out, x + y), "Triton add is wrong"
    add_s = best_of(repeats, add)
    print(json.dumps({"softmax": softmax_s, "tensor_add": add_s, "version": triton.__version__}))


def bench_triton(rows_n, cols_n, repeats, jit_times):
    """jit_times: {label: section b's JIT seconds}."""
    # Look for the package without importing it here: the interpreter flag must be set before import.
    if importlib.util.find_spec("triton") is None:
        return [failed_row("c. Triton interpreter", "Triton not installed: no module named 'triton' "
                           "(pip install triton, about 290 MB, to get these rows)")]
    progress(f"Triton interpreter {rows_n}x{cols_n}")
    env = dict(os.environ, TRITON_INTERPRET="1")
    r = subprocess.run([sys.executable, THIS, "--child-triton", f"{rows_n},{cols_n},{repeats}"], env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        return [failed_row("c. Triton interpreter", "Triton run failed: " + r.stderr.strip().splitlines()[-1])]
    t = json.loads(r.stdout.strip().splitlines()[-1])
    note = f"triton {t['version']}, TRITON_INTERPRET=1, same shape, fp32; Knit time and evidence from section b"
    ev = Evidence(output="Triton's checked against torch")
    return [speedup_row(f"c. {label} {rows_n}x{cols_n}, Knit JIT vs Triton interpreter", jit_times[label], t[label],
                        "triton", None, ev, note) for label in ("softmax", "tensor_add")]


# ---- d. cold and warm start ------------------------------------------------------------------

# Each example kernel at the shapes its own __main__ uses: (module, kernel, argument factory).
STARTUP_KERNELS = {
    "tensor_add": ("tensor_add", "tensor_add_kernel", lambda: (randn(300, 512), randn(300, 512))),
    "matmul": ("matmul", "matmul_kernel", lambda: (randn(512, 256), randn(512, 1024))),
    "softmax": ("softmax", "softmax_kernel", lambda: (randn(300, 1024),)),
    "rmsnorm": ("rmsnorm", "rmsnorm_kernel", lambda: (randn(300, 1024), randn(1024))),
    "layernorm": ("layernorm", "layernorm_kernel", lambda: (randn(300, 1000), randn(1000), randn(1000))),
    "transpose": ("transpose", "transpose_kernel", lambda: (randn(256, 384),)),
    "attention": ("attention", "attention_kernel", lambda: tuple(randn(512, 128) for _ in range(3))),
    "mx_matmul": ("mx_matmul", "mx_matmul_kernel",
                  lambda: (randn(512, 128, dtype=ml_dtypes.bfloat16), randn(512, 256, dtype=ml_dtypes.bfloat16))),
}


def cpp_kernel_and_args(path):
    """A C++ example file loaded (Clang and the JIT, or the disk cache) as `knit run` loads it:
    (seconds that took, its kernel, inputs at the shapes of its knit-run line)."""
    from knit import cli

    parser = cli.build_parser()
    job = cli.Job(cli._merge_directives(parser, parser.parse_args(["run", path])))
    return job.load_s, job.kernel, job.inputs()


def startup_child(name):
    """In a fresh process: import (not timed), then time loading a C++ file (if `name` is one),
    compile, lowering, the first run (which also prepares the JIT bodies) and a second run (data
    only). Prints as JSON the seconds, both runs' native / interpreted counts, and whether the
    output equals the reference backend's (run after the timings)."""
    t0 = time.perf_counter()
    import knit

    t_load = None
    if name.endswith(".cpp"):
        import knit._cppc  # noqa: F401 (the C++ compiler extension and Clang's libraries, about 7 ms:
        # imported, like knit itself, outside the timing; knit.cpp.load would import it on first use)

        t_import = time.perf_counter() - t0
        t_load, kernel, args = cpp_kernel_and_args(name)
    else:
        module, attr, make_args = STARTUP_KERNELS[name]
        kernel = getattr(importlib.import_module(module), attr)
        args = make_args()
        t_import = time.perf_counter() - t0

    t0 = time.perf_counter()
    c = knit.compile(kernel, *args)
    t1 = time.perf_counter()
    _ = c.program  # the property traces and lowers on first access: timed on its own
    t2 = time.perf_counter()
    c.run(*args, backend="jit", check_races=False)
    t3 = time.perf_counter()
    first = dict(c.last_run)
    out = c.run(*args, backend="jit", check_races=False)
    t4 = time.perf_counter()
    second = dict(c.last_run)
    same = same_bytes(out, c.run(*args, backend="reference", check_races=False))
    print(json.dumps({"import": t_import, "load": t_load, "compile": t1 - t0, "lower": t2 - t1, "first": t3 - t2,
                      "second": t4 - t3, "first_counts": first, "second_counts": second, "same": same}))


def run_startup_child(name, cache_dir, attempts=3):
    # KNIT_JIT_THRESHOLD=0: the first run compiles every body, so a cold start is the whole path to
    # native code (the default backend would interpret these small examples' first runs instead,
    # docs/jit.md "When the JIT compiles", and a cold start would not measure the JIT at all).
    env = dict(os.environ, KNIT_CACHE_DIR=cache_dir, KNIT_JIT_THRESHOLD="0")
    for attempt in range(attempts):
        r = subprocess.run([sys.executable, THIS, "--child-startup", name], env=env, capture_output=True, text=True)
        if r.returncode == 0:
            return json.loads(r.stdout.strip().splitlines()[-1])
        why = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
        # A child that could not even import knit (its _core being rebuilt underneath us) measured
        # nothing and wrote nothing to the cache: wait and try again. Any other failure is real.
        if not why.startswith("ImportError") or attempt == attempts - 1:
            raise RuntimeError(why)
        progress(f"{name}: {why}; retrying in 20 s")
        time.sleep(20)


def startup_rows(name, phase, t, limit_s, cache_files):
    """The row of one start. Its evidence is the first run's counts (a start that compiled nothing,
    or left instructions to the reference executors, did not take the path to native code it
    claims to time) and the output against the reference backend's."""
    # The JIT prepares an instruction's body on its first execution; the second run does the same
    # data work without it, so first - second estimates the preparation.
    prep = max(0.0, t["first"] - t["second"])
    second = t["second_counts"]
    load = t["load"] or 0.0
    total = load + t["compile"] + t["lower"] + prep
    note = (f"{'load the C++ file ' + fmt_time(load) + ' + ' if t['load'] is not None else ''}"
            f"compile {fmt_time(t['compile'])} + lower {fmt_time(t['lower'])} + JIT prep ~{fmt_time(prep)} "
            f"(first run {fmt_time(t['first'])} - second {fmt_time(t['second'])}); import {fmt_time(t['import'])} "
            f"not counted; {cache_files} file(s) in KNIT_CACHE_DIR after the run; second run "
            f"{second['native']} native / {second['interpreted']} interpreted")
    ev = evidence(t["first_counts"], t["same"], "same bytes as the reference backend")
    return limit_row(f"d. {phase} start {name}", total, limit_s, ev, note)


def count_files(path):
    return sum(len(files) for _, _, files in os.walk(path))


def startup_series(name, child_arg, steps):
    """Start `child_arg` (an example's name, or a C++ file's path) in a fresh process once per
    step, all sharing one new KNIT_CACHE_DIR. A step is (row label, "cold" or "warm", limit in
    seconds, a function to call before it or None)."""
    rows = []
    cache_dir = tempfile.mkdtemp(prefix="knit-cache-bench-")
    try:
        for label, phase, limit_s, before in steps:
            if before:
                before()
            rows.append(startup_rows(label, phase, run_startup_child(child_arg, cache_dir), limit_s,
                                     count_files(cache_dir)))
    except RuntimeError as e:
        rows.append(failed_row(f"d. cold/warm start {name}", f"subprocess failed: {e}"))
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    return rows


def bench_startup(names):
    rows = []
    for name in names:
        progress(f"cold and warm start: {name}")
        rows += startup_series(name, name, [(name, "cold", 0.300, None), (name, "warm", 0.020, None)])
    return rows


CPP_EXAMPLES = os.path.join(ROOT, "examples", "kernels", "cpp")


def bench_cpp_startup(names):
    """Each C++ example, copied with its headers into a new folder: cold with the cache empty,
    cold again once the file is edited (a comment appended, so it compiles anew), then warm."""
    rows = []
    for name in names:
        progress(f"cold and warm start: {name}")
        work = tempfile.mkdtemp(prefix="knit-cpp-bench-")
        try:
            for f in os.listdir(CPP_EXAMPLES):
                shutil.copy(os.path.join(CPP_EXAMPLES, f), work)
            path = os.path.join(work, name)

            def edit(path=path):
                with open(path, "a") as f:
                    f.write("// edited\n")

            rows += startup_series(name, path, [(f"{name}, empty cache", "cold", 0.300, None),
                                                (f"{name}, edited file", "cold", 0.300, edit),
                                                (name, "warm", 0.020, None)])
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return rows


# ---- e. timing-only simulation speed ---------------------------------------------------------


def bench_profile(k, m, n, repeats):
    import knit
    import knit.language as nl
    import knit.typing as nt
    from knit._kernel import Kernel
    from matmul import matmul_kernel

    progress(f"knit.profile timing-only matmul [{k}, {m}] x [{k}, {n}] bf16")
    args = (nt.tensor[[k, m], nl.bfloat16], nt.tensor[[k, n], nl.bfloat16])
    # Trace and lower once, outside the timing: knit.profile then finds the kernel in its cache.
    t0 = time.perf_counter()
    c = knit.compile(matmul_kernel, *args)
    t1 = time.perf_counter()
    program = c.program
    t2 = time.perf_counter()
    # The first timing of a program also computes its per-instruction costs (kept with the
    # program for later timings): measured on its own.
    t3 = time.perf_counter()
    prof = knit.profile(matmul_kernel, *args, timing_only=True)
    first = time.perf_counter() - t3
    executed = sum(prof.instructions.values())
    wall = best_of(repeats, lambda: knit.profile(matmul_kernel, *args, timing_only=True))
    rate = executed / wall
    name = f"e. knit.profile timing-only, matmul {k}x{m}x{n} bf16"
    note = (f"{executed} instructions executed; trace {fmt_time(t1 - t0)} + lower {fmt_time(t2 - t1)} "
            f"once, not counted; simulated {prof.latency_us / 1e3:.2f} ms on {prof.target}")
    # No data to check in a timing-only run: the evidence is that every instruction was timed.
    program_n = sum(c.stats["instructions"].values())
    ev = Evidence(f"{executed} of {program_n} timed", "timing only, no data",
                  () if executed >= program_n > 0 else (f"{executed} of the program's {program_n} instructions timed",))
    rows = [Row(name, fmt_time(wall), "-", f"{rate / 1e6:.2f} M instr/s", ">= 2 M instr/s",
                _verdict(2e6 / rate, ev), ev, note),
            Row("e. same, first profile of the program (one run, costs computed)", fmt_time(first), "-",
                f"{executed / first / 1e6:.2f} M instr/s", ">= 2 M instr/s", _verdict(2e6 * first / executed, ev), ev,
                "later profiles of the same compiled kernel reuse the per-instruction costs")]

    # Diagnostic: the C++ replay alone, without building the Python timeline (what knit.profile
    # adds on top: argument marshalling, the per-instruction timeline, the Profile object).
    hosts, _, _ = Kernel._hosts(c, args, shapes_only=True)
    core = best_of(repeats, lambda: program.time(hosts, True, False))
    rows.append(Row("e. (diagnostic) same, C++ replay only, no timeline", fmt_time(core), "-",
                    f"{executed / core / 1e6:.2f} M instr/s", ">= 2 M instr/s", _verdict(2e6 * core / executed, ev),
                    ev, "EngineProgram.time(keep_timeline=False), the part knit.profile cannot avoid"))
    return rows


# ---- output ----------------------------------------------------------------------------------


def machine_lines():
    import torch

    import knit

    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return [f"machine: {cpu}, {os.cpu_count()} cores, load average {load}",
            f"python {platform.python_version()}, numpy {np.__version__}, torch {torch.__version__} "
            f"({torch.get_num_threads()} threads), knit {knit.__version__} from {os.path.dirname(knit.__file__)}",
            f"taken {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"]


COLUMNS = ("benchmark", "Knit", "baseline", "ratio", "goal", "met?", "native / interpreted", "output")


def cells(r):
    return (r.name, r.knit, r.base, r.ratio, r.goal, r.verdict, r.evidence.instructions, r.evidence.output)


def print_text(header, rows, elapsed):
    for line in header:
        print(line)
    print()
    widths = [max(len(c), *(len(cells(r)[i]) for r in rows)) for i, c in enumerate(COLUMNS)]
    print("  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(cells(r), widths)))
    print()
    print("notes:")
    for r in rows:
        if r.note:
            print(f"  {r.name}: {r.note}")
    print(f"\ntotal wall time {elapsed:.0f} s")


def print_markdown(header, rows, elapsed):
    for line in header:
        print(f"{line}  ")
    print()
    print("| " + " | ".join(COLUMNS + ("notes",)) + " |")
    print("|" + "---|" * (len(COLUMNS) + 1))
    for r in rows:
        print("| " + " | ".join(c.replace("|", "\\|") for c in cells(r) + (r.note,)) + " |")
    print(f"\nTotal wall time {elapsed:.0f} s.")


# ---- main ------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes and fewer repeats (about 30 s)")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--repeats", type=int, help="timed repeats per measurement (default 5, --quick 2)")
    ap.add_argument("--sections", default="abcde", help="which sections to run (default abcde)")
    ap.add_argument("--json", metavar="PATH", help="also write the rows as JSON (bench/before_after.py reads it)")
    ap.add_argument("--child-startup", help=argparse.SUPPRESS)
    ap.add_argument("--child-triton", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    if opts.child_startup:
        return startup_child(opts.child_startup)
    if opts.child_triton:
        rows_n, cols_n, repeats = (int(v) for v in opts.child_triton.split(","))
        return triton_child(rows_n, cols_n, repeats)

    repeats = opts.repeats or (2 if opts.quick else 5)
    mm_n, mm_ref_n = (1024, 256) if opts.quick else (2048, 512)
    rows_n, cols_n = (1024, 1024) if opts.quick else (2048, 2048)
    prof_kmn = (4096, 2048, 2048) if opts.quick else (4096, 4096, 4096)
    startup = ["tensor_add", "softmax", "matmul"] if opts.quick else list(STARTUP_KERNELS)
    cpp_files = sorted(f for f in os.listdir(CPP_EXAMPLES) if f.endswith(".cpp"))
    cpp_startup = ["softmax.cpp"] if opts.quick else cpp_files

    with record.recorded("jit_speed"):
        start = time.perf_counter()
        header = machine_lines() + [f"repeats: best of {repeats}" + (" (--quick)" if opts.quick else "")]
        sections, rows, jit_times, eager_times = opts.sections, [], {}, {}
        if "a" in sections:
            rows += bench_matmul(mm_n, mm_ref_n, repeats)
        if "b" in sections:
            b_rows, jit_times, eager_times = bench_row_kernels(rows_n, cols_n, repeats)
            rows += b_rows + bench_eager_split(rows_n, cols_n, 8, repeats, eager_times.get("tensor_add"))
        if "c" in sections and jit_times:
            rows += bench_triton(rows_n, cols_n, repeats, jit_times)
        if "d" in sections:
            rows += bench_startup(startup) + bench_cpp_startup(cpp_startup)
        if "e" in sections:
            rows += bench_profile(*prof_kmn, repeats)
        elapsed = time.perf_counter() - start
        # Other load on a shared machine inflates every time: say how busy it was by the end too.
        header.append("load average at the end " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
        (print_markdown if opts.markdown else print_text)(header, rows, elapsed)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump([{"name": r.name, "knit": r.knit, "ratio": r.ratio, "verdict": r.verdict,
                        "instructions": r.evidence.instructions, "output": r.evidence.output} for r in rows],
                      f, indent=1)


if __name__ == "__main__":
    main()
