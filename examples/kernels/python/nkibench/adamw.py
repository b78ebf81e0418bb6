"""NKIBench ``adamw`` (M10944 N2048, fp32): one AdamW step, returning the new parameters.

With lr = 0.01, weight decay 0.001 (lr * wd = 1e-5), beta1 = 0.9, beta2 = 0.999, eps = 1e-8 and
bias corrections folded into the constants as the original does (sqrt(1000 * v), i.e.
v / (1 - beta2) at step 1):

    m' = 0.9 m + 0.1 g,   v' = 0.999 v + 0.001 g^2
    out = theta - 1e-5 theta - 0.01 m' / (sqrt(1000 v') + 1e-8)

(m' and v' are computed but, as in the original, not written back.)

Algorithm of NKIBench's ``adamw_M10944_N2048_0`` (legacy ``neuronxcc.nki`` API, as the Neuron
compiler printed it), in our words: for each 128-row tile (the last one 10944 - 85 * 128 = 64
rows, masked in the original) and each 1024-wide column block, four DMAs load theta, m, v and g
as [128, 1024] tiles (4 KiB per partition); each 512-wide half then goes through fifteen
instructions: eight ``tensor_scalar`` multiplies / adds by constants and five ``tensor_tensor``
ops (engines left to the compiler), one ScalarE ``activation(sqrt, scale=1000, bias=zero
column)`` and one ``reciprocal``; one DMA stores the [128, 1024] result.

Deviations: the masked last row tile is a 64-partition tile here (the masked-off rows are not
loaded, computed or stored, as the mask asks); engines the original leaves to the compiler are
Knit's choice (the least-loaded eligible engine, docs/codegen.md "Engine assignment").
"""
import numpy as np
from _common import P

import knit as nki
import knit.isa as nisa
import knit.language as nl

LR, WD, BETA1, BETA2, EPS = 0.01, 0.001, 0.9, 0.999, 1e-8
SQRT_SCALE = 1000.0  # 1 / (1 - BETA2), as the original writes it


def _scaled(data, factor):
    """A new tile = data * factor (``tensor_scalar``)."""
    t = nl.ndarray(data.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=t, data=data, op0=nl.multiply, operand0=factor, reverse0=True)
    return t


def _combined(a, b, op):
    """A new tile = a op b (``tensor_tensor``)."""
    t = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=t, data1=a, data2=b, op=op)
    return t


def _update(dst, theta, m, v, g, zero):
    """dst = the AdamW update of theta from m, v, g: fifteen instructions, in the original's order."""
    decayed = _combined(theta, _scaled(theta, LR * WD), nl.subtract)
    m_new = _combined(_scaled(m, BETA1), _scaled(g, 1 - BETA1), nl.add)
    step = _scaled(m_new, LR)
    v_part = _scaled(v, BETA2)
    g2 = _combined(_scaled(g, 1 - BETA2), g, nl.multiply)
    v_new = _combined(v_part, g2, nl.add)
    root = nl.ndarray(theta.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=root, op=nl.sqrt, data=v_new, bias=zero[:theta.shape[0], :], scale=SQRT_SCALE)
    denom = nl.ndarray(theta.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=denom, data=root, op0=nl.add, operand0=EPS)
    inv = nl.ndarray(theta.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.reciprocal(dst=inv, data=denom)
    nisa.tensor_tensor(dst=dst, data1=decayed, data2=_combined(step, inv, nl.multiply), op=nl.subtract)


def _row_tile(out, tensors, zero, r0, rows, block_f, half_f):
    """One tile of `rows` rows from row r0: load, update each half of each column block, store."""
    N = out.shape[1]
    for cb in nl.affine_range(N // block_f):
        cols = nl.ds(cb * block_f, block_f)
        loaded = []
        for src in tensors:  # theta, m, v, g
            t = nl.ndarray((rows, block_f), dtype=src.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=src[nl.ds(r0, rows), cols])
            loaded.append(t)
        res = nl.ndarray((rows, block_f), dtype=out.dtype, buffer=nl.sbuf)
        for h in nl.affine_range(block_f // half_f):
            half = nl.ds(h * half_f, half_f)
            theta, m, v, g = (t[:, half] for t in loaded)
            _update(res[:, half], theta, m, v, g, zero)
        nisa.dma_copy(dst=out[nl.ds(r0, rows), cols], src=res)


@nki.jit
def adamw_kernel(theta, g, m, v, block_f=1024, half_f=512):
    """theta, g, m, v: [M, N] fp32 in HBM (the original's argument order), N a multiple of
    block_f. Returns theta after one AdamW step, [M, N]."""
    M, N = theta.shape
    assert N % block_f == 0 and block_f % half_f == 0, "adamw needs N a multiple of block_f, block_f of half_f"
    out = nl.ndarray((M, N), dtype=theta.dtype, buffer=nl.shared_hbm)
    zero = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=zero, value=0.0)
    tensors = (theta, m, v, g)  # the original loads them in this order
    for rt in nl.affine_range(M // P):
        _row_tile(out, tensors, zero, rt * P, P, block_f, half_f)
    if M % P:
        _row_tile(out, tensors, zero, M - M % P, M % P, block_f, half_f)
    return out


def reference(theta, g, m, v):
    """NumPy reference in float64."""
    theta, g, m, v = (np.asarray(t, dtype=np.float64) for t in (theta, g, m, v))
    m_new = BETA1 * m + (1 - BETA1) * g
    v_new = BETA2 * v + (1 - BETA2) * g * g
    return theta - LR * WD * theta - LR * m_new / (np.sqrt(SQRT_SCALE * v_new) + EPS)
