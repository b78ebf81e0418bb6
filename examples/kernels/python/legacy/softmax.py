"""Row softmax in the legacy G1 style: out[r, :] = exp(x[r, :] - max_r) / sum(exp(x[r, :] - max_r)).

Per 128-row tile (the last one ragged, handled with ``mask=``):
  1. ``nisa.tensor_reduce(np.max, ..., negate=True)`` gives -max per row as a [P, 1] column;
  2. ``nisa.activation(nl.exp, tile, bias=neg_max)`` computes exp(x - max) on the Scalar Engine;
  3. ``nl.sum(..., axis=1, keepdims=True)`` adds up each row, ``nl.reciprocal`` inverts it;
  4. ``exp_tile * inv_sum`` broadcasts the [P, 1] column along the free dim.
Results come back from each call (no ``dst``); ``dtype=nl.float32`` keeps intermediates in fp32.
"""
import numpy as np

import knit.legacy as nki
import knit.legacy.isa as nisa
import knit.legacy.language as nl


@nki.jit
def softmax_kernel(x):
    """x: [rows, cols] in HBM (cols fits one partition). Returns softmax along cols in x's dtype."""
    rows, cols = x.shape
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    P = nl.tile_size.pmax
    i_p = nl.arange(P)[:, None]
    i_f = nl.arange(cols)[None, :]
    for i in nl.affine_range((rows + P - 1) // P):
        row = i * P + i_p
        valid = row < rows
        tile = nl.load(x[row, i_f], mask=valid)
        neg_max = nisa.tensor_reduce(np.max, tile, axis=[1], negate=True, keepdims=True, dtype=nl.float32,
                                     mask=valid)
        exp_tile = nisa.activation(nl.exp, tile, bias=neg_max, dtype=nl.float32, mask=valid)
        row_sum = nl.sum(exp_tile, axis=1, keepdims=True, mask=valid)
        inv_sum = nl.reciprocal(row_sum, mask=valid)
        y = nl.multiply(exp_tile, inv_sum, dtype=x.dtype, mask=valid)
        nl.store(out[row, i_f], value=y, mask=valid)
    return out


def reference(x):
    """NumPy reference in float64."""
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((300, 1024)) * 4).astype(np.float32)
    out = softmax_kernel(x)
    print("legacy softmax: max abs error", np.max(np.abs(out - reference(x))))
