"""NKIBench ``lora`` (M4096 N12288 K5120 R128, fp32): out = x @ w + (x @ a) @ b.

x is [M, K], w [K, N], a [K, R], b [R, N] (R = 128); out is [M, N].

Algorithm of NKIBench's ``lora_M4096_N12288_K5120_R128_0`` (legacy ``neuronxcc.nki`` API, as the
Neuron compiler printed it), in our words. Everything is computed transposed (N or R on the
partitions, M along the free axis) and transposed back at the end:

1. Low-rank term. a is loaded once (K / 128 DMAs of [128, 128], 512 B per partition). For each
   half of M (2048 rows): for each 512-row chunk, load x's rows as [128, ``block_k`` = 1024] tiles
   (4 KiB per partition) and transpose every [128, 128] piece on TensorE (transpose-mode
   ``nc_matmul`` against an identity, then a PSUM -> SBUF copy) into xT [128 (k), K / 128, 512];
   accumulate K / 128 matmuls (stationary a [128 k, 128 r], moving xT [128 k, 512 m]) into
   (x a)T [128 r, 512 m], copied to SBUF. Then for each N block of 1024: load b's [128, 1024]
   strip and compute each [128 n, 512 m] tile of (x a b)T with one matmul (K = R = 128: stationary
   b [128 r, 128 n], moving (x a)T [128 r, 512 m]), copied out of PSUM.
2. Main term, per N block of 1024, with 64 fp32 accumulators [128 n, 512 m] in SBUF (128 KiB per
   partition, zeroed first): for each of 4 sequential K chunks of ``k_chunk`` = 1280 (10 K tiles):
   load w's [1280, 1024] strip (10 DMAs of [128, 1024]); for each 512-row chunk of M load x's
   rows as [128, 640] tiles (2.5 KiB per partition) and transpose them again into
   xT [128 k, 10, 512]; for each 128-wide N tile accumulate 10 matmuls (stationary w [128 k, 128 n],
   moving xT) in PSUM and add the PSUM bank into its SBUF accumulator (``nl.loop_reduce`` over
   the K chunk loop in the original: a ``tensor_tensor`` add).
3. For each [128 n, 512 m] accumulator: add the low-rank tile (``tensor_tensor``), transpose its
   four [128, 128] pieces back on TensorE (PSUM -> SBUF copy each) and store each as a [128, 128]
   tile of out (512 B per partition).

Deviations: (x a b)T is [N, M] fp32, 1.5 MiB per partition, eight times SBUF: the original keeps
it "on chip" from step 1 to step 3 and the Neuron compiler must have spilled it, in a way the
printed kernel does not show. Here each tile goes to a private HBM scratch tensor in step 1 and
is reloaded in step 3 (2 KiB per partition each way). ``nl.loop_reduce`` (not in Knit's current
API) is the ``tensor_tensor`` add it stands for; the accumulators' zero fill is a ``memset`` per
tile. Engines the original leaves to the compiler (``nl.add``, the PSUM -> SBUF copies) are
Knit's choice (the least-loaded eligible engine, docs/codegen.md "Engine assignment").
"""
import numpy as np
from _common import P, load_identity, pe_transpose

import knit as nki
import knit.isa as nisa
import knit.language as nl


