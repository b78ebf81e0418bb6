"""Simulated versus published latency of the four matmul optimization stages.

Runs examples/kernels/python/matmul/stages.py at [4096, 8192] @ [8192, 8192] (lhsT [K=8192,
M=4096], rhs [K, N=8192]) timing-only (shape placeholders, like nki.benchmark) and prints, per
stage and target, the simulated latency, the published hardware figure, the error and the
simulated engine utilizations. Published: trn1 bf16, nki.benchmark latencies from the
performance table of NKI's "Matrix multiplication" tutorial (Neuron SDK 2.24); trn2 fp32, device
times from the profiler figures of NKI's "Introduction to NKI Kernel Optimization" guide. The
published kernels' block sizes are not known; ours are the defaults in stages.py, or the smaller
fp32 ones below where fp32 tiles would overflow SBUF.

The machine model's `dma_efficiency` (codegen/src/machine_config.cpp) was fitted to some of
these rows (FITTED): their error says how well one constant fits them, not how well the model
predicts. The summary therefore reports the other rows (validation) on their own; the fitted
rows' errors are printed beside it, never mixed into it.

The second section (``nkibench``) times the seven NKIBench kernels of
examples/kernels/python/nkibench/ (written here to the algorithms of NKIBench's public kernels)
at their published shapes on trn1 in fp32, the same way, against NKIBench's published latencies.
Nothing was fitted to these rows. The third (``autotune``) times a trn2 bf16 2048^3 matmul against
the hand-tuned kernel of AWS's nki-autotune library (our blocked stages at the best of a small
block-size sweep; not their kernel).

    python3 bench/calibration.py                       # all sections, about 1-2 min on 2 cores
    python3 bench/calibration.py --sections nkibench   # one of them

The output is also written to bench/results/ (bench/record.py).
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/: record
import record  # noqa: E402

record.use_tree(os.path.join("examples", "kernels", "python", "matmul"),
               os.path.join("examples", "kernels", "python", "nkibench"))

from shapes import PUBLISHED_SHAPES  # noqa: E402  (examples/kernels/python/nkibench)
from stages import STAGES  # noqa: E402

import knit  # noqa: E402
import knit.language as nl  # noqa: E402
import knit.typing as nt  # noqa: E402

K, M, N = 8192, 4096, 8192
PUBLISHED_MS = {  # (target, stage) -> ms
    ("trn1", "tiled"): 51.80, ("trn1", "hoisted"): 42.96, ("trn1", "blocked_mn"): 22.07,
    ("trn1", "blocked_mnk"): 6.97,
    ("trn2", "tiled"): 39.89, ("trn2", "hoisted"): 28.20, ("trn2", "blocked_mn"): 28.41,
    ("trn2", "blocked_mnk"): 28.30,
}
# The rows dma_efficiency was fitted on: trn1's 0.65 on the two DMA-bound stages, trn2's 1.0 on
# its tiled stage (DMA active 99.93% of that run on hardware).
FITTED = {("trn1", "tiled"), ("trn1", "hoisted"), ("trn2", "tiled")}
RUNS = [("trn1", nl.bfloat16, {}),
        ("trn2", nl.float32, {"blocked_mn": {"tiles_m": 2}, "blocked_mnk": {"tiles_m": 8, "tiles_n": 2, "tiles_k": 4}})]


# NKIBench (the benchmark of the AccelOpt paper; kernels NKIBench/kernels/<name>_0.py in the public
# AccelOpt repository, compiled with --disable-dge --logical-nc-config=1 --auto-cast=none): trn1
# (trn1.32xlarge), fp32, mean of 10 runs of neuron-profile's total device time, in ms.
NKIBENCH_PUBLISHED_MS = {
    "matmul": 35.20, "transpose_matmul": 9.61, "lora": 30.17, "swiglu": 4.22, "silu": 1.333, "adamw": 2.00,
    "bmm": 4.61,
}
COMPUTE_ENGINES = ("pe", "act", "dve", "pool")

# A hand-tuned bf16 matmul of [2048, 2048] @ [2048, 2048] on trn2 from AWS's nki-autotune kernel
# library: 0.2442 ms (89.5% MFU). Its kernel is not ours; the row times our blocked stages
# (stages.py) at the best of a small sweep of their block sizes, the choice an autotuner makes.
AUTOTUNE_PUBLISHED_MS = 0.2442
AUTOTUNE_SIZE = 2048
AUTOTUNE_SWEEP = ([("blocked_mn", {"tiles_m": m, "tiles_n": n}) for m, n in ((2, 1), (4, 1), (8, 1), (16, 1), (4, 2))]
                  + [("blocked_mnk", {"tiles_m": m, "tiles_n": n, "tiles_k": k})
                     for m, n, k in ((8, 2, 4), (8, 2, 8), (16, 1, 8), (4, 4, 8))])


def summary(label, errors):
    if not errors:
        return f"{label}: none"
    return (f"{label} ({len(errors)} rows): mean |error| {100 * sum(abs(e) for e in errors) / len(errors):.1f}%, "
            f"max |error| {100 * max(abs(e) for e in errors):.1f}%")


def stages_section(rows):
    """The matmul tutorial's four stages on trn1 (bf16) and trn2 (fp32); appends the JSON rows."""
    errors = {True: [], False: []}  # fitted? -> errors
    print(f"{'target':<7}{'stage':<13}{'simulated ms':>13}{'published ms':>14}{'error':>8}"
          f"{'PE util':>9}{'DMA util':>10}{'sim s':>7}  row")
    for target, dtype, options in RUNS:
        for name, kernel in STAGES.items():
            t0 = time.time()
            bench = knit.benchmark(kernel, nt.tensor[[K, M], dtype], nt.tensor[[K, N], dtype], target=target,
                                   **options.get(name, {}))
            prof = bench.profile
            sim_ms = bench.benchmark_result.nc_latency.get_latency_percentile(50) / 1e3
            pub = PUBLISHED_MS[(target, name)]
            err = (sim_ms - pub) / pub
            fitted = (target, name) in FITTED
            errors[fitted].append(err)
            rows.append({"name": f"{target} {name}", "simulated_ms": round(sim_ms, 4), "published_ms": pub,
                         "error": round(err, 5), "fitted": fitted})
            print(f"{target:<7}{name:<13}{sim_ms:>13.2f}{pub:>14.2f}{100 * err:>7.1f}%"
                  f"{100 * prof.engines['pe'].utilization:>8.0f}%{100 * prof.dma_utilization:>9.0f}%"
                  f"{time.time() - t0:>7.1f}  {'FITTED' if fitted else 'validation'}", flush=True)
    print(summary("validation rows", errors[False]))
    print(summary("fitted rows, dma_efficiency chosen to match them", errors[True]))


