"""NKI behaviours that public kernels rely on, each reproduced in a small kernel of our own: tensors
passed by keyword, a returned reshape keeping its shape, out-of-range indices raising IndexError."""
import numpy as np
import pytest

import knit as nki
import knit.isa as nisa
import knit.language as nl
from knit import KnitIndexError, KnitRuntimeError


@nki.jit
def add_rows(a, b, scale=1.0):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    ta = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    tb = nl.ndarray(b.shape, b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a)
    nisa.dma_copy(dst=tb, src=b)
    nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
    nisa.tensor_scalar(dst=ta, data=ta, op0=nl.multiply, operand0=scale)
    nisa.dma_copy(dst=out, src=ta)
    return out


def inputs():
    rng = np.random.default_rng(0)
    return rng.standard_normal((128, 64)).astype(np.float32), rng.standard_normal((128, 64)).astype(np.float32)


def test_tensors_passed_by_keyword_are_kernel_parameters():
    a, b = inputs()
    want = a + b
    np.testing.assert_array_equal(add_rows(a=a, b=b), want)
    np.testing.assert_array_equal(add_rows(a, b=b), want)
    np.testing.assert_array_equal(add_rows(b=b, a=a), want)
    np.testing.assert_array_equal(nki.simulate(add_rows)(a=a, b=b), want)


def test_a_keyword_after_a_defaulted_parameter_keeps_its_meaning():
    a, b = inputs()
    np.testing.assert_array_equal(add_rows(a=a, b=b, scale=2.0), (a + b) * np.float32(2.0))
    np.testing.assert_array_equal(nki.compile(add_rows, a=a, b=b)(a=a, b=b), a + b)


def test_a_missing_or_unknown_argument_names_the_kernel():
    a, b = inputs()
    with pytest.raises(TypeError, match="add_rows"):
        add_rows(a=a)
    with pytest.raises(TypeError, match="add_rows"):
        add_rows(a=a, b=b, c=b)


@nki.jit
def copy_reshaped(x):
    n = x.shape[0] * x.shape[1] * x.shape[2]
    out = nl.ndarray((128, n // 128), x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((128, n // 128), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x.reshape((128, n // 128)))
    nisa.dma_copy(dst=out, src=t)
    return out.reshape(x.shape)


def test_a_returned_reshape_keeps_its_shape():
    x = np.arange(4 * 64 * 32, dtype=np.float32).reshape(4, 64, 32)
    got = copy_reshaped(x)
    assert got.shape == x.shape
    np.testing.assert_array_equal(got, x)


@nki.jit
def gather(table, idx):
    n = idx.shape[0]
    it = nl.ndarray((n, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=it, src=idx)
    out = nl.ndarray((n, table.shape[1]), table.dtype, buffer=nl.shared_hbm)
    rows = nl.ndarray((n, table.shape[1]), table.dtype, buffer=nl.sbuf)
    f = table.shape[1]
    nisa.dma_copy(dst=rows, src=table.ap([[f, n], [1, f]], offset=0, vector_offset=it, indirect_dim=0))
    nisa.dma_copy(dst=out, src=rows)
    return out


def test_an_out_of_range_indirect_row_is_an_index_error():
    table = np.arange(40, dtype=np.float32).reshape(10, 4)
    idx = np.array([[3], [10], [0], [1]], np.int32)
    with pytest.raises(IndexError, match="index 10") as info:
        gather(table, idx)
    assert isinstance(info.value, KnitRuntimeError) and isinstance(info.value, KnitIndexError)
    assert info.value.rule == "indirect-out-of-bounds"
    np.testing.assert_array_equal(gather(table, np.array([[3], [9], [0], [1]], np.int32)), table[[3, 9, 0, 1]])


def test_simulate_returns_a_kernel_a_grid_can_be_chosen_on():
    a, b = inputs()
    np.testing.assert_array_equal(nki.simulate(add_rows)[2](a, b), a + b)
    np.testing.assert_array_equal(nki.simulate(add_rows[2])(a=a, b=b), a + b)


def test_nki_dtype_is_the_dtype_type():
    def kernel(x: nki.dtype = nl.float32):
        return x

    assert isinstance(kernel(), nki.dtype)
