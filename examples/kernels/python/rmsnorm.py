"""RMSNorm: out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * w.

Per 128-row tile:
  1. Scalar Engine ``activation_reduce`` squares the tile and sums each row in one pass;
  2. ``tensor_scalar`` turns the sum into mean + eps (two ALU stages: * 1/cols, + eps) and
     ``activation(rsqrt)`` gives 1 / rms per row, a [P, 1] column;
  3. ``tensor_scalar`` scales each row by it, ``tensor_tensor`` multiplies by the weight.
The weight row is loaded once, broadcast to all 128 partitions by the DMA (a stride-0 view).
"""
# knit-run: --shape 300x1024 --shape 1024
import numpy as np

import knit as nki
import knit.isa as nisa
import knit.language as nl

EPS = 1e-6


@nki.jit
def rmsnorm_kernel(x, w):
    """x: [rows, cols], w: [cols] in HBM. Returns RMSNorm(x) * w in x's dtype."""
    rows, cols = x.shape
    assert w.shape == (cols,), "w must be a [cols] vector"
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)

    P = nl.tile_size.pmax
    # w as a [1, cols] row, broadcast along the partition dim: every partition gets a copy.
    w_tile = nl.ndarray((P, cols), dtype=w.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=w_tile, src=w.reshape((1, cols)).broadcast(0, P))

    for i in nl.affine_range((rows + P - 1) // P):
        start = i * P
        size = min(P, rows - start)

        x_tile = nl.ndarray((size, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_tile, src=x[nl.ds(start, size), :])

        # sum_sq[p] = sum_j x[p, j]^2 (the squares themselves are a by-product)
        squares = nl.ndarray((size, cols), dtype=nl.float32, buffer=nl.sbuf)
        sum_sq = nl.ndarray((size, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=squares, op=nl.square, data=x_tile, reduce_op=nl.add, reduce_res=sum_sq)

        # inv_rms = rsqrt(sum_sq / cols + eps)
        mean_sq = nl.ndarray((size, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=mean_sq, data=sum_sq, op0=nl.multiply, operand0=1.0 / cols, op1=nl.add,
                           operand1=EPS)
        inv_rms = nl.ndarray((size, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=inv_rms, op=nl.rsqrt, data=mean_sq)

        # out = (x * inv_rms) * w
        normed = nl.ndarray((size, cols), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=normed, data=x_tile, op0=nl.multiply, operand0=inv_rms)
        out_tile = nl.ndarray((size, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=out_tile, data1=normed, data2=w_tile[0:size, :], op=nl.multiply)

        nisa.dma_copy(dst=out[nl.ds(start, size), :], src=out_tile)

    return out


def reference(x, w):
    """NumPy reference in float64."""
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    return x / np.sqrt(np.mean(x * x, axis=1, keepdims=True) + EPS) * w


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 1024)).astype(np.float32)
    w = rng.standard_normal(1024).astype(np.float32)
    out = rmsnorm_kernel(x, w)
    print("rmsnorm: max abs error", np.max(np.abs(out - reference(x, w))))
