"""Sequence-parallel LayerNorm + MLP block over R ranks: ``cc.all_gather`` then ``cc.reduce_scatter``.

out = x + relu(LayerNorm(x) @ W1) @ W2 for a sequence x [S, D] whose rows are spread over the
ranks: rank r holds rows r*S/R .. (r+1)*S/R and gets the same rows of out. This is the layout
of Megatron-style sequence parallelism, where the tensor-parallel all_reduce of an MLP is split
into the all_gather before it and the reduce_scatter after it:

  1. LayerNorm on the local rows: it acts on each row alone, so no rank needs another's data
     (bn_stats / bn_aggr for mean and variance, rsqrt, scale and shift, as in layernorm.py);
  2. ``cc.all_gather`` along dim 0 gives every rank the normalised full sequence [S, D];
  3. a tensor-parallel MLP on it: rank r holds the column block W1_r of W1 and the row block
     W2_r of W2, computes relu(ln @ W1_r) @ W2_r, a [S, D] partial sum over its hidden units;
  4. ``cc.reduce_scatter`` along dim 0 adds the ranks' partial sums (in rank order, fp32, one
     rounding) and hands rank r only its own rows, to which it adds the residual x_r.

Rows go through the matmuls transposed (features on partitions), as ``nc_matmul`` contracts
over partitions: the gathered rows are transposed on the Tensor Engine 128 at a time.

Run it: ``PYTHONPATH=python python3 examples/kernels/python/collectives/sp_layernorm.py``.
"""
import numpy as np

import knit
import knit.collectives as cc
import knit.isa as nisa
import knit.language as nl

EPS = 1e-5


def layernorm_rows(x_tile, gamma_tile, beta_tile, rows, cols):
    """LayerNorm of each row of the SBUF tile x_tile [rows, cols] (cols <= 512), in fp32."""
    stats = nl.ndarray((rows, 6), dtype=nl.float32, buffer=nl.sbuf)
    nisa.bn_stats(dst=stats, data=x_tile)
    mean_var = nl.ndarray((rows, 2), dtype=nl.float32, buffer=nl.sbuf)
    nisa.bn_aggr(dst=mean_var, data=stats)
    var_eps = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=var_eps, data=mean_var[:, 1:2], op0=nl.add, operand0=EPS)
    rstd = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=rstd, op=nl.rsqrt, data=var_eps)
    normed = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=normed, data=x_tile, op0=nl.subtract, operand0=mean_var[:, 0:1], op1=nl.multiply,
                       operand1=rstd)
    nisa.tensor_tensor(dst=normed, data1=normed, data2=gamma_tile, op=nl.multiply)
    nisa.tensor_tensor(dst=normed, data1=normed, data2=beta_tile, op=nl.add)
    return normed


