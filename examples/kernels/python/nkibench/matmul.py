"""NKIBench ``matmul`` (M4096 N12288 K5120, fp32): out[M, N] = a[M, K] @ b[K, N].

Algorithm of NKIBench's ``matmul_M4096_N12288_K5120_0`` (legacy ``neuronxcc.nki`` API, as the
Neuron compiler printed it), in our words. ``a`` arrives row-major, so its K axis must be moved
onto the partitions on chip:

- outer loop over N blocks of ``block_n`` = 1024 columns: load the whole [K, 1024] strip of b as
  K / 128 DMAs of [128, 1024] (4 KiB per partition), kept for the block;
- for each 128-row tile of a: load it as K / ``block_k`` DMAs of [128, ``block_k`` = 1024] (4 KiB
  contiguous per partition); transpose each [128, 128] piece on TensorE (``nc_matmul`` in
  transpose mode against an identity loaded once from a shared constant) into PSUM and copy it
  to SBUF, giving aT [128 (k), K / 128, 128 (m)];
- for each 512-wide half of the N block: accumulate K / 128 matmuls (stationary aT [128, 128],
  moving the b strip's [128, 512]) into one PSUM bank, copy it to SBUF; then store the
  [128, 1024] output tile with one DMA.

So a is loaded and transposed again for every N block (N / 1024 times). Deviation: none in the
work done; PSUM -> SBUF copies (``nl.copy`` in the original, engine left to the compiler) go
where Knit's engine assignment puts them (on trn1 VectorE: ScalarE copies only from trn2 on and
GpSimd cannot read PSUM).
"""
import numpy as np
from _common import P, load_identity, pe_transpose

import knit as nki
import knit.isa as nisa
import knit.language as nl


@nki.jit
def matmul_kernel(a, b, block_n=1024, block_k=1024, tile_n=512):
    """a: [M, K], b: [K, N] fp32 in HBM; M, K multiples of 128 and block_k, N of block_n.
    Returns a @ b, [M, N]."""
    M, K = a.shape
    _, N = b.shape
    k_tiles = K // P
    per_block = block_k // P
    out = nl.ndarray((M, N), dtype=a.dtype, buffer=nl.shared_hbm)
    ident = load_identity()
    for nb in nl.affine_range(N // block_n):
        b_strip = nl.ndarray((P, k_tiles, block_n), dtype=b.dtype, buffer=nl.sbuf)
        for kt in nl.affine_range(k_tiles):
            nisa.dma_copy(dst=b_strip[:, kt, :], src=b[nl.ds(kt * P, P), nl.ds(nb * block_n, block_n)])
        for mt in nl.affine_range(M // P):
            a_t = nl.ndarray((P, k_tiles, P), dtype=a.dtype, buffer=nl.sbuf)  # [k, k tile, m]
            for kb in nl.affine_range(K // block_k):
                a_tile = nl.ndarray((P, block_k), dtype=a.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a_tile, src=a[nl.ds(mt * P, P), nl.ds(kb * block_k, block_k)])
                for j in nl.affine_range(per_block):
                    pe_transpose(a_t[:, kb * per_block + j, :], a_tile[:, nl.ds(j * P, P)], ident)
            out_tile = nl.ndarray((P, block_n), dtype=a.dtype, buffer=nl.sbuf)
            for h in nl.affine_range(block_n // tile_n):
                acc = nl.ndarray((P, tile_n), dtype=nl.float32, buffer=nl.psum)
                for kt in nl.affine_range(k_tiles):
                    nisa.nc_matmul(dst=acc, stationary=a_t[:, kt, :], moving=b_strip[:, kt, nl.ds(h * tile_n, tile_n)])
                nisa.tensor_copy(dst=out_tile[:, nl.ds(h * tile_n, tile_n)], src=acc)
            nisa.dma_copy(dst=out[nl.ds(mt * P, P), nl.ds(nb * block_n, block_n)], src=out_tile)
    return out


def reference(a, b):
    """NumPy reference in float64."""
    return np.asarray(a, dtype=np.float64) @ np.asarray(b, dtype=np.float64)
