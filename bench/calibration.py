"""Simulated versus published latency of the four matmul optimization stages.

Runs examples/kernels/python/matmul/stages.py at [4096, 8192] @ [8192, 8192] (lhsT [K=8192,
M=4096], rhs [K, N=8192]) timing-only (shape placeholders, like nki.benchmark) and prints, per
stage and target, the simulated latency, the published hardware figure, the error and the
simulated engine utilizations. Published: trn1 bf16, nki.benchmark (hw-model.md §3.1); trn2
fp32, profiler device time (§3.2). The published kernels' block sizes are not known; ours are
the defaults in stages.py, or the smaller fp32 ones below where fp32 tiles would overflow SBUF.

    python3 bench/calibration.py            # about 40-80 s on 2 cores
"""
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "examples", "kernels", "python", "matmul"))

import knit  # noqa: E402
import knit.language as nl  # noqa: E402
import knit.typing as nt  # noqa: E402
from stages import STAGES  # noqa: E402

K, M, N = 8192, 4096, 8192
PUBLISHED_MS = {  # (target, stage) -> ms
    ("trn1", "tiled"): 51.80, ("trn1", "hoisted"): 42.96, ("trn1", "blocked_mn"): 22.07,
    ("trn1", "blocked_mnk"): 6.97,
    ("trn2", "tiled"): 39.89, ("trn2", "hoisted"): 28.20, ("trn2", "blocked_mn"): 28.41,
    ("trn2", "blocked_mnk"): 28.30,
}
RUNS = [("trn1", nl.bfloat16, {}),
        ("trn2", nl.float32, {"blocked_mn": {"tiles_m": 2}, "blocked_mnk": {"tiles_m": 8, "tiles_n": 2, "tiles_k": 4}})]


def main():
    rows = []
    print(f"{'target':<7}{'stage':<13}{'simulated ms':>13}{'published ms':>14}{'error':>8}"
          f"{'PE util':>9}{'DMA util':>10}{'sim s':>7}")
    for target, dtype, options in RUNS:
        for name, kernel in STAGES.items():
            t0 = time.time()
            bench = knit.benchmark(kernel, nt.tensor[[K, M], dtype], nt.tensor[[K, N], dtype], target=target,
                                   **options.get(name, {}))
            prof = bench.profile
            sim_ms = bench.benchmark_result.nc_latency.get_latency_percentile(50) / 1e3
            pub = PUBLISHED_MS[(target, name)]
            err = (sim_ms - pub) / pub
            rows.append(err)
            print(f"{target:<7}{name:<13}{sim_ms:>13.2f}{pub:>14.2f}{100 * err:>7.1f}%"
                  f"{100 * prof.engines['pe'].utilization:>8.0f}%{100 * prof.dma_utilization:>9.0f}%"
                  f"{time.time() - t0:>7.1f}")
    print(f"mean |error| {100 * sum(abs(e) for e in rows) / len(rows):.1f}%, max |error| "
          f"{100 * max(abs(e) for e in rows):.1f}%")


if __name__ == "__main__":
    main()