def bound_by(prof):
    """The busiest of the compute engines and the DMA bandwidth, by utilization."""
    util = {q: prof.engines[q].utilization for q in COMPUTE_ENGINES if q in prof.engines}
    util["dma"] = prof.dma_utilization
    return max(util, key=util.get)


def nkibench_section(rows):
    """The NKIBench kernels at their published shapes, trn1 fp32; appends the JSON rows."""
    errors = []
    print(f"{'kernel':<17}{'shape':<24}{'sim ms':>8}{'pub ms':>8}{'error':>8}{'bound':>6}{'instrs':>8}"
          f"{'PE ms':>7}{'ACT ms':>7}{'DVE ms':>7}{'POOL ms':>8}{'DMA util':>9}{'DMA MB':>8}{'sim s':>6}")
    for name, (kernel, label, shapes) in PUBLISHED_SHAPES.items():
        t0 = time.time()
        bench = knit.benchmark(kernel, *[nt.tensor[list(s), nl.float32] for s in shapes], target="trn1")
        prof = bench.profile
        sim_ms = bench.benchmark_result.nc_latency.get_latency_percentile(50) / 1e3
        pub = NKIBENCH_PUBLISHED_MS[name]
        err = (sim_ms - pub) / pub
        errors.append(err)
        rows.append({"name": f"trn1 nkibench {name}", "simulated_ms": round(sim_ms, 4), "published_ms": pub,
                     "error": round(err, 5), "fitted": False})
        busy = "".join(f"{prof.engines[q].busy_ns / 1e6:>{w}.2f}" for q, w in zip(COMPUTE_ENGINES, (7, 7, 7, 8)))
        instrs = sum(v for q, v in prof.instructions.items() if q != "sync")
        print(f"{name:<17}{label:<24}{sim_ms:>8.2f}{pub:>8.2f}{100 * err:>7.1f}%{bound_by(prof):>6}{instrs:>8}"
              f"{busy}{100 * prof.dma_utilization:>8.0f}%{prof.dma_bytes / 1e6:>8.0f}{time.time() - t0:>6.1f}",
              flush=True)
    within = sum(abs(e) <= 0.15 for e in errors)
    print(f"NKIBench rows ({len(errors)}): median error {100 * statistics.median(errors):.1f}%, "
          f"max |error| {100 * max(abs(e) for e in errors):.1f}%, within +-15%: {within} of {len(errors)}")


