"""NKIBench ``bmm`` (B16 M4096 K64 N4096, fp32): out[b] = a[b] @ w[b] for every batch b.

Algorithm of NKIBench's ``bmm_B16_M4096_K64_N4096_0`` (legacy ``neuronxcc.nki`` API, as the
Neuron compiler printed it), in our words. a is [B, M, K] with K = 64 innermost, so every
128-row piece of a must be transposed on chip to put K on the partitions:

- for each batch b and each N block of ``block_n`` = 1024: load w[b]'s [64, 1024] strip (one DMA,
  64 partitions of 4 KiB);
- for each M block of ``block_m`` = 1024 and each of its 8 row tiles: load a[b]'s [128, 64]
  tile (one DMA of 256 bytes per partition), transpose it on TensorE (``nc_matmul`` in transpose
  mode against an identity) into a [64, 128] PSUM tile and copy it into aT [64, 1024];
- for each row tile and each 512-wide half: one matmul (stationary aT [64, 128], moving the w
  strip's [64, 512]: K = 64, no accumulation) into PSUM, copied into a [128, 1024] SBUF tile;
  then one DMA stores it (4 KiB per partition).

So a is loaded in 256-byte rows and transposed again for every N block (N / 1024 times), and
every matmul uses half of the PE array's rows. Deviation: none in the work done; PSUM -> SBUF
copies (``nl.copy``, engine left to the compiler) go where Knit puts them (on trn1 VectorE:
ScalarE copies only from trn2 on and GpSimd cannot read PSUM).
"""
import numpy as np
from _common import P, load_identity, pe_transpose

import knit as nki
import knit.isa as nisa
import knit.language as nl


@nki.jit
def bmm_kernel(a, w, block_m=1024, block_n=1024, tile_n=512):
    """a: [B, M, K], w: [B, K, N] fp32 in HBM; K <= 128, M a multiple of block_m, N of block_n.
    Returns a @ w, [B, M, N]."""
    B, M, K = a.shape
    _, _, N = w.shape
    out = nl.ndarray((B, M, N), dtype=a.dtype, buffer=nl.shared_hbm)
    ident = load_identity()
    for bi in nl.affine_range(B):
        for nb in nl.affine_range(N // block_n):
            w_strip = nl.ndarray((K, block_n), dtype=w.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=w_strip, src=w[bi, :, nl.ds(nb * block_n, block_n)])
            for mb in nl.affine_range(M // block_m):
                a_t = nl.ndarray((K, block_m), dtype=a.dtype, buffer=nl.sbuf)  # [k, m]
                for mt in nl.affine_range(block_m // P):
                    a_tile = nl.ndarray((P, K), dtype=a.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=a_tile, src=a[bi, nl.ds(mb * block_m + mt * P, P), :])
                    pe_transpose(a_t[:, nl.ds(mt * P, P)], a_tile, ident)
                for mt in nl.affine_range(block_m // P):
                    out_tile = nl.ndarray((P, block_n), dtype=a.dtype, buffer=nl.sbuf)
                    for h in nl.affine_range(block_n // tile_n):
                        res = nl.ndarray((P, tile_n), dtype=nl.float32, buffer=nl.psum)
                        nisa.nc_matmul(dst=res, stationary=a_t[:, nl.ds(mt * P, P)],
                                       moving=w_strip[:, nl.ds(h * tile_n, tile_n)])
                        nisa.tensor_copy(dst=out_tile[:, nl.ds(h * tile_n, tile_n)], src=res)
                    nisa.dma_copy(dst=out[bi, nl.ds(mb * block_m + mt * P, P), nl.ds(nb * block_n, block_n)],
                                  src=out_tile)
    return out


def reference(a, w):
    """NumPy reference in float64."""
    return np.matmul(np.asarray(a, dtype=np.float64), np.asarray(w, dtype=np.float64))