@knit.jit
def sp_block_kernel(x_rows, gamma, beta, w1_shard, w2_shard, n_ranks):
    """x_rows: [S/R, D] (this rank's rows), gamma, beta: [D], w1_shard: [D, H/R], w2_shard:
    [H/R, D] (this rank's blocks); S/R <= 128, S a multiple of 128 or at most 128, D <= 128,
    H/R <= 128. n_ranks: the number of ranks R. Returns this rank's rows of
    x + relu(LayerNorm(x) @ W1) @ W2, [S/R, D]."""
    S_r, D = x_rows.shape
    H_r = w1_shard.shape[1]
    S = S_r * n_ranks
    P = nl.tile_size.pmax
    assert w1_shard.shape == (D, H_r) and w2_shard.shape == (H_r, D)
    assert S_r <= P and D <= P and H_r <= P and S <= nl.tile_size.gemm_moving_fmax
    SB = min(S, P)  # rows per block of the gathered sequence
    assert S % SB == 0
    group = cc.ReplicaGroup([list(range(n_ranks))])

    # 1. LayerNorm of the local rows (gamma and beta broadcast to every partition).
    x_tile = nl.ndarray((S_r, D), dtype=x_rows.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x_tile, src=x_rows)
    gamma_tile = nl.ndarray((S_r, D), dtype=gamma.dtype, buffer=nl.sbuf)
    beta_tile = nl.ndarray((S_r, D), dtype=beta.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=gamma_tile, src=gamma.reshape((1, D)).broadcast(0, S_r))
    nisa.dma_copy(dst=beta_tile, src=beta.reshape((1, D)).broadcast(0, S_r))
    normed = layernorm_rows(x_tile, gamma_tile, beta_tile, S_r, D)

    # 2. Every rank gets the whole normalised sequence, rows in rank order.
    ln_local = nl.ndarray((S_r, D), dtype=nl.float32, buffer=nl.shared_hbm, name="sp_ln_local")
    ln_full = nl.ndarray((S, D), dtype=nl.float32, buffer=nl.shared_hbm, name="sp_ln_full")
    nisa.dma_copy(dst=ln_local, src=normed)
    cc.all_gather([ln_local], [ln_full], group, 0)

    # ln^T [D, S]: features on partitions, one Tensor Engine transpose per block of SB rows.
    lnT = nl.ndarray((D, S), dtype=nl.float32, buffer=nl.sbuf)
    for b in nl.affine_range(S // SB):
        rows = nl.ndarray((SB, D), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=rows, src=ln_full[b * SB:(b + 1) * SB, :])
        rows_t = nl.ndarray((D, SB), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_transpose(dst=rows_t, data=rows)
        nisa.tensor_copy(dst=lnT[:, b * SB:(b + 1) * SB], src=rows_t)

    # 3. h_r^T = relu(W1_r^T @ ln^T) [H/R, S], then y_r = h_r @ W2_r block by block of rows.
    w1_tile = nl.ndarray((D, H_r), dtype=w1_shard.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=w1_tile, src=w1_shard)
    h_psum = nl.ndarray((H_r, S), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=h_psum, stationary=w1_tile, moving=lnT)
    hT = nl.ndarray((H_r, S), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=hT, op=nl.relu, data=h_psum)

    w2_tile = nl.ndarray((H_r, D), dtype=w2_shard.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=w2_tile, src=w2_shard)
    partial = nl.ndarray((S, D), dtype=nl.float32, buffer=nl.shared_hbm, name="sp_partial")
    for b in nl.affine_range(S // SB):
        y_psum = nl.ndarray((SB, D), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=y_psum, stationary=hT[:, b * SB:(b + 1) * SB], moving=w2_tile)
        y_tile = nl.ndarray((SB, D), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=y_tile, src=y_psum)
        nisa.dma_copy(dst=partial[b * SB:(b + 1) * SB, :], src=y_tile)

    # 4. Sum the partial outputs; rank r keeps rows r*S/R .. (r+1)*S/R, plus its residual.
    mine = nl.ndarray((S_r, D), dtype=nl.float32, buffer=nl.shared_hbm, name="sp_mine")
    cc.reduce_scatter([partial], [mine], group, 0, nl.add)
    mlp_tile = nl.ndarray((S_r, D), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=mlp_tile, src=mine)
    out_tile = nl.ndarray((S_r, D), dtype=x_rows.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=out_tile, data1=x_tile, data2=mlp_tile, op=nl.add)
    out = nl.ndarray((S_r, D), dtype=x_rows.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=out_tile)
    return out


def run(x, gamma, beta, w1, w2, n_ranks):
    """The block on n_ranks simulated ranks, x split by rows; returns each rank's rows (a list)."""
    s_r, h_r = x.shape[0] // n_ranks, w1.shape[1] // n_ranks
    x_rows = [np.ascontiguousarray(x[r * s_r:(r + 1) * s_r]) for r in range(n_ranks)]
    w1_shards = [np.ascontiguousarray(w1[:, r * h_r:(r + 1) * h_r]) for r in range(n_ranks)]
    w2_shards = [np.ascontiguousarray(w2[r * h_r:(r + 1) * h_r]) for r in range(n_ranks)]
    return knit.simulate(sp_block_kernel, ranks=n_ranks)(x_rows, gamma, beta, w1_shards, w2_shards, n_ranks)


def reference(x, gamma, beta, w1, w2):
    """The block on the whole sequence on one device, in float64."""
    x = np.asarray(x, np.float64)
    ln = (x - x.mean(axis=1, keepdims=True)) / np.sqrt(x.var(axis=1, keepdims=True) + EPS)
    ln = ln * np.asarray(gamma, np.float64) + np.asarray(beta, np.float64)
    return x + np.maximum(ln @ np.asarray(w1, np.float64), 0.0) @ np.asarray(w2, np.float64)


def main(n_ranks=4):
    rng = np.random.default_rng(0)
    S, D, H = 256, 128, 256
    x = rng.standard_normal((S, D)).astype(np.float32)
    gamma = (1.0 + 0.1 * rng.standard_normal(D)).astype(np.float32)
    beta = (0.1 * rng.standard_normal(D)).astype(np.float32)
    w1 = (rng.standard_normal((D, H)) / np.sqrt(D)).astype(np.float32)
    w2 = (rng.standard_normal((H, D)) / np.sqrt(H)).astype(np.float32)
    outs = run(x, gamma, beta, w1, w2, n_ranks)
    error = float(np.max(np.abs(np.concatenate(outs) - reference(x, gamma, beta, w1, w2))))
    print(f"sp_layernorm on {n_ranks} ranks: {S // n_ranks} rows each, max abs error {error:.3g}")


if __name__ == "__main__":
    main()