def best_tuned_matmul():
    """(simulated ms, stage, block sizes, MFU) of the fastest AUTOTUNE_SWEEP point, trn2 bf16."""
    shape = nt.tensor[[AUTOTUNE_SIZE, AUTOTUNE_SIZE], nl.bfloat16]
    best = None
    for stage, blocks in AUTOTUNE_SWEEP:
        bench = knit.benchmark(STAGES[stage], shape, shape, target="trn2", **blocks)
        ms = bench.benchmark_result.nc_latency.get_latency_percentile(50) / 1e3
        if best is None or ms < best[0]:
            best = (ms, stage, blocks, bench.profile.mfu)
    return best


def autotune_section(rows):
    """The trn2 bf16 2048^3 row against nki-autotune's published latency; appends the JSON row."""
    t0 = time.time()
    sim_ms, stage, blocks, mfu = best_tuned_matmul()
    err = (sim_ms - AUTOTUNE_PUBLISHED_MS) / AUTOTUNE_PUBLISHED_MS
    rows.append({"name": "trn2 bf16 matmul 2048^3", "simulated_ms": round(sim_ms, 4),
                 "published_ms": AUTOTUNE_PUBLISHED_MS, "error": round(err, 5), "fitted": False})
    print(f"{'row':<26}{'best of sweep':<40}{'sim ms':>8}{'pub ms':>8}{'error':>8}{'MFU':>6}{'sim s':>7}")
    print(f"{'trn2 bf16 matmul 2048^3':<26}{stage + ' ' + str(blocks):<40}{sim_ms:>8.4f}{AUTOTUNE_PUBLISHED_MS:>8.4f}"
          f"{100 * err:>7.1f}%{100 * mfu:>5.1f}%{time.time() - t0:>7.1f}", flush=True)


SECTIONS = {"stages": stages_section, "nkibench": nkibench_section, "autotune": autotune_section}


def main(json_path=None, sections=tuple(SECTIONS)):
    rows = []
    print(f"knit from {os.path.dirname(knit.__file__)}")
    for i, section in enumerate(sections):
        if i:
            print()
        SECTIONS[section](rows)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", metavar="PATH", help="also write the rows as JSON (bench/before_after.py reads it)")
    ap.add_argument("--sections", nargs="+", choices=list(SECTIONS), default=list(SECTIONS),
                    help="which sections to run (default: all, in this order)")
    opts = ap.parse_args()
    with record.recorded("calibration"):
        main(opts.json, opts.sections)