def _low_rank(x, a, b, lr_scratch, ident, m_half, m_chunk, block_k, block_n):
    """Step 1: lr_scratch [N, M] = (x @ a @ b).T, one [128 n, m_chunk] tile at a time."""
    M, K = x.shape
    N = b.shape[1]
    k_tiles, per_block, chunks = K // P, block_k // P, m_half // m_chunk
    a_sb = nl.ndarray((P, k_tiles, P), dtype=a.dtype, buffer=nl.sbuf)
    for kt in nl.affine_range(k_tiles):
        nisa.dma_copy(dst=a_sb[:, kt, :], src=a[nl.ds(kt * P, P), :])
    for mh in nl.affine_range(M // m_half):
        xa_t = nl.ndarray((P, chunks, m_chunk), dtype=nl.float32, buffer=nl.sbuf)  # (x a)T [r, m]
        for mc in nl.affine_range(chunks):
            x_t = nl.ndarray((P, k_tiles, m_chunk), dtype=x.dtype, buffer=nl.sbuf)
            for kb in nl.affine_range(K // block_k):
                for ms in nl.affine_range(m_chunk // P):
                    rows = nl.ndarray((P, block_k), dtype=x.dtype, buffer=nl.sbuf)
                    m0 = mh * m_half + mc * m_chunk + ms * P
                    nisa.dma_copy(dst=rows, src=x[nl.ds(m0, P), nl.ds(kb * block_k, block_k)])
                    for j in nl.affine_range(per_block):
                        pe_transpose(x_t[:, kb * per_block + j, nl.ds(ms * P, P)], rows[:, nl.ds(j * P, P)], ident)
            acc = nl.ndarray((P, m_chunk), dtype=nl.float32, buffer=nl.psum)
            for kt in nl.affine_range(k_tiles):
                nisa.nc_matmul(dst=acc, stationary=a_sb[:, kt, :], moving=x_t[:, kt, :])
            nisa.tensor_copy(dst=xa_t[:, mc, :], src=acc)
        for nb in nl.affine_range(N // block_n):
            b_sb = nl.ndarray((P, block_n), dtype=b.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=b_sb, src=b[:, nl.ds(nb * block_n, block_n)])
            for mc in nl.affine_range(chunks):
                for ns in nl.affine_range(block_n // P):
                    res = nl.ndarray((P, m_chunk), dtype=nl.float32, buffer=nl.psum)
                    nisa.nc_matmul(dst=res, stationary=b_sb[:, nl.ds(ns * P, P)], moving=xa_t[:, mc, :])
                    t = nl.ndarray((P, m_chunk), dtype=nl.float32, buffer=nl.sbuf)
                    nisa.tensor_copy(dst=t, src=res)
                    nisa.dma_copy(dst=lr_scratch[nl.ds(nb * block_n + ns * P, P),
                                                 nl.ds(mh * m_half + mc * m_chunk, m_chunk)], src=t)


def _main_chunk(x, w, acc_sb, x_t, ident, nb, kc, block_n, x_piece):
    """Step 2 for one K chunk: acc_sb[:, ns, mc, :] += (x @ w)T tiles of N block nb, with x's
    rows transposed into x_t [128, k_chunk / 128, m_chunk]."""
    kt_chunk, m_chunk = x_t.shape[1], x_t.shape[2]
    k_chunk, per_piece = kt_chunk * P, x_piece // P
    w_sb = nl.ndarray((P, kt_chunk, block_n), dtype=w.dtype, buffer=nl.sbuf)
    for t in nl.affine_range(kt_chunk):
        nisa.dma_copy(dst=w_sb[:, t, :], src=w[nl.ds(kc * k_chunk + t * P, P), nl.ds(nb * block_n, block_n)])
    for mc in nl.affine_range(acc_sb.shape[2]):
        for kp in nl.affine_range(k_chunk // x_piece):
            for ms in nl.affine_range(m_chunk // P):
                rows = nl.ndarray((P, x_piece), dtype=x.dtype, buffer=nl.sbuf)
                k0 = kc * k_chunk + kp * x_piece
                nisa.dma_copy(dst=rows, src=x[nl.ds(mc * m_chunk + ms * P, P), nl.ds(k0, x_piece)])
                for j in nl.affine_range(per_piece):
                    pe_transpose(x_t[:, kp * per_piece + j, nl.ds(ms * P, P)], rows[:, nl.ds(j * P, P)], ident)
        for ns in nl.affine_range(block_n // P):
            acc = nl.ndarray((P, m_chunk), dtype=nl.float32, buffer=nl.psum)
            for t in nl.affine_range(kt_chunk):
                nisa.nc_matmul(dst=acc, stationary=w_sb[:, t, nl.ds(ns * P, P)], moving=x_t[:, t, :])
            nisa.tensor_tensor(dst=acc_sb[:, ns, mc, :], data1=acc_sb[:, ns, mc, :], data2=acc, op=nl.add)


def _finish_block(out, acc_sb, lr_scratch, ident, nb, m_chunk, block_n):
    """Step 3 for N block nb: add the low-rank tiles, transpose back, store [128, 128] tiles."""
    for mc in nl.affine_range(acc_sb.shape[2]):
        for ns in nl.affine_range(block_n // P):
            n0, m0 = nb * block_n + ns * P, mc * m_chunk
            lr = nl.ndarray((P, m_chunk), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=lr, src=lr_scratch[nl.ds(n0, P), nl.ds(m0, m_chunk)])
            s = nl.ndarray((P, m_chunk), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=s, data1=acc_sb[:, ns, mc, :], data2=lr, op=nl.add)
            for ms in nl.affine_range(m_chunk // P):
                o = nl.ndarray((P, P), dtype=out.dtype, buffer=nl.sbuf)
                pe_transpose(o, s[:, nl.ds(ms * P, P)], ident)
                nisa.dma_copy(dst=out[nl.ds(m0 + ms * P, P), nl.ds(n0, P)], src=o)


@nki.jit
def lora_kernel(x, w, a, b, block_k=1024, block_n=1024, m_half=2048, m_chunk=512, k_chunk=1280, x_piece=640):
    """x: [M, K], w: [K, N], a: [K, R=128], b: [R, N] fp32 in HBM; M a multiple of m_half, K of
    block_k and k_chunk, N of block_n. Returns x @ w + (x @ a) @ b, [M, N]."""
    M, K = x.shape
    N = w.shape[1]
    assert a.shape[1] == P and M % m_half == 0 and K % block_k == 0 and K % k_chunk == 0 and N % block_n == 0, \
        "lora needs R = 128, M a multiple of m_half, K of block_k and k_chunk, N of block_n"
    out = nl.ndarray((M, N), dtype=x.dtype, buffer=nl.shared_hbm)
    lr_scratch = nl.ndarray((N, M), dtype=nl.float32, buffer=nl.hbm)  # (x a b)T, spilled (see docstring)
    ident = load_identity()
    _low_rank(x, a, b, lr_scratch, ident, m_half, m_chunk, block_k, block_n)
    for nb in nl.affine_range(N // block_n):
        acc_sb = nl.ndarray((P, block_n // P, M // m_chunk, m_chunk), dtype=nl.float32, buffer=nl.sbuf)
        for ns in nl.affine_range(block_n // P):
            for mc in nl.affine_range(M // m_chunk):
                nisa.memset(dst=acc_sb[:, ns, mc, :], value=0.0)
        # One buffer for the transposed x rows, reused by every K chunk and row chunk: beside the
        # 128 KiB of accumulators and w's 40 KiB chunk, SBUF has room for no second copy.
        x_t = nl.ndarray((P, k_chunk // P, m_chunk), dtype=x.dtype, buffer=nl.sbuf)
        for kc in nl.sequential_range(K // k_chunk):
            _main_chunk(x, w, acc_sb, x_t, ident, nb, kc, block_n, x_piece)
        _finish_block(out, acc_sb, lr_scratch, ident, nb, m_chunk, block_n)
    return out


def reference(x, w, a, b):
    """NumPy reference in float64."""
    x, w, a, b = (np.asarray(t, dtype=np.float64) for t in (x, w, a, b))
    return x @ w + (x @ a) @ b
