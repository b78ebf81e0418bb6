"""Row softmax: out[r, :] = exp(x[r, :] - max(x[r, :])) / sum(exp(x[r, :] - max(x[r, :]))).

Per 128-row tile:
  1. Vector Engine ``tensor_reduce`` (max, negate=True) gives -max per row, a [P, 1] column;
  2. Scalar Engine ``activation_reduce`` computes exp(x + (-max)) with the column as bias and
     adds up each row in the same pass (reduce_res, another [P, 1] column);
  3. ``reciprocal`` of the row sums, then ``tensor_scalar`` multiplies every row by it.
"""
# knit-run: --shape 300x1024
import numpy as np

import knit as nki
import knit.isa as nisa
import knit.language as nl


@nki.jit
def softmax_kernel(x):
    """x: [rows, cols] in HBM. Returns the softmax along cols, in x's dtype."""
    rows, cols = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)

    P = nl.tile_size.pmax
    for i in nl.affine_range((rows + P - 1) // P):
        start = i * P
        size = min(P, rows - start)

        x_tile = nl.ndarray((size, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_tile, src=x[nl.ds(start, size), :])

        # neg_max[p] = -max_j x[p, j]  (kept in fp32)
        neg_max = nl.ndarray((size, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=x_tile, axis=1, negate=True)

        # exp_tile = exp(x - max), row_sum[p] = sum_j exp_tile[p, j]  (one ScalarE pass)
        exp_tile = nl.ndarray((size, cols), dtype=nl.float32, buffer=nl.sbuf)
        row_sum = nl.ndarray((size, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=exp_tile, op=nl.exp, data=x_tile, reduce_op=nl.add, reduce_res=row_sum,
                               bias=neg_max)

        # 1 / row_sum on the Vector Engine
        inv_sum = nl.ndarray((size, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv_sum, data=row_sum)

        # out = exp_tile * inv_sum (the [P, 1] column is broadcast along the free dim)
        out_tile = nl.ndarray((size, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=out_tile, data=exp_tile, op0=nl.multiply, operand0=inv_sum)

        nisa.dma_copy(dst=out[nl.ds(start, size), :], src=out_tile)

    return out


def reference(x):
    """NumPy reference in float64."""
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 1024)).astype(np.float32)
    out = softmax_kernel(x)
    print("softmax: max abs error", np.max(np.abs(out - reference(x))))
