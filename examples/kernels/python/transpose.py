"""2-D transpose on the Tensor Engine: out[N, M] = x[M, N].T.

Views cannot move data across partitions, so a transpose goes through the Tensor Engine:
``nc_transpose`` reads a [128, 128] SBUF tile and writes its transpose to PSUM (it is a
matmul against the identity), ``tensor_copy`` evicts it to SBUF, and a DMA stores it at the
mirrored block position.
"""
# knit-run: --shape 256x384
import numpy as np

import knit as nki
import knit.isa as nisa
import knit.language as nl


@nki.jit
def transpose_kernel(x):
    """x: [M, N] in HBM, M and N multiples of 128 (or at most 128). Returns x.T, [N, M]."""
    M, N = x.shape
    TM, TN = min(M, nl.tile_size.pmax), min(N, nl.tile_size.pmax)
    assert M % TM == 0 and N % TN == 0

    out = nl.ndarray((N, M), dtype=x.dtype, buffer=nl.shared_hbm)

    for i in nl.affine_range(M // TM):
        for j in nl.affine_range(N // TN):
            # Block (i, j) of x: TM rows on partitions, TN columns along the free dim.
            in_tile = nl.ndarray((TM, TN), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=in_tile, src=x[i * TM:(i + 1) * TM, j * TN:(j + 1) * TN])

            # Tensor Engine transpose SBUF -> PSUM: the result keeps the input dtype.
            flipped = nl.ndarray((TN, TM), dtype=x.dtype, buffer=nl.psum)
            nisa.nc_transpose(dst=flipped, data=in_tile)

            # Evict PSUM -> SBUF (bit-exact copy, same dtype) and store as block (j, i).
            out_tile = nl.ndarray((TN, TM), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=out_tile, src=flipped)
            nisa.dma_copy(dst=out[j * TN:(j + 1) * TN, i * TM:(i + 1) * TM], src=out_tile)

    return out


def reference(x):
    """NumPy reference: the transpose (exact)."""
    return np.asarray(x).T


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 384)).astype(np.float32)
    out = transpose_kernel(x)
    print("transpose: max abs error", np.max(np.abs(out - reference(x))))
