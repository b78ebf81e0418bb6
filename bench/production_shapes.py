"""Production shapes end to end: how long Knit takes from a fresh process to a simulated latency.

Section a of issue 25's benchmark: the matmul tutorial's shape, [4096, 8192] @ [8192, 8192]
(lhsT [K=8192, M=4096], rhs [K, N=8192]), bf16 on trn1, timing-only (shape placeholders, as
nki.benchmark takes them). Each kernel runs in a fresh process with an empty Knit cache, and the
whole process is timed from outside (import, trace, lower, allocate, time): what a user waits
for. The baseline, measured in the same run, is torch computing the same product in fp32 on this
CPU (the matmul alone, after import; median of `--torch-runs`).

Kernels: the legacy (`neuronxcc.nki`) G1 tiled matmul of examples/kernels/python/legacy/matmul.py
(the tutorial's first stage, in the G1 style the tutorial was published in) and the four
current-API stages of examples/kernels/python/matmul/stages.py.

    python3 bench/production_shapes.py       # about 2-4 minutes on 2 cores

The output is also written to bench/results/ (bench/record.py).
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/: record
import record  # noqa: E402

THIS = os.path.abspath(__file__)
K, M, N = 8192, 4096, 8192
KERNELS = ["legacy_tiled", "tiled", "hoisted", "blocked_mn", "blocked_mnk"]


def child_kernel(name):
    """In a fresh process: the kernel's simulated latency at the tutorial shape (timing-only)."""
    if name == "legacy_tiled":
        record.use_tree(os.path.join("examples", "kernels", "python", "legacy"))
        import knit.legacy as nki
        import knit.legacy.language as nl
        from matmul import matmul_kernel as kernel
    else:
        record.use_tree(os.path.join("examples", "kernels", "python", "matmul"))
        from stages import STAGES

        import knit as nki
        import knit.language as nl
        kernel = STAGES[name]
    import knit.typing as nt

    bench = nki.benchmark(warmup=1, iters=1, target="trn1")(kernel)
    bench(nt.tensor[[K, M], nl.bfloat16], nt.tensor[[K, N], nl.bfloat16])
    print(json.dumps({"latency_us": bench.benchmark_result.nc_latency.get_latency_percentile(50),
                      "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def child_torch(runs):
    """In a fresh process: torch's fp32 [M, K] @ [K, N] on this CPU, median seconds of `runs`."""
    import torch

    a, b = torch.randn(M, K), torch.randn(K, N)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        torch.mm(a, b)
        times.append(time.perf_counter() - start)
    print(json.dumps({"seconds": statistics.median(times)}))


def run_child(args):
    """(wall seconds, the child's JSON line) of `THIS args` in a fresh process with an empty Knit
    cache."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, KNIT_CACHE_DIR=cache)
        start = time.perf_counter()
        done = subprocess.run([sys.executable, THIS, *args], env=env, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{done.stderr}")
    return wall, json.loads(done.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch-runs", type=int, default=3)
    args = parser.parse_args()
    with record.recorded("production_shapes"):
        print(f"shape: lhsT [{K}, {M}] @ rhs [{K}, {N}], bf16, trn1, timing-only; "
              "wall = whole fresh process with an empty cache")
        _, torch_out = run_child(["--child-torch", str(args.torch_runs)])
        torch_s = torch_out["seconds"]
        print(f"baseline: torch fp32 mm of the same shape on this CPU: {torch_s:.2f} s "
              f"(median of {args.torch_runs})\n")
        # peak MiB: the child process's own maximum resident set
        print(f"{'kernel':<14} {'wall s':>8} {'/ torch':>8} {'peak MiB':>9} {'simulated ms':>13}")
        for name in KERNELS:
            wall, out = run_child(["--child-kernel", name])
            print(f"{name:<14} {wall:8.2f} {wall / torch_s:8.2f} {out['peak_mib']:9.0f} "
                  f"{out['latency_us'] / 1000:13.2f}")
        print("\nissue 25's target: wall / torch <= 0.1 for every row")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child-kernel":
        child_kernel(sys.argv[2])
    elif len(sys.argv) > 2 and sys.argv[1] == "--child-torch":
        child_torch(int(sys.argv[2]))
    else:
        main()
