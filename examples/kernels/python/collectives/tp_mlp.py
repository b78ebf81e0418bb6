"""Tensor-parallel MLP over R ranks: y = silu(x @ W1) @ W2, with one ``cc.all_reduce``.

The hidden dimension H is split across the ranks (Megatron style). Rank r holds the column
block W1[:, r*H/R : (r+1)*H/R] and the matching row block of W2, so it can compute its share
of the hidden activations without talking to anyone:

    h_r = silu(x @ W1_r)          [T, H/R]   (silu acts per element, so the column split is exact)
    y_r = h_r @ W2_r              [T, E]     (a partial sum over this rank's hidden units)
    y   = y_0 + y_1 + ... + y_{R-1}          (``cc.all_reduce`` with nl.add)

Every rank ends with the full y. On each rank:
  1. x^T: ``nc_matmul`` contracts over partitions, so the features of x go onto partitions
     (``nc_transpose`` through PSUM, 128 features at a time);
  2. h_r^T = W1_r^T @ x^T per 128-wide block of hidden units, accumulated over the feature
     tiles in PSUM and evicted with ``activation(silu)``; computing h transposed puts the hidden
     units on partitions, which is what the second matmul contracts over;
  3. y_r = h_r @ W2_r accumulates over the hidden blocks in one PSUM tile;
  4. y_r goes to an internal ``shared_hbm`` buffer, the ranks' buffers are summed by
     ``cc.all_reduce`` (in rank order, fp32, one rounding to the dtype), and the sum is the
     kernel's output.

With ``tp_size`` smaller than the number of ranks, consecutive blocks of tp_size ranks each run
the MLP on their own x (data parallel across the blocks, tensor parallel within each): the
replica group then has one rank list per block, e.g. ``[[0, 1, 2, 3], [4, 5, 6, 7]]``.

Run it: ``PYTHONPATH=python python3 examples/kernels/python/collectives/tp_mlp.py``.
"""
import numpy as np

import knit
import knit.collectives as cc
import knit.isa as nisa
import knit.language as nl


