"""Tiled matrix multiplication in the legacy G1 style: ``out = lhsT.T @ rhs``.

``lhsT`` is [K, M] (the left operand already transposed: K on the partitions, as the Tensor
Engine wants its stationary operand), ``rhs`` is [K, N]. For every [128, 512] output block a
PSUM accumulator ``nl.zeros((nl.par_dim(128), 512), nl.float32, buffer=nl.psum)`` collects one
``nisa.nc_matmul`` per 128-deep K chunk with ``res_psum += nisa.nc_matmul(a, b)`` (fp32
accumulation in PSUM). Tiles are indexed with ``nl.mgrid`` expressions. The block is then copied
out of PSUM (casting to the output dtype) and stored.

Needs K a multiple of 128, M a multiple of 128 and N a multiple of 512.
"""
import numpy as np

import knit.legacy as nki
import knit.legacy.isa as nisa
import knit.legacy.language as nl


@nki.jit
def matmul_kernel(lhsT, rhs):
    K, M = lhsT.shape
    K2, N = rhs.shape
    assert K == K2, "contraction dims differ"
    TILE_K = nl.tile_size.pmax  # 128: partitions of both operands (the contraction)
    TILE_M = nl.tile_size.gemm_stationary_fmax  # 128: stationary free size (output partitions)
    TILE_N = nl.tile_size.gemm_moving_fmax  # 512: moving free size (one PSUM bank of fp32)
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)

    i_k, i_m = nl.mgrid[0:TILE_K, 0:TILE_M]
    i_kn, i_n = nl.mgrid[0:TILE_K, 0:TILE_N]
    i_p, i_f = nl.mgrid[0:TILE_M, 0:TILE_N]
    for m in nl.affine_range(M // TILE_M):
        for n in nl.affine_range(N // TILE_N):
            res_psum = nl.zeros((nl.par_dim(TILE_M), TILE_N), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                a_tile = nl.load(lhsT[k * TILE_K + i_k, m * TILE_M + i_m])
                b_tile = nl.load(rhs[k * TILE_K + i_kn, n * TILE_N + i_n])
                res_psum += nisa.nc_matmul(a_tile, b_tile)  # fp32 accumulation in PSUM
            res_sb = nl.copy(res_psum, dtype=result.dtype)
            nl.store(result[m * TILE_M + i_p, n * TILE_N + i_f], value=res_sb)
    return result


def reference(lhsT, rhs):
    """NumPy reference in float64."""
    return np.asarray(lhsT, dtype=np.float64).T @ np.asarray(rhs, dtype=np.float64)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    lhsT = rng.standard_normal((512, 256)).astype(np.float32)
    rhs = rng.standard_normal((512, 1024)).astype(np.float32)
    out = matmul_kernel(lhsT, rhs)
    print("legacy matmul: max abs error", np.max(np.abs(out - reference(lhsT, rhs))))
