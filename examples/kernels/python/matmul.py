"""Tiled matrix multiplication on the Tensor Engine: out[M, N] = lhsT[K, M].T @ rhs[K, N].

The Tensor Engine contracts over the partition dim, so the left operand is passed already
transposed (lhsT, [K, M]). Each [128, 512] output block gets a fresh PSUM tile; the matmuls
over K accumulate into it (``accumulate`` left at its default: the first matmul into a fresh
PSUM tile overwrites, the following ones add), then the fp32 block is evicted to SBUF with
``tensor_copy`` (rounding to the output dtype) and stored to HBM.
"""
# knit-run: --shape 512x256 --shape 512x1024
import numpy as np

import knit as nki
import knit.isa as nisa
import knit.language as nl


@nki.jit
def matmul_kernel(lhsT, rhs):
    """lhsT: [K, M], rhs: [K, N] in HBM; K and M multiples of 128, N a multiple of 512
    (or smaller than 512). Returns [M, N] in rhs's dtype."""
    K, M = lhsT.shape
    K_, N = rhs.shape
    assert K == K_, "lhsT and rhs must have the same contraction dimension"

    TILE_K = nl.tile_size.pmax  # 128: contraction per matmul (partitions)
    TILE_M = nl.tile_size.gemm_stationary_fmax  # 128: stationary free size
    TILE_N = min(N, nl.tile_size.gemm_moving_fmax)  # 512: moving free size (one PSUM bank of fp32)
    assert K % TILE_K == 0 and M % TILE_M == 0 and N % TILE_N == 0

    result = nl.ndarray((M, N), dtype=rhs.dtype, buffer=nl.shared_hbm)

    for m in nl.affine_range(M // TILE_M):
        for n in nl.affine_range(N // TILE_N):
            # Partial sums accumulate in fp32 in PSUM.
            res_psum = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)

            for k in nl.affine_range(K // TILE_K):
                lhsT_tile = nl.ndarray((TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
                rhs_tile = nl.ndarray((TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=lhsT_tile, src=lhsT[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
                nisa.dma_copy(dst=rhs_tile, src=rhs[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])

                # res_psum (+)= lhsT_tile.T @ rhs_tile
                nisa.nc_matmul(dst=res_psum, stationary=lhsT_tile, moving=rhs_tile)

            # Evict PSUM -> SBUF, casting to the output dtype, then store to HBM.
            res_sb = nl.ndarray((TILE_M, TILE_N), dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res_sb, src=res_psum)
            nisa.dma_copy(dst=result[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N], src=res_sb)

    return result


def reference(lhsT, rhs):
    """NumPy reference in float64: lhsT.T @ rhs."""
    return np.asarray(lhsT, dtype=np.float64).T @ np.asarray(rhs, dtype=np.float64)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    lhsT = rng.standard_normal((512, 256)).astype(np.float32)
    rhs = rng.standard_normal((512, 1024)).astype(np.float32)
    out = matmul_kernel(lhsT, rhs)
    print("matmul: max abs error", np.max(np.abs(out - reference(lhsT, rhs))))
