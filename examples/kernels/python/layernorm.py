"""LayerNorm: out[r, :] = (x[r, :] - mean) * rsqrt(var + eps) * gamma + beta.

Per 128-row tile:
  1. ``bn_stats`` over chunks of at most ``nl.tile_size.bn_stats_fmax`` (512) columns writes
     6 statistics per chunk and partition; ``bn_aggr`` combines them into [mean, var];
  2. rstd = rsqrt(var + eps): ``tensor_scalar`` adds eps, ``activation(rsqrt)``;
  3. one ``tensor_scalar`` with two ALU stages computes (x - mean) * rstd, both operands being
     [P, 1] columns;
  4. ``tensor_tensor`` multiplies by gamma and adds beta (loaded once, broadcast to every
     partition with a stride-0 access pattern).
"""
# knit-run: --shape 300x1000 --shape 1000 --shape 1000
import numpy as np

import knit as nki
import knit.isa as nisa
import knit.language as nl


@nki.jit
def layernorm_kernel(x, gamma, beta, epsilon=1e-5):
    """x: [rows, cols], gamma, beta: [cols] in HBM. Returns LayerNorm(x) in x's dtype."""
    rows, cols = x.shape
    assert gamma.shape == (cols,) and beta.shape == (cols,)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)

    P = nl.tile_size.pmax
    # gamma and beta on every partition: an HBM access pattern whose partition step is 0.
    gamma_tile = nl.ndarray((P, cols), dtype=gamma.dtype, buffer=nl.sbuf)
    beta_tile = nl.ndarray((P, cols), dtype=beta.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=gamma_tile, src=gamma.ap([[0, P], [1, cols]], offset=0))
    nisa.dma_copy(dst=beta_tile, src=beta.ap([[0, P], [1, cols]], offset=0))

    FMAX = nl.tile_size.bn_stats_fmax
    n_chunks = (cols + FMAX - 1) // FMAX

    for i in nl.affine_range((rows + P - 1) // P):
        start = i * P
        size = min(P, rows - start)

        x_tile = nl.ndarray((size, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_tile, src=x[nl.ds(start, size), :])

        # bn_stats has a free-size limit: 6 statistics per chunk of <= 512 columns.
        stats = nl.ndarray((size, 6 * n_chunks), dtype=nl.float32, buffer=nl.sbuf)
        for c in nl.affine_range(n_chunks):
            width = min(FMAX, cols - c * FMAX)
            nisa.bn_stats(dst=stats[:, c * 6:(c + 1) * 6], data=x_tile[:, nl.ds(c * FMAX, width)])

        # mean_var[:, 0] = mean, mean_var[:, 1] = (population) variance
        mean_var = nl.ndarray((size, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(dst=mean_var, data=stats)
        mean = mean_var[:, 0:1]
        var = mean_var[:, 1:2]

        # rstd = 1 / sqrt(var + eps)
        var_eps = nl.ndarray((size, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=var_eps, data=var, op0=nl.add, operand0=epsilon)
        rstd = nl.ndarray((size, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=rstd, op=nl.rsqrt, data=var_eps)

        # normed = (x - mean) * rstd: two ALU stages, each with a [P, 1] operand
        normed = nl.ndarray((size, cols), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=normed, data=x_tile, op0=nl.subtract, operand0=mean, op1=nl.multiply,
                           operand1=rstd)

        # out = normed * gamma + beta
        scaled = nl.ndarray((size, cols), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=scaled, data1=normed, data2=gamma_tile[0:size, :], op=nl.multiply)
        out_tile = nl.ndarray((size, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=out_tile, data1=scaled, data2=beta_tile[0:size, :], op=nl.add)

        nisa.dma_copy(dst=out[nl.ds(start, size), :], src=out_tile)

    return out


def reference(x, gamma, beta, epsilon=1e-5):
    """NumPy reference in float64 (population variance, as bn_aggr)."""
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(axis=1, keepdims=True)
    var = x.var(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(var + epsilon) * np.asarray(gamma, np.float64) + np.asarray(beta, np.float64)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 1000)).astype(np.float32)
    gamma = rng.standard_normal(1000).astype(np.float32)
    beta = rng.standard_normal(1000).astype(np.float32)
    out = layernorm_kernel(x, gamma, beta)
    print("layernorm: max abs error", np.max(np.abs(out - reference(x, gamma, beta))))
