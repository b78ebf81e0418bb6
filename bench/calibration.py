"""Simulated versus published latency of the four matmul optimization stages.

Runs examples/kernels/python/matmul/stages.py at [4096, 8192] @ [8192, 8192] (lhsT [K=8192,
M=4096], rhs [K, N=8192]) timing-only (shape placeholders, like nki.benchmark) and prints, per
stage and target, the simulated latency, the published hardware figure, the error and the
simulated engine utilizations. Published: trn1 bf16, nki.benchmark latencies from the
performance table of NKI's "Matrix multiplication" tutorial (Neuron SDK 2.24); trn2 fp32, device
times from the profiler figures of NKI's "Introduction to NKI Kernel Optimization" guide. The
published kernels' block sizes are not known; ours are the defaults in stages.py, or the smaller
fp32 ones below where fp32 tiles would overflow SBUF.

The machine model's `dma_efficiency` (simulator/src/machine_config.cpp) was fitted to some of
these rows (FITTED): their error says how well one constant fits them, not how well the model
predicts. The summary therefore reports the other rows (validation) on their own; the fitted
rows' errors are printed beside it, never mixed into it.

    python3 bench/calibration.py            # about 40-80 s on 2 cores

The output is also written to bench/results/ (bench/record.py).
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/: record
import record  # noqa: E402

record.use_tree(os.path.join("examples", "kernels", "python", "matmul"))

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


def summary(label, errors):
    if not errors:
        return f"{label}: none"
    return (f"{label} ({len(errors)} rows): mean |error| {100 * sum(abs(e) for e in errors) / len(errors):.1f}%, "
            f"max |error| {100 * max(abs(e) for e in errors):.1f}%")


def main(json_path=None):
    errors = {True: [], False: []}  # fitted? -> errors
    rows = []
    print(f"knit from {os.path.dirname(knit.__file__)}")
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
    if json_path:
        with open(json_path, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", metavar="PATH", help="also write the rows as JSON (bench/before_after.py reads it)")
    opts = ap.parse_args()
    with record.recorded("calibration"):
        main(opts.json)
