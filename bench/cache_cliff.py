"""Why the 2048 x 2048 rows of bench/big_shapes.py section d sit near eager NumPy: host memory.

Two tables. First, this machine's copy speed against the working set: one thread copies
8 MiB buffers pairwise (np.copyto) until `working set` MiB have been read and written, best of
9, so the table shows where the data stops fitting in the CPU's last-level cache. Second, each
section-d kernel's host working set per run on both sides: eager NumPy touches the inputs, the
output and a few tiles (each tile allocated anew lands in the block just freed); Knit touches the
inputs, the output and the simulated SBUF bytes its allocation spreads the kernel's tiles over
(MemoryMap.high_water, times 128 partitions), which the multi-buffering of the engine program
needs.

    python3 bench/cache_cliff.py
"""
import os
import sys
import time

import numpy as np
import record

record.use_tree(os.path.join("examples", "kernels", "python"))

from big_shapes import inputs  # noqa: E402

import knit  # noqa: E402

MIB = 1 << 20
BLOCK = 8 * MIB


def copy_ms(working_set_mib):
    """Best time per 16 MiB copied when `working_set_mib` of 8 MiB buffers are copied in turn."""
    pairs = max(1, working_set_mib // 16)
    bufs = [np.full(BLOCK // 4, i, dtype=np.float32) for i in range(2 * pairs)]
    best = float("inf")
    for _ in range(9):
        start = time.perf_counter()
        for p in range(pairs):
            np.copyto(bufs[2 * p + 1], bufs[2 * p])
        best = min(best, (time.perf_counter() - start) / pairs)
    return 2 * best * 1e3


def knit_sbuf_bytes(kernel, args):
    compiled = knit.compile(kernel, *args)
    return compiled.memory_map().high_water["sbuf"] * 128


def main():
    print("a. one thread copying 8 MiB buffers in turn (np.copyto, best of 9)")
    print(f"   {'working set':>12}  {'ms per 16 MiB':>14}  {'GB/s (read + write)':>20}")
    for ws in (16, 32, 48, 64, 80, 96, 128, 256):
        ms = copy_ms(ws)
        print(f"   {ws:>8} MiB  {ms:>14.2f}  {2 * 16 * MIB / ms / 1e6:>20.1f}")
    print()
    print("b. host bytes one run of each section-d kernel touches, 2048 x 2048 fp32")
    print(f"   {'kernel':<12}{'HBM in + out':>14}{'Knit SBUF':>12}{'Knit total':>12}")
    for name in ("tensor_add", "softmax", "rmsnorm", "layernorm"):
        kernel, args = inputs(name, (2048, 2048))
        hbm = sum(a.nbytes for a in args) + 2048 * 2048 * 4
        sbuf = knit_sbuf_bytes(kernel, args)
        print(f"   {name:<12}{hbm / MIB:>10.1f} MiB{sbuf / MIB:>8.1f} MiB{(hbm + sbuf) / MIB:>8.1f} MiB")
    print()
    print("Eager NumPy's working set is about the 'HBM in + out' column plus a few MiB of tiles.")


if __name__ == "__main__":
    with record.recorded("cache_cliff"):
        sys.exit(main())
