"""Helpers shared by the NKIBench kernels: the identity for TensorE transposes, a PE transpose
evicted to SBUF, and a PSUM -> SBUF copy."""
import numpy as np

import knit.isa as nisa
import knit.language as nl

P = 128  # partitions, the side of a TensorE transpose


def load_identity(dtype=nl.float32):
    """The [128, 128] identity in SBUF, loaded from a shared constant as the originals do: the
    moving operand of every ``nc_matmul(..., is_transpose=True)``."""
    ident_hbm = nl.shared_constant(np.identity(P, dtype=np.float32))
    ident = nl.ndarray((P, P), dtype=dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ident, src=ident_hbm)
    return ident


def pe_transpose(dst, data, ident):
    """dst (SBUF, [F, p]) = data ([p, F] in SBUF) transposed: one TensorE transpose-mode matmul
    into PSUM (stationary = data, moving = identity, as the originals write it), then a copy out
    of PSUM (engine left to the compiler)."""
    rows, cols = data.shape
    t_psum = nl.ndarray((cols, rows), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=t_psum, stationary=data, moving=ident[:rows, :rows], is_moving_onezero=True,
                   is_transpose=True)
    nisa.tensor_copy(dst=dst, src=t_psum)
