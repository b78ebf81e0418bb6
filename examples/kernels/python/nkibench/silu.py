"""NKIBench ``silu`` (M4096 N7168, fp32): out = x * sigmoid(x) = x / (1 + exp(-x)).

Algorithm of NKIBench's ``silu_M4096_N7168_0`` (legacy ``neuronxcc.nki`` API, as the Neuron
compiler printed it), in our words: x [M, N] is read as [128, M / 128, N], so partition p holds
rows p * (M / 128) .. p * (M / 128) + M / 128 - 1. For each of those M / 128 row slots and each
1024-wide column block, one DMA loads a [128, 1024] tile (4 KiB contiguous per partition, rows
M / 128 rows apart in HBM); each 512-wide half then goes through four instructions:

1. ScalarE ``activation(exp, scale=-1.0, bias=zero column)``: exp(-x);
2. ``tensor_scalar(add 1.0)`` (engine left to the compiler);
3. VectorE ``reciprocal``: sigmoid(x);
4. ``nl.multiply`` (a ``tensor_tensor`` multiply): x * sigmoid(x), into the output tile;

and one DMA stores the [128, 1024] tile to the same place in out. The zero bias column is one
``memset`` before the loops. Deviation: none in the work done; where the original leaves the
engine to the compiler (``tensor_scalar``, ``nl.multiply``), Knit's engine assignment picks
the least-loaded eligible engine (docs/codegen.md, Engine assignment), which need not be the
Neuron compiler's choice. The original's ``reciprocal`` also leaves its engine open (the Neuron
2.21 API let it run on ScalarE); the current API's, used here, is VectorE only.
"""
import numpy as np

import knit as nki
import knit.isa as nisa
import knit.language as nl


@nki.jit
def silu_kernel(x, tile_f=1024, half_f=512):
    """x: [M, N] fp32 in HBM, M a multiple of 128 and N of tile_f. Returns silu(x), [M, N]."""
    M, N = x.shape
    P = nl.tile_size.pmax
    slots = M // P
    out = nl.ndarray((M, N), dtype=x.dtype, buffer=nl.shared_hbm)
    x_v = x.reshape(P, slots, N)  # partition p holds rows p * slots .. p * slots + slots - 1
    out_v = out.reshape(P, slots, N)

    zero = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=zero, value=0.0)
    for s in nl.affine_range(slots):
        for c in nl.affine_range(N // tile_f):
            x_t = nl.ndarray((P, tile_f), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=x_t, src=x_v[:, s, nl.ds(c * tile_f, tile_f)])
            y_t = nl.ndarray((P, tile_f), dtype=x.dtype, buffer=nl.sbuf)
            for h in nl.affine_range(tile_f // half_f):
                cols = nl.ds(h * half_f, half_f)
                e = nl.ndarray((P, half_f), dtype=nl.float32, buffer=nl.sbuf)
                nisa.activation(dst=e, op=nl.exp, data=x_t[:, cols], bias=zero, scale=-1.0)
                d = nl.ndarray((P, half_f), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_scalar(dst=d, data=e, op0=nl.add, operand0=1.0, reverse0=True)
                r = nl.ndarray((P, half_f), dtype=nl.float32, buffer=nl.sbuf)
                nisa.reciprocal(dst=r, data=d)
                nisa.tensor_tensor(dst=y_t[:, cols], data1=x_t[:, cols], data2=r, op=nl.multiply)
            nisa.dma_copy(dst=out_v[:, s, nl.ds(c * tile_f, tile_f)], src=y_t)
    return out


def reference(x):
    """NumPy reference in float64."""
    x = np.asarray(x, dtype=np.float64)
    return x / (1.0 + np.exp(-x))
