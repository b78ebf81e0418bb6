"""NKIBench ``swiglu`` (M4096 N3072 K1024, fp32): out = (silu(x @ w_gate) * (x @ w_up)) @ w_down.

x is [M, K], w_gate and w_up [K, N], w_down [N, K]; out is [M, K]. (The original's arguments
come in the order x, w_up, w_down, w_gate.)

Algorithm of NKIBench's ``swiglu_M4096_N3072_K1024_0`` (legacy ``neuronxcc.nki`` API, as the
Neuron compiler printed it), in our words. Everything is computed transposed, N on the
partitions, M along the free axis:

1. gate: for each N block of 1024, load w_gate's [K, 1024] strip (K / 128 DMAs of [128, 1024]);
   for each 512-row chunk of x, load its four [128, K] row tiles (4 KiB per partition) and
   transpose each [128, 128] piece on TensorE (transpose-mode ``nc_matmul`` against an identity,
   then a PSUM -> SBUF copy) into xT [128 (k), K / 128, 512 (m)]; then for each 128-wide N tile
   accumulate K / 128 matmuls (stationary w_gate [128 k, 128 n], moving xT [128 k, 512 m]) into a
   [128 n, 512 m] PSUM bank and copy it to SBUF: gT.
2. up, and the SiLU product: the same loops for w_up (x is loaded and transposed again); each
   [128 n, 512 m] result u stays in PSUM while five element-wise instructions compute
   h = silu(g) * u: ScalarE ``activation(exp, scale=-1)`` -> ``tensor_scalar(add 1)`` ->
   ``reciprocal`` -> ``multiply`` by g -> ``multiply`` by u (from PSUM); h is stored to a
   private HBM scratch tensor [N, M] (the original's ``_spill`` tensor: the compiler spilled it).
3. down: load all of w_down ([N, K] as N / 128 DMAs of [128, 1024], 96 KiB per partition); for
   each 512-row chunk of M reload the N / 128 h tiles [128 n, 512 m] from the scratch, then for
   each 128-row tile and 512-wide half of the output accumulate N / 128 matmuls (stationary
   hT [128 n, 128 m], moving w_down [128 n, 512]) and copy them to an output tile [128, 1024],
   stored with one DMA.

Deviation: the original keeps gT on chip from step 1 to step 2, but gT is [3072, 4096] fp32,
384 KiB per partition, twice SBUF (192 KiB on trn1): the Neuron compiler must have spilled it,
in a way the printed kernel does not show. Here gT goes to a second private HBM scratch tensor
in step 1 and each tile is reloaded in step 2 just before it is used (2 KiB per partition each
way). Element-wise instructions whose engine the original leaves to the compiler, and the PSUM
-> SBUF copies, go where Knit's engine assignment puts them (the least-loaded eligible engine;
PSUM copies on trn1 only VectorE).
"""
import numpy as np
from _common import P, load_identity, pe_transpose

import knit as nki
import knit.isa as nisa
import knit.language as nl


