"""NKIBench ``transpose_matmul`` (M4096 K2048 N10944, fp32): out[M, N] = lhsT[K, M].T @ rhs[K, N].

Algorithm of NKIBench's ``transpose_matmul_M4096_K2048_N10944_0`` (legacy ``neuronxcc.nki``
API, as the Neuron compiler printed it), in our words. Both operands already have K first, so no
transposes are needed. The original reads lhsT and rhs as [128, K / 128, cols]: partition p
holds rows p * (K / 128) .. of the K axis (the same permutation of K on both sides, so the
product is unchanged); we read them the same way.

- outer loop over M blocks of ``block_m`` = 1024: load lhsT's [K, 1024] strip as K / 128 DMAs of
  [128, 1024] (4 KiB contiguous per partition);
- for each N block of ``block_n`` = 1024 (the last one 10944 - 10 * 1024 = 704 wide, masked in
  the original, a narrower slice here): load rhs's [K, width] strip as K / 128 DMAs;
- for each of the M block's 128-row tiles and each 512-wide half of the N block: accumulate
  K / 128 matmuls (stationary lhsT [128, 128], moving rhs [128, <=512]) in one PSUM bank, copy
  it to SBUF; then store the [128, width] output tile with one DMA.

Deviation: the original's masks become exact slices (the masked-off columns of the last block
are neither loaded, multiplied nor stored, which is what the masks ask for); PSUM -> SBUF copies
(``nl.copy``, engine left to the compiler) go where Knit puts them (on trn1 VectorE: ScalarE
copies only from trn2 on and GpSimd cannot read PSUM).
"""
import numpy as np
from _common import P

import knit as nki
import knit.isa as nisa
import knit.language as nl


@nki.jit
def transpose_matmul_kernel(lhsT, rhs, block_m=1024, block_n=1024, tile_n=512):
    """lhsT: [K, M], rhs: [K, N] fp32 in HBM; K a multiple of 128, M of block_m. Returns
    lhsT.T @ rhs, [M, N]."""
    K, M = lhsT.shape
    _, N = rhs.shape
    k_tiles = K // P
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    lhsT_v = lhsT.reshape(P, k_tiles, M)  # partition p: K rows p * k_tiles .. (as the original)
    rhs_v = rhs.reshape(P, k_tiles, N)
    for mb in nl.affine_range(M // block_m):
        l_strip = nl.ndarray((P, k_tiles, block_m), dtype=lhsT.dtype, buffer=nl.sbuf)
        for kt in nl.affine_range(k_tiles):
            nisa.dma_copy(dst=l_strip[:, kt, :], src=lhsT_v[:, kt, nl.ds(mb * block_m, block_m)])
        for nb in nl.affine_range((N + block_n - 1) // block_n):
            width = min(block_n, N - nb * block_n)  # the last block is narrower (a mask in the original)
            r_strip = nl.ndarray((P, k_tiles, width), dtype=rhs.dtype, buffer=nl.sbuf)
            for kt in nl.affine_range(k_tiles):
                nisa.dma_copy(dst=r_strip[:, kt, :], src=rhs_v[:, kt, nl.ds(nb * block_n, width)])
            for mt in nl.affine_range(block_m // P):
                out_tile = nl.ndarray((P, width), dtype=lhsT.dtype, buffer=nl.sbuf)
                for h in range((width + tile_n - 1) // tile_n):
                    cols = min(tile_n, width - h * tile_n)
                    acc = nl.ndarray((P, cols), dtype=nl.float32, buffer=nl.psum)
                    for kt in nl.affine_range(k_tiles):
                        nisa.nc_matmul(dst=acc, stationary=l_strip[:, kt, nl.ds(mt * P, P)],
                                       moving=r_strip[:, kt, nl.ds(h * tile_n, cols)])
                    nisa.tensor_copy(dst=out_tile[:, nl.ds(h * tile_n, cols)], src=acc)
                nisa.dma_copy(dst=out[nl.ds(mb * block_m + mt * P, P), nl.ds(nb * block_n, width)], src=out_tile)
    return out


def reference(lhsT, rhs):
    """NumPy reference in float64."""
    return np.asarray(lhsT, dtype=np.float64).T @ np.asarray(rhs, dtype=np.float64)
