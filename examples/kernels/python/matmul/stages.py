"""The four stages of optimizing a large matmul on a NeuronCore, as calibration workloads.

out[M, N] = lhsT[K, M].T @ rhs[K, N], bf16 (or fp32) inputs, fp32 accumulation in PSUM. Each
stage keeps the same 128 x 128 x 512 matmul tiles (K x M x N per nc_matmul) and changes only
how much data is moved and how often:

1. ``tiled``: every matmul loads its own two operand tiles.
2. ``hoisted``: the lhsT column strip of an output row block is loaded once and reused across
   the N tiles; the rhs strip is loaded once per output tile instead of once per matmul.
3. ``blocked_mn``: output blocks of BLOCK_M x BLOCK_N tiles; each block loads its lhsT and rhs
   strips once, so every loaded byte feeds several matmuls.
4. ``blocked_mnk``: blocks over K too; partial sums of each output block accumulate in SBUF in
   fp32, so the operand blocks stay small and the output blocks can be large.

bench/calibration.py times them at [4096, 8192] @ [8192, 8192], the shape of the NKI matrix
multiplication tutorial's performance table and of "Introduction to NKI Kernel Optimization".
"""
import numpy as np

import knit as nki
import knit.isa as nisa
import knit.language as nl

TILE_K, TILE_M, TILE_N = 128, 128, 512


def _check(lhsT, rhs):
    K, M = lhsT.shape
    K_, N = rhs.shape
    assert K == K_ and K % TILE_K == 0 and M % TILE_M == 0 and N % TILE_N == 0, \
        "K and M must be multiples of 128 and N of 512, with lhsT [K, M] and rhs [K, N]"
    return K, M, N


def _evict_store(result, psum, m0, n0):
    """PSUM tile -> SBUF (rounded to the output dtype) -> HBM at result[m0:, n0:]."""
    sb = nl.ndarray((TILE_M, TILE_N), dtype=result.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=sb, src=psum)
    nisa.dma_copy(dst=result[m0:m0 + TILE_M, n0:n0 + TILE_N], src=sb)


