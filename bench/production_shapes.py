"""Production shapes end to end: how long Knit takes from a fresh process to a simulated latency.

Section a of issue 25's benchmark: the matmul tutorial's shape, [4096, 8192] @ [8192, 8192]
(lhsT [K=8192, M=4096], rhs [K, N=8192]), bf16 on trn1, timing-only (shape placeholders, as
nki.benchmark takes them). Each kernel runs in a fresh process with an empty Knit cache, and the
whole process is timed from outside (import, trace, lower, allocate, time): what a user waits
for. The baseline, measured in the same run, is torch computing the same product in fp32 on this
CPU (the matmul alone, after import; median of `--torch-runs`).

Kernels: the legacy (`neuronxcc.nki`) G1 tiled matmul of examples/kernels/python/legacy/matmul.py
(the tutorial's first stage, in the G1 style the tutorial was published in) and the four
current-API stages of examples/kernels/python/matmul/stages.py. Section b: `elementwise_1M`, a
kernel of 999,936 instructions (333,312 row tiles of [128, 128] bf16: load, exp, store), timed
the same way; its targets are under 5 s wall and 2 GB peak memory. `elementwise_1M_store` is the
same kernel with its engine program written to the disk cache: Knit writes it only when tracing
and lowering took longer than loading it back would (knit/_kernel.py,
CACHE_LOAD_SECONDS_PER_INSTRUCTION), which a rolled 1M-instruction kernel does on a busy machine
but not on an idle one; this row forces the write, to show what it costs.

Each row also gives the phases measured inside the child (trace = compile, lower = the engine
program and its disk-cache write, time = the benchmark's timing replay), the traced instruction
count and instructions per second of trace + lower.

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
MILLION_ROWS = 333_312  # row tiles (5208 x 64), 3 instructions each: section b's 1M-instruction kernel


def child_kernel(name):
    """In a fresh process: the kernel's simulated latency at the tutorial shape (timing-only)."""
    if name == "legacy_tiled":
        record.use_tree(os.path.join("examples", "kernels", "python", "legacy"))
        import knit.legacy as nki
        import knit.legacy.language as nl
        from matmul import matmul_kernel as kernel
        bench = kernel = nki.benchmark(warmup=1, iters=1, platform_target="trn1")(kernel)  # G1's option name
    else:
        record.use_tree(os.path.join("examples", "kernels", "python", "matmul"))
        from stages import STAGES

        import knit as nki
        import knit.language as nl
        kernel = STAGES[name]
        bench = nki.benchmark(warmup=1, iters=1, target="trn1")(kernel)
    import knit.typing as nt

    _time_phases(kernel, bench, nt.tensor[[K, M], nl.bfloat16], nt.tensor[[K, N], nl.bfloat16])


def _time_phases(kernel, bench, *args):
    """Prints, as one JSON line, the kernel's phases in this process: trace (compile), lower (the
    engine program, with its disk-cache write), then `bench` (the benchmark of `kernel`: its timing
    replay; it finds the compiled kernel in the kernel's cache)."""
    start = time.perf_counter()
    compiled = kernel.compile(*args, target="trn1")
    traced = time.perf_counter()
    compiled.program  # noqa: B018  (lowers and writes the disk cache)
    lowered = time.perf_counter()
    bench(*args)
    done = time.perf_counter()
    info = compiled.trace_info or {}
    print(json.dumps({"latency_us": bench.benchmark_result.nc_latency.get_latency_percentile(50),
                      "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "instructions": compiled.core.num_instructions, "trace_s": traced - start,
                      "lower_s": lowered - traced, "time_s": done - lowered,
                      "rolled": info.get("rolled_loops", 0)}))


def child_million(rows, store=False):
    """A kernel of about a million instructions: `rows` row tiles of [128, 128] bf16, each loaded,
    put through exp and stored (3 instructions), in two nested affine loops. `store`: its engine
    program is written to the disk cache whatever the rebuild took."""
    record.use_tree()
    import knit._kernel
    if store:
        knit._kernel.CACHE_LOAD_SECONDS_PER_INSTRUCTION = 0.0
    import knit as nki
    import knit.isa as nisa
    import knit.language as nl
    import knit.typing as nt

    @nki.jit
    def elementwise(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(x.shape[0] // 128 // 64):
            for j in nl.affine_range(64):
                row = (i * 64 + j) * 128
                t = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=t, src=x[row:row + 128, :])
                nisa.activation(dst=t, op=nl.exp, data=t)
                nisa.dma_copy(dst=out[row:row + 128, :], src=t)
        return out

    _time_phases(elementwise, nki.benchmark(warmup=1, iters=1, target="trn1")(elementwise),
                 nt.tensor[[rows * 128, 128], nl.bfloat16])


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
        # peak MiB: the child process's own maximum resident set; trace / lower / time: the
        # phases inside the child (import and interpreter start-up are the rest of wall)
        print(f"{'kernel':<20} {'wall s':>7} {'/ torch':>8} {'instrs':>8} {'instr/s':>9} {'trace s':>8} "
              f"{'lower s':>8} {'time s':>7} {'peak MiB':>9} {'simulated ms':>13}")
        runs = [(name, ["--child-kernel", name]) for name in KERNELS]
        runs.append(("elementwise_1M", ["--child-million", str(MILLION_ROWS)]))
        runs.append(("elementwise_1M_store", ["--child-million", str(MILLION_ROWS), "store"]))
        for name, child_args in runs:
            wall, out = run_child(child_args)
            print(f"{name:<20} {wall:7.2f} {wall / torch_s:8.2f} {out['instructions']:8d} "
                  f"{out['instructions'] / (out['trace_s'] + out['lower_s']):9.0f} {out['trace_s']:8.2f} "
                  f"{out['lower_s']:8.2f} {out['time_s']:7.2f} {out['peak_mib']:9.0f} {out['latency_us'] / 1000:13.2f}")
        print("\ninstr/s: instructions / (trace + lower). issue 25's targets: wall / torch <= 0.1 for the "
              "matmul rows; the 1M row under 5 s wall and 2 GB peak")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child-kernel":
        child_kernel(sys.argv[2])
    elif len(sys.argv) > 2 and sys.argv[1] == "--child-million":
        child_million(int(sys.argv[2]), store=sys.argv[3:] == ["store"])
    elif len(sys.argv) > 2 and sys.argv[1] == "--child-torch":
        child_torch(int(sys.argv[2]))
    else:
        main()
