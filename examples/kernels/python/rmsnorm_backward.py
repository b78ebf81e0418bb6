"""RMSNorm backward: the gradients of y = x * r * w, r = 1 / sqrt(mean(x^2) + eps) per row.

Given g = dL/dy (same shape as x):
    dx[i, :] = r * (g * w)[i, :] - (r^3 / cols) * x[i, :] * sum_j (g * w * x)[i, j]
    dw       = sum over rows of g * x * r
Per 128-row tile, in fp32 on chip:
  1. ``activation_reduce`` (square, add) and ``activation(rsqrt)`` recompute r, as the forward does;
  2. ``tensor_tensor`` gives g * w, and ``tensor_tensor`` + ``tensor_reduce`` the row dot
     products sum_j (g * w * x); [P, 1] column arithmetic then gives the per-row coefficient;
  3. ``scalar_tensor_tensor`` writes dx = x * coef + (g * w) * r in one Vector Engine pass;
  4. dw sums over rows, the partition dim: the Tensor Engine does it as ones^T @ (g * x * r),
     accumulating every row tile into PSUM (one [1, <=512] bank per column chunk).
cols is limited to 4096 so that the dw accumulators fit in PSUM (8 banks of 512 fp32).
"""
# knit-run: --shape 300x1024 --shape 1024 --shape 300x1024
import numpy as np

import knit as nki
import knit.isa as nisa
import knit.language as nl

EPS = 1e-6  # rmsnorm.py's (each example stands alone)
CHUNK = 512  # fp32 columns per PSUM bank


@nki.jit
def rmsnorm_backward_kernel(x, w, g):
    """x, g: [rows, cols]; w: [cols]. Returns (dx in x's dtype, dw in w's dtype)."""
    rows, cols = x.shape
    assert w.shape == (cols,) and g.shape == x.shape, "w must be [cols] and g like x"
    assert cols <= 8 * CHUNK, "cols must be at most 4096 (the dw accumulators fill PSUM)"
    dx = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    dw = nl.ndarray((cols,), dtype=w.dtype, buffer=nl.shared_hbm)

    P = nl.tile_size.pmax
    w_tile = nl.ndarray((P, cols), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=w_tile, src=w.reshape((1, cols)).broadcast(0, P))
    ones = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
    chunks = [(c, min(CHUNK, cols - c)) for c in range(0, cols, CHUNK)]
    dw_acc = [nl.ndarray((1, n), dtype=nl.float32, buffer=nl.psum) for _, n in chunks]

    for i in nl.sequential_range((rows + P - 1) // P):  # sequential: every tile adds into dw_acc
        start = i * P
        size = min(P, rows - start)
        x_tile = nl.ndarray((size, cols), dtype=nl.float32, buffer=nl.sbuf)
        g_tile = nl.ndarray((size, cols), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_tile, src=x[nl.ds(start, size), :])
        nisa.dma_copy(dst=g_tile, src=g[nl.ds(start, size), :])

        # r = rsqrt(sum(x^2) / cols + eps), as in the forward kernel
        squares = nl.ndarray((size, cols), dtype=nl.float32, buffer=nl.sbuf)
        sum_sq = nl.ndarray((size, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=squares, op=nl.square, data=x_tile, reduce_op=nl.add, reduce_res=sum_sq)
        mean_sq = nl.ndarray((size, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=mean_sq, data=sum_sq, op0=nl.multiply, operand0=1.0 / cols, op1=nl.add, operand1=EPS)
        r = nl.ndarray((size, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=r, op=nl.rsqrt, data=mean_sq)

        # gw = g * w; dot = sum_j gw * x
        gw = nl.ndarray((size, cols), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=gw, data1=g_tile, data2=w_tile[0:size, :], op=nl.multiply)
        gwx = nl.ndarray((size, cols), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=gwx, data1=gw, data2=x_tile, op=nl.multiply)
        dot = nl.ndarray((size, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=dot, op=nl.add, data=gwx, axis=1)

        # coef = -(r^3 / cols) * dot
        r2 = nl.ndarray((size, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=r2, data1=r, data2=r, op=nl.multiply)
        r3 = nl.ndarray((size, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=r3, data1=r2, data2=r, op=nl.multiply)
        coef = nl.ndarray((size, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=coef, data=r3, op0=nl.multiply, operand0=-1.0 / cols, op1=nl.multiply,
                                  operand1=dot)

        # dx = x * coef + gw * r
        gw_r = nl.ndarray((size, cols), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=gw_r, data=gw, op0=nl.multiply, operand0=r)
        dx_tile = nl.ndarray((size, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=dx_tile, data=x_tile, op0=nl.multiply, operand0=coef, op1=nl.add,
                                  operand1=gw_r)
        nisa.dma_copy(dst=dx[nl.ds(start, size), :], src=dx_tile)

        # dw += ones^T @ (g * x * r), chunk by chunk
        gx = nl.ndarray((size, cols), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=gx, data1=g_tile, data2=x_tile, op=nl.multiply)
        gxr = nl.ndarray((size, cols), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=gxr, data=gx, op0=nl.multiply, operand0=r)
        for k, (c, n) in enumerate(chunks):
            nisa.nc_matmul(dst=dw_acc[k], stationary=ones[0:size, :], moving=gxr[:, c:c + n])

    dw_tile = nl.ndarray((1, cols), dtype=w.dtype, buffer=nl.sbuf)
    for k, (c, n) in enumerate(chunks):
        nisa.tensor_copy(dst=dw_tile[:, c:c + n], src=dw_acc[k])
    nisa.dma_copy(dst=dw.reshape((1, cols)), src=dw_tile)
    return dx, dw


def reference(x, w, g):
    """NumPy reference in float64: (dx, dw)."""
    x, w, g = (np.asarray(a, dtype=np.float64) for a in (x, w, g))
    cols = x.shape[1]
    r = 1.0 / np.sqrt(np.mean(x * x, axis=1, keepdims=True) + EPS)
    gw = g * w
    dx = r * gw - (r ** 3 / cols) * x * np.sum(gw * x, axis=1, keepdims=True)
    dw = np.sum(g * x * r, axis=0)
    return dx, dw


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 1024)).astype(np.float32)
    w = rng.standard_normal(1024).astype(np.float32)
    g = rng.standard_normal((300, 1024)).astype(np.float32)
    dx, dw = rmsnorm_backward_kernel(x, w, g)
    want_dx, want_dw = reference(x, w, g)
    err_dx, err_dw = np.max(np.abs(dx - want_dx)), np.max(np.abs(dw - want_dw))
    print("rmsnorm_backward: max abs error", max(err_dx, err_dw), f"(dx {err_dx:.3g}, dw {err_dw:.3g})")
