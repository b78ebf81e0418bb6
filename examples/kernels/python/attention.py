"""Causal self-attention forward for one head: out = softmax(q @ k.T / sqrt(d) + mask) @ v.

q, k, v are [seq, d] with d = 128 (the head dim fills the 128 partitions of a contraction)
and seq a multiple of 128. For each block of 128 queries:

  1. scores = q_blk @ k.T on the Tensor Engine. ``nc_matmul`` contracts over the partition
     dim, so both operands are loaded transposed, head dim on partitions: q_blk.T [d, 128]
     (stationary) and k.T [d, keys] (moving, <= 512 keys per matmul = one PSUM bank).
     2-byte inputs are transposed by the DMA (``dma_transpose``); fp32 inputs go through the
     Tensor Engine (``nc_transpose`` into PSUM). Only the key blocks at or before the query
     block are computed (causality).
  2. The scores are evicted from PSUM by the Scalar Engine, scaled by 1/sqrt(d) on the way.
  3. Causal mask with ``affine_select``: keep score[p, j] where (query q0 + p) - key j >= 0,
     else a huge negative value (exp of it is 0).
  4. Row softmax: ``tensor_reduce`` (max, negated) -> ``activation_reduce`` (exp with the
     -max bias, row sums in the same pass) -> ``reciprocal``. The normalization is deferred
     to the [128, d] output block, which is cheaper than scaling [128, keys] probabilities.
  5. out_blk = probs @ v: per 128-key block, the probabilities are transposed on the Tensor
     Engine (keys onto partitions) and ``nc_matmul`` accumulates over the key blocks in one
     PSUM tile; the result is scaled by 1/row_sum and stored.
"""
# knit-run: --shape 512x128 --shape 512x128 --shape 512x128
import math

import numpy as np

import knit as nki
import knit.isa as nisa
import knit.language as nl

MASK_VALUE = -3.0e38  # finite in fp32 and bf16; exp(MASK_VALUE - max) is 0


def load_transposed(dst, src):
    """dst [d, 128] (SBUF) = src [128, d] (HBM) transposed, d <= 128."""
    rows, cols = src.shape
    if src.dtype in (nl.bfloat16, nl.float16):
        # The DMA engine transposes 2-byte dtypes on the fly.
        nisa.dma_transpose(dst=dst, src=src)
    else:
        # Otherwise: load, then transpose on the Tensor Engine through PSUM.
        tile = nl.ndarray((rows, cols), dtype=src.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=src)
        tile_t = nl.ndarray((cols, rows), dtype=src.dtype, buffer=nl.psum)
        nisa.nc_transpose(dst=tile_t, data=tile)
        nisa.tensor_copy(dst=dst, src=tile_t)


@nki.jit
def attention_kernel(q, k, v):
    """q, k, v: [seq, 128] in HBM, seq a multiple of 128. Returns the causal attention
    output [seq, 128] in q's dtype."""
    seq, d = q.shape
    assert k.shape == (seq, d) and v.shape == (seq, d)
    P = nl.tile_size.pmax  # 128 queries / keys per block
    assert d == P, "the head dim must be 128"
    assert seq % P == 0, "seq must be a multiple of 128"
    n_blocks = seq // P
    KV_CHUNK = nl.tile_size.gemm_moving_fmax  # 512 keys per score matmul
    softmax_scale = 1.0 / math.sqrt(d)

    out = nl.ndarray((seq, d), dtype=q.dtype, buffer=nl.shared_hbm)

    # k.T: head dim on partitions, all key positions along the free dim (loaded once).
    kT = nl.ndarray((d, seq), dtype=k.dtype, buffer=nl.sbuf)
    for j in nl.affine_range(n_blocks):
        load_transposed(kT[:, j * P:(j + 1) * P], k[j * P:(j + 1) * P, :])

    # v in its natural layout, one DMA: v_sb[p, j, :] = v[j * 128 + p, :] (keys on partitions).
    v_sb = nl.ndarray((P, n_blocks, d), dtype=v.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=v_sb, src=v.reshape((n_blocks, P, d)).permute((1, 0, 2)))

    for i in nl.affine_range(n_blocks):
        q0 = i * P  # first query of this block
        kv_len = q0 + P  # causal: keys 0 .. q0 + 127

        qT = nl.ndarray((d, P), dtype=q.dtype, buffer=nl.sbuf)
        load_transposed(qT, q[q0:q0 + P, :])

        # 1-2. scores[p, j] = (q[q0 + p] . k[j]) * softmax_scale, in chunks of <= 512 keys.
        scores = nl.ndarray((P, kv_len), dtype=nl.float32, buffer=nl.sbuf)
        for c in nl.affine_range((kv_len + KV_CHUNK - 1) // KV_CHUNK):
            c0 = c * KV_CHUNK
            width = min(KV_CHUNK, kv_len - c0)
            scores_psum = nl.ndarray((P, width), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=scores_psum, stationary=qT, moving=kT[:, c0:c0 + width])
            nisa.activation(dst=scores[:, c0:c0 + width], op=nl.copy, data=scores_psum, scale=softmax_scale)

        # 3. Causal mask: keep where q0 + p - j >= 0.
        masked = nl.ndarray((P, kv_len), dtype=nl.float32, buffer=nl.sbuf)
        nisa.affine_select(dst=masked, pattern=[[-1, kv_len]], channel_multiplier=1, on_true_tile=scores,
                           on_false_value=MASK_VALUE, cmp_op=nl.greater_equal, offset=q0)

        # 4. probs = exp(masked - rowmax) (unnormalized), row_sum = sum of probs per row.
        neg_max = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=masked, axis=1, negate=True)
        probs = nl.ndarray((P, kv_len), dtype=v.dtype, buffer=nl.sbuf)
        row_sum = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=probs, op=nl.exp, data=masked, reduce_op=nl.add, reduce_res=row_sum,
                               bias=neg_max)
        inv_sum = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv_sum, data=row_sum)

        # 5. out_blk = probs @ v, accumulated over the key blocks in PSUM.
        out_psum = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.psum)
        for j in nl.affine_range(i + 1):
            # probs[:, block j].T: keys onto partitions (the contraction dim of the matmul).
            pT_psum = nl.ndarray((P, P), dtype=probs.dtype, buffer=nl.psum)
            nisa.nc_transpose(dst=pT_psum, data=probs[:, j * P:(j + 1) * P])
            pT = nl.ndarray((P, P), dtype=probs.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=pT, src=pT_psum)
            nisa.nc_matmul(dst=out_psum, stationary=pT, moving=v_sb[:, j, :])

        # Normalize by the row sums while evicting PSUM -> SBUF, then store.
        out_sb = nl.ndarray((P, d), dtype=out.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=out_sb, data=out_psum, op0=nl.multiply, operand0=inv_sum)
        nisa.dma_copy(dst=out[q0:q0 + P, :], src=out_sb)

    return out


def reference(q, k, v):
    """NumPy reference in float64: causal softmax(q @ k.T / sqrt(d)) @ v."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    seq, d = q.shape
    s = q @ k.T / math.sqrt(d)
    s = np.where(np.tril(np.ones((seq, seq), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((512, 128)).astype(np.float32) for _ in range(3))
    out = attention_kernel(q, k, v)
    print("attention: max abs error", np.max(np.abs(out - reference(q, k, v))))
