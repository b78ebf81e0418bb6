"""Simulated latency of collectives and of the multi-rank examples (docs/collectives.md).

Section `all_reduce`: one all_reduce of a [1024, 1024] fp32 buffer (4 MiB per rank) over N ranks
on trn1 and trn2 (128 ranks: two nodes on trn2), timing-only; prints the collective's path
(chip, neuronlink, efa or a two-level ring), its ring steps, the time between the last rank's
arrival and the data having moved, the bus bandwidth that implies (2 (N-1) / N * bytes / time,
the figure NCCL-style benchmarks report) and the kernel's latency. Section `examples`: the three examples of
examples/kernels/python/collectives/ on 4 and 8 ranks on trn2, timing-only at their main()
shapes: the slowest rank's latency and the time each spends in collectives.

    python3 bench/collectives.py            # about 10 s

The output is also written to bench/results/ (bench/record.py).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/: record
import record  # noqa: E402

record.use_tree(os.path.join("examples", "kernels", "python", "collectives"))

import moe_dispatch  # noqa: E402
import sp_layernorm  # noqa: E402
import tp_mlp  # noqa: E402

import knit  # noqa: E402
import knit.collectives as cc  # noqa: E402
import knit.isa as nisa  # noqa: E402
import knit.language as nl  # noqa: E402
import knit.typing as nt  # noqa: E402

F32 = nl.float32


def all_reduce_kernel(ranks):
    @knit.jit
    def all_reduce_4mib(a):
        buf = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="buf")
        res = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="res")
        nisa.dma_copy(buf, a)
        cc.all_reduce([buf], [res], cc.ReplicaGroup([list(range(ranks))]), nl.add)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(out, res)
        return out
    return all_reduce_4mib


def all_reduce_section():
    size = 4 << 20
    print(f"{'target':6} {'ranks':>5} {'path':14} {'steps':>5} {'collective us':>13} {'busbw GB/s':>10} "
          f"{'kernel us':>9}")
    for target in ("trn1", "trn2"):
        for ranks in (2, 4, 8, 32, 64, 128):
            prof = knit.profile(knit.simulate(all_reduce_kernel(ranks), ranks=ranks), nt.tensor[[1024, 1024], F32],
                                target=target)
            c = next(c for c in prof.collectives if c["rank"] == 0)
            ns = c["end_ns"] - c["start_ns"]
            busbw = 2 * (ranks - 1) / ranks * size / ns
            print(f"{target:6} {ranks:5d} {c['path']:14} {c['steps']:5d} {ns / 1e3:13.1f} {busbw:10.1f} "
                  f"{prof.latency_us:9.1f}")


def example_args(name, ranks):
    """Timing-only placeholders for each rank's arguments at the example's main() shapes."""
    if name == "tp_mlp":
        T, D, H, E = 128, 256, 512, 256
        return tp_mlp.tp_mlp_kernel, [nt.tensor[[T, D], F32], nt.tensor[[D, H // ranks], F32],
                                      nt.tensor[[H // ranks, E], F32], ranks]
    if name == "sp_layernorm":
        S, D, H = 256, 128, 256
        return sp_layernorm.sp_block_kernel, [nt.tensor[[S // ranks, D], F32], nt.tensor[[D], F32],
                                              nt.tensor[[D], F32], nt.tensor[[D, H // ranks], F32],
                                              nt.tensor[[H // ranks, D], F32], ranks]
    T, D, F = 32, 64, 64
    C = 2 * T // ranks
    return moe_dispatch.moe_kernel, [nt.tensor[[ranks * C, D], F32], nt.tensor[[ranks * C, 1], F32],
                                     nt.tensor[[D, F], F32], ranks]


def examples_section():
    print(f"{'example':13} {'ranks':>5} {'latency us':>10} {'in collectives us':>17} {'collectives':>11} path")
    for name in ("tp_mlp", "sp_layernorm", "moe_dispatch"):
        for ranks in (4, 8):
            kernel, args = example_args(name, ranks)
            prof = knit.profile(knit.simulate(kernel, ranks=ranks), *args, target="trn2")
            mine = [c for c in prof.collectives if c["rank"] == 0]
            waited = sum(c["end_ns"] - c["arrive_ns"] for c in mine)
            paths = ",".join(sorted({c["path"] for c in mine}))
            print(f"{name:13} {ranks:5d} {prof.latency_us:10.1f} {waited / 1e3:17.1f} {len(mine):11d} {paths}")


def main():
    with record.recorded("collectives"):
        print("== all_reduce of 4 MiB per rank (timing-only) ==")
        all_reduce_section()
        print("\n== multi-rank examples on trn2 (timing-only) ==")
        examples_section()


if __name__ == "__main__":
    main()