def _x_transposed(x, m0, m_chunk, ident):
    """xT [128 (k), K / 128, m_chunk] of x's rows m0 .. m0 + m_chunk - 1, one [128, K] row tile
    load and K / 128 TensorE transposes per 128 rows."""
    K = x.shape[1]
    k_tiles = K // P
    x_t = nl.ndarray((P, k_tiles, m_chunk), dtype=x.dtype, buffer=nl.sbuf)
    for ms in nl.affine_range(m_chunk // P):
        rows = nl.ndarray((P, K), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=rows, src=x[nl.ds(m0 + ms * P, P), :])
        for kt in nl.affine_range(k_tiles):
            pe_transpose(x_t[:, kt, nl.ds(ms * P, P)], rows[:, nl.ds(kt * P, P)], ident)
    return x_t


def _load_strip(w, k_tiles, n0, width):
    """w's [K, width] column strip from column n0, as K / 128 DMAs of [128, width]."""
    strip = nl.ndarray((P, k_tiles, width), dtype=w.dtype, buffer=nl.sbuf)
    for kt in nl.affine_range(k_tiles):
        nisa.dma_copy(dst=strip[:, kt, :], src=w[nl.ds(kt * P, P), nl.ds(n0, width)])
    return strip


def _projection_tile(acc, strip, x_t, n_off):
    """acc [128 n, m_chunk] = Σ_k strip[k, n_off + n] * xT[k, m]: one matmul per K tile."""
    for kt in nl.affine_range(strip.shape[1]):
        nisa.nc_matmul(dst=acc, stationary=strip[:, kt, nl.ds(n_off, P)], moving=x_t[:, kt, :])


def _silu_times(h, g, u, zero):
    """h = g * sigmoid(g) * u over [128, F] tiles, sigmoid as 1 / (1 + exp(-g))."""
    shape = g.shape
    e = nl.ndarray(shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=e, op=nl.exp, data=g, bias=zero, scale=-1.0)
    d = nl.ndarray(shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=d, data=e, op0=nl.add, operand0=1.0, reverse0=True)
    r = nl.ndarray(shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.reciprocal(dst=r, data=d)
    s = nl.ndarray(shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=s, data1=g, data2=r, op=nl.multiply)
    nisa.tensor_tensor(dst=h, data1=s, data2=u, op=nl.multiply)


@nki.jit
def swiglu_kernel(x, w_gate, w_up, w_down, block_n=1024, m_chunk=512, tile_o=512):
    """x: [M, K], w_gate / w_up: [K, N], w_down: [N, K] fp32 in HBM; M a multiple of m_chunk,
    K of 128 and tile_o, N of block_n. Returns (silu(x @ w_gate) * (x @ w_up)) @ w_down, [M, K]."""
    M, K = x.shape
    N = w_gate.shape[1]
    assert M % m_chunk == 0 and K % P == 0 and K % tile_o == 0 and N % block_n == 0, \
        "swiglu needs M a multiple of m_chunk, K of 128 and tile_o, N of block_n"
    k_tiles, n_tiles = K // P, N // P
    out = nl.ndarray((M, K), dtype=x.dtype, buffer=nl.shared_hbm)
    g_scratch = nl.ndarray((N, M), dtype=nl.float32, buffer=nl.hbm)  # gT, spilled (see docstring)
    h_scratch = nl.ndarray((N, M), dtype=nl.float32, buffer=nl.hbm)  # hT, the original's spill
    zero = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=zero, value=0.0)
    ident = load_identity()

    for nb in nl.affine_range(N // block_n):  # 1. gT = (x @ w_gate).T
        strip = _load_strip(w_gate, k_tiles, nb * block_n, block_n)
        for mc in nl.affine_range(M // m_chunk):
            x_t = _x_transposed(x, mc * m_chunk, m_chunk, ident)
            for ns in nl.affine_range(block_n // P):
                acc = nl.ndarray((P, m_chunk), dtype=nl.float32, buffer=nl.psum)
                _projection_tile(acc, strip, x_t, ns * P)
                g = nl.ndarray((P, m_chunk), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_copy(dst=g, src=acc)
                nisa.dma_copy(dst=g_scratch[nl.ds(nb * block_n + ns * P, P), nl.ds(mc * m_chunk, m_chunk)], src=g)

    for nb in nl.affine_range(N // block_n):  # 2. hT = silu(gT) * (x @ w_up).T
        strip = _load_strip(w_up, k_tiles, nb * block_n, block_n)
        for mc in nl.affine_range(M // m_chunk):
            x_t = _x_transposed(x, mc * m_chunk, m_chunk, ident)
            for ns in nl.affine_range(block_n // P):
                u = nl.ndarray((P, m_chunk), dtype=nl.float32, buffer=nl.psum)
                _projection_tile(u, strip, x_t, ns * P)
                rows, cols = nl.ds(nb * block_n + ns * P, P), nl.ds(mc * m_chunk, m_chunk)
                g = nl.ndarray((P, m_chunk), dtype=nl.float32, buffer=nl.sbuf)
                nisa.dma_copy(dst=g, src=g_scratch[rows, cols])
                h = nl.ndarray((P, m_chunk), dtype=nl.float32, buffer=nl.sbuf)
                _silu_times(h, g, u, zero)
                nisa.dma_copy(dst=h_scratch[rows, cols], src=h)

    w_d = _load_strip(w_down, n_tiles, 0, K)  # 3. out = h @ w_down: all of w_down stays on chip
    for mc in nl.affine_range(M // m_chunk):
        h_t = nl.ndarray((P, n_tiles, m_chunk), dtype=nl.float32, buffer=nl.sbuf)
        for nt_ in nl.affine_range(n_tiles):
            nisa.dma_copy(dst=h_t[:, nt_, :], src=h_scratch[nl.ds(nt_ * P, P), nl.ds(mc * m_chunk, m_chunk)])
        for ms in nl.affine_range(m_chunk // P):
            out_tile = nl.ndarray((P, K), dtype=x.dtype, buffer=nl.sbuf)
            for oh in nl.affine_range(K // tile_o):
                acc = nl.ndarray((P, tile_o), dtype=nl.float32, buffer=nl.psum)
                for nt_ in nl.affine_range(n_tiles):
                    nisa.nc_matmul(dst=acc, stationary=h_t[:, nt_, nl.ds(ms * P, P)],
                                   moving=w_d[:, nt_, nl.ds(oh * tile_o, tile_o)])
                nisa.tensor_copy(dst=out_tile[:, nl.ds(oh * tile_o, tile_o)], src=acc)
            nisa.dma_copy(dst=out[nl.ds(mc * m_chunk + ms * P, P), :], src=out_tile)
    return out


def reference(x, w_gate, w_up, w_down):
    """NumPy reference in float64."""
    x, w_gate, w_up, w_down = (np.asarray(t, dtype=np.float64) for t in (x, w_gate, w_up, w_down))
    g = x @ w_gate
    return (g / (1.0 + np.exp(-g)) * (x @ w_up)) @ w_down
