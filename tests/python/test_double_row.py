"""nc_matmul(perf_mode=double_row): fp8 operands [K, 2, M] / [K, 2, N] contract over K * 2 rows
(trn2+), checked against a float64 NumPy product of the fp8-rounded inputs."""
import ml_dtypes
import numpy as np
import pytest

import knit as nki
import knit.isa as nisa
import knit.language as nl
from knit.errors import KnitError


@nki.jit
def double_row_matmul(a, b):
    k, _, m = a.shape
    n = b.shape[2]
    st = nl.ndarray((k, 2, m), a.dtype, buffer=nl.sbuf)
    mv = nl.ndarray((k, 2, n), b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=st, src=a)
    nisa.dma_copy(dst=mv, src=b)
    acc = nl.ndarray((m, n), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(acc, st, mv, perf_mode=nisa.matmul_perf_mode.double_row)
    res = nl.ndarray((m, n), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    out = nl.ndarray((m, n), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=res)
    return out


def test_double_row_contracts_over_both_rows():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 2, 64)).astype(ml_dtypes.float8_e4m3)
    b = rng.standard_normal((128, 2, 256)).astype(ml_dtypes.float8_e4m3)
    want = np.einsum("kjm,kjn->mn", a.astype(np.float64), b.astype(np.float64))
    got = double_row_matmul(a, b)
    # 256 exact fp8 products summed in fp32: |error| <= 256 * 2^-24 * sum|a||b|
    bound = 256 * 2.0 ** -24 * np.einsum("kjm,kjn->mn", np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    assert np.all(np.abs(got - want) <= bound + 1e-30)


def test_double_row_needs_gen3():
    a = np.zeros((128, 2, 64), ml_dtypes.float8_e4m3)
    b = np.zeros((128, 2, 128), ml_dtypes.float8_e4m3)
    with pytest.raises(KnitError, match="gen3"):
        double_row_matmul.compile(a, b, target="trn1")