@knit.jit
def tp_mlp_kernel(x, w1_shard, w2_shard, n_ranks, tp_size=None):
    """x: [T, D] (every rank of a group the same), w1_shard: [D, H/R], w2_shard: [H/R, E]
    (this rank's blocks); T <= 128, D a multiple of 128, H/R a multiple of 128 or at most 128,
    E <= 512. n_ranks: the number of ranks; tp_size: the ranks R that share one MLP (default:
    all of them), consecutive ranks forming a group, so that n_ranks / R groups (data-parallel
    replicas) each run their own x. Returns y = silu(x @ W1) @ W2, [T, E], on every rank."""
    T, D = x.shape
    D_w, H_r = w1_shard.shape
    H_w, E = w2_shard.shape
    P = nl.tile_size.pmax
    assert D_w == D and H_w == H_r, "w1_shard is [D, H/R] and w2_shard [H/R, E]"
    assert T <= P and D % P == 0 and E <= nl.tile_size.gemm_moving_fmax
    HB = min(H_r, P)  # hidden units per block (the partitions of h^T)
    assert H_r % HB == 0
    n_feat, n_hid = D // P, H_r // HB
    R = tp_size or n_ranks
    assert n_ranks % R == 0, "tp_size must divide n_ranks"
    groups = cc.ReplicaGroup([list(range(g * R, (g + 1) * R)) for g in range(n_ranks // R)])

    # 1. x^T as n_feat blocks of [128 features, T] side by side along the free dim.
    x_tile = nl.ndarray((T, D), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x_tile, src=x)
    xT = nl.ndarray((P, n_feat * T), dtype=x.dtype, buffer=nl.sbuf)
    for k in nl.affine_range(n_feat):
        xT_psum = nl.ndarray((P, T), dtype=x.dtype, buffer=nl.psum)
        nisa.nc_transpose(dst=xT_psum, data=x_tile[:, k * P:(k + 1) * P])
        nisa.tensor_copy(dst=xT[:, k * T:(k + 1) * T], src=xT_psum)

    # 2. h_r^T = silu(W1_r^T @ x^T), one [HB, T] block per group of HB hidden units.
    hT = nl.ndarray((HB, n_hid * T), dtype=nl.float32, buffer=nl.sbuf)
    for j in nl.affine_range(n_hid):
        h_psum = nl.ndarray((HB, T), dtype=nl.float32, buffer=nl.psum)
        for k in nl.affine_range(n_feat):
            w1_tile = nl.ndarray((P, HB), dtype=w1_shard.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=w1_tile, src=w1_shard[k * P:(k + 1) * P, j * HB:(j + 1) * HB])
            nisa.nc_matmul(dst=h_psum, stationary=w1_tile, moving=xT[:, k * T:(k + 1) * T])
        nisa.activation(dst=hT[:, j * T:(j + 1) * T], op=nl.silu, data=h_psum)

    # 3. y_r = h_r @ W2_r: the hidden blocks accumulate in one PSUM tile.
    y_psum = nl.ndarray((T, E), dtype=nl.float32, buffer=nl.psum)
    for j in nl.affine_range(n_hid):
        w2_tile = nl.ndarray((HB, E), dtype=w2_shard.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=w2_tile, src=w2_shard[j * HB:(j + 1) * HB, :])
        nisa.nc_matmul(dst=y_psum, stationary=hT[:, j * T:(j + 1) * T], moving=w2_tile)
    y_tile = nl.ndarray((T, E), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=y_tile, src=y_psum)

    # 4. Sum the partial outputs of the ranks of this rank's group.
    partial = nl.ndarray((T, E), dtype=x.dtype, buffer=nl.shared_hbm, name="tp_partial")
    total = nl.ndarray((T, E), dtype=x.dtype, buffer=nl.shared_hbm, name="tp_total")
    nisa.dma_copy(dst=partial, src=y_tile)
    cc.all_reduce([partial], [total], groups, nl.add)

    out = nl.ndarray((T, E), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=total)
    return out


def shard(w1, w2, n_ranks):
    """Rank r's blocks: columns r*H/R .. (r+1)*H/R of w1 and the same rows of w2."""
    h_r = w1.shape[1] // n_ranks
    w1_shards = [np.ascontiguousarray(w1[:, r * h_r:(r + 1) * h_r]) for r in range(n_ranks)]
    w2_shards = [np.ascontiguousarray(w2[r * h_r:(r + 1) * h_r, :]) for r in range(n_ranks)]
    return w1_shards, w2_shards


def run(x, w1, w2, n_ranks):
    """The MLP on n_ranks simulated ranks; returns each rank's y (a list)."""
    w1_shards, w2_shards = shard(w1, w2, n_ranks)
    return knit.simulate(tp_mlp_kernel, ranks=n_ranks)(x, w1_shards, w2_shards, n_ranks)


def reference(x, w1, w2):
    """The unsplit MLP on one device, in float64."""
    z = np.asarray(x, np.float64) @ np.asarray(w1, np.float64)
    return (z / (1.0 + np.exp(-z))) @ np.asarray(w2, np.float64)


def main(n_ranks=4):
    rng = np.random.default_rng(0)
    T, D, H, E = 128, 256, 512, 256
    x = rng.standard_normal((T, D)).astype(np.float32)
    w1 = (rng.standard_normal((D, H)) / np.sqrt(D)).astype(np.float32)
    w2 = (rng.standard_normal((H, E)) / np.sqrt(H)).astype(np.float32)
    outs = run(x, w1, w2, n_ranks)
    ref = reference(x, w1, w2)
    errors = [float(np.max(np.abs(out - ref))) for out in outs]
    same = all(np.array_equal(out, outs[0]) for out in outs)
    print(f"tp_mlp on {n_ranks} ranks: max abs error {max(errors):.3g} (|y| up to {np.max(np.abs(ref)):.3g}); "
          f"ranks agree bit for bit: {same}")


if __name__ == "__main__":
    main()