@nki.jit
def tiled(lhsT, rhs):
    K, M, N = _check(lhsT, rhs)
    result = nl.ndarray((M, N), dtype=rhs.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        for n in nl.affine_range(N // TILE_N):
            psum = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                a = nl.ndarray((TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
                b = nl.ndarray((TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a, src=lhsT[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
                nisa.dma_copy(dst=b, src=rhs[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])
                nisa.nc_matmul(dst=psum, stationary=a, moving=b)
            _evict_store(result, psum, m * TILE_M, n * TILE_N)
    return result


def _load_strip(src, k_tiles, col0, width, k0=0):
    """Load src[k0*128 : (k0+k_tiles)*128, col0 : col0+width] as one SBUF tile
    [128, k_tiles, width] (partition = row inside a K tile)."""
    t = nl.ndarray((TILE_K, k_tiles, width), dtype=src.dtype, buffer=nl.sbuf)
    for k in nl.affine_range(k_tiles):
        row = (k0 + k) * TILE_K
        nisa.dma_copy(dst=t[:, k, :], src=src[row:row + TILE_K, col0:col0 + width])
    return t


@nki.jit
def hoisted(lhsT, rhs):
    K, M, N = _check(lhsT, rhs)
    KT = K // TILE_K
    result = nl.ndarray((M, N), dtype=rhs.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        a = _load_strip(lhsT, KT, m * TILE_M, TILE_M)
        for n in nl.affine_range(N // TILE_N):
            b = _load_strip(rhs, KT, n * TILE_N, TILE_N)
            psum = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(KT):
                nisa.nc_matmul(dst=psum, stationary=a[:, k, :], moving=b[:, k, :])
            _evict_store(result, psum, m * TILE_M, n * TILE_N)
    return result


@nki.jit
def blocked_mn(lhsT, rhs, tiles_m=4, tiles_n=1):
    K, M, N = _check(lhsT, rhs)
    KT = K // TILE_K
    BM, BN = tiles_m * TILE_M, tiles_n * TILE_N
    assert M % BM == 0 and N % BN == 0
    result = nl.ndarray((M, N), dtype=rhs.dtype, buffer=nl.shared_hbm)
    for bn in nl.affine_range(N // BN):
        b = _load_strip(rhs, KT, bn * BN, BN)
        for bm in nl.affine_range(M // BM):
            a = _load_strip(lhsT, KT, bm * BM, BM)
            for tm in nl.affine_range(tiles_m):
                for tn in nl.affine_range(tiles_n):
                    psum = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
                    for k in nl.affine_range(KT):
                        nisa.nc_matmul(dst=psum, stationary=a[:, k, tm * TILE_M:(tm + 1) * TILE_M],
                                       moving=b[:, k, tn * TILE_N:(tn + 1) * TILE_N])
                    _evict_store(result, psum, bm * BM + tm * TILE_M, bn * BN + tn * TILE_N)
    return result


@nki.jit
def blocked_mnk(lhsT, rhs, tiles_m=16, tiles_n=2, tiles_k=8):
    K, M, N = _check(lhsT, rhs)
    BM, BN, BK = tiles_m * TILE_M, tiles_n * TILE_N, tiles_k * TILE_K
    assert M % BM == 0 and N % BN == 0 and K % BK == 0
    result = nl.ndarray((M, N), dtype=rhs.dtype, buffer=nl.shared_hbm)
    for bn in nl.affine_range(N // BN):
        for bm in nl.affine_range(M // BM):
            # fp32 partial sums of the whole output block, in SBUF.
            acc = nl.ndarray((TILE_M, tiles_m, tiles_n, TILE_N), dtype=nl.float32, buffer=nl.sbuf)
            for bk in nl.sequential_range(K // BK):
                a = _load_strip(lhsT, tiles_k, bm * BM, BM, k0=bk * tiles_k)
                b = _load_strip(rhs, tiles_k, bn * BN, BN, k0=bk * tiles_k)
                for tm in nl.affine_range(tiles_m):
                    for tn in nl.affine_range(tiles_n):
                        psum = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
                        for k in nl.affine_range(tiles_k):
                            nisa.nc_matmul(dst=psum, stationary=a[:, k, tm * TILE_M:(tm + 1) * TILE_M],
                                           moving=b[:, k, tn * TILE_N:(tn + 1) * TILE_N])
                        if bk == 0:
                            nisa.tensor_copy(dst=acc[:, tm, tn, :], src=psum)
                        else:
                            nisa.tensor_tensor(dst=acc[:, tm, tn, :], data1=acc[:, tm, tn, :], data2=psum,
                                               op=nl.add)
            for tm in nl.affine_range(tiles_m):
                for tn in nl.affine_range(tiles_n):
                    sb = nl.ndarray((TILE_M, TILE_N), dtype=result.dtype, buffer=nl.sbuf)
                    nisa.tensor_copy(dst=sb, src=acc[:, tm, tn, :])
                    m0, n0 = bm * BM + tm * TILE_M, bn * BN + tn * TILE_N
                    nisa.dma_copy(dst=result[m0:m0 + TILE_M, n0:n0 + TILE_N], src=sb)
    return result


STAGES = {"tiled": tiled, "hoisted": hoisted, "blocked_mn": blocked_mn, "blocked_mnk": blocked_mnk}


def reference(lhsT, rhs):
    return np.asarray(lhsT, dtype=np.float64).T @ np.asarray(rhs, dtype=np.float64)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    lhsT = rng.standard_normal((1024, 512)).astype(np.float32)
    rhs = rng.standard_normal((1024, 1024)).astype(np.float32)
    for name, kernel in STAGES.items():
        kw = {"tiles_m": 4, "tiles_n": 1, "tiles_k": 4} if name == "blocked_mnk" else {}
        out = kernel(lhsT, rhs, **kw)
        print(f"{name}: max |error| = {np.abs(out - reference(lhsT, rhs)).max():.2e}")
