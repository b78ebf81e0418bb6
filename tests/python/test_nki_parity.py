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


@nki.jit
def shuffle(x, mask, dst_partitions):
    f = x.shape[1]
    src = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=x)
    dst = nl.ndarray((dst_partitions, f), x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=dst, value=-1.0)
    nisa.nc_stream_shuffle(dst=dst, src=src, shuffle_mask=mask)
    out = nl.ndarray((dst_partitions, f), x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=dst)
    return out


@pytest.mark.parametrize("backend", ["reference", "jit-strict"])
def test_nc_stream_shuffle_broadcasts_one_partition_to_a_quadrant(backend, monkeypatch):
    monkeypatch.setenv("KNIT_BACKEND", backend)
    x = np.arange(64, dtype=np.float32).reshape(1, 64)
    np.testing.assert_array_equal(shuffle(x, [0] * 32, 32), np.broadcast_to(x, (32, 64)))
    mask = [0 if i % 2 else 255 for i in range(32)]  # odd partitions get row 0, even ones stay
    want = np.full((32, 64), -1.0, np.float32)
    want[1::2] = x
    np.testing.assert_array_equal(shuffle(x, mask, 32), want)


def test_a_shuffle_mask_naming_a_partition_src_lacks_is_an_error():
    x = np.zeros((1, 8), np.float32)
    with pytest.raises(nki.NkiValidationError, match=r"shuffle_mask\[0\] = 3 .* src spans 1 partitions"):
        shuffle(x, [3] * 32, 32)


def test_a_legacy_kernel_may_return_an_hbm_tensor():
    import knit.legacy as g1
    import knit.legacy.language as g1l

    @g1.jit
    def double(x):
        out = g1l.ndarray(x.shape, dtype=x.dtype, buffer=g1l.hbm)  # G1's output rule: HBM
        t = g1l.load(x)
        g1l.store(out, value=g1l.multiply(t, 2.0))
        return out

    x = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    np.testing.assert_array_equal(g1.simulate_kernel(double, x), 2 * x)


def test_a_kernel_may_return_a_parameter_it_wrote():
    @nki.jit
    def scale_in_place(x):
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=3.0)
        nisa.dma_copy(dst=x, src=t)
        return x

    x = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    want = 3 * x
    got = scale_in_place(x)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(x, want)  # written back in place, as on NKI


@pytest.mark.parametrize("backend", ["reference", "jit-strict"])
def test_select_reduce_takes_a_bool_predicate(backend, monkeypatch):
    monkeypatch.setenv("KNIT_BACKEND", backend)

    @nki.jit
    def select(x, keep):
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        k = nl.ndarray(keep.shape, nl.bool_, buffer=nl.sbuf)
        nisa.dma_copy(dst=k, src=keep)
        y = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.select_reduce(dst=y, predicate=k, on_true=t, on_false=-1.0)
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=y)
        return out

    rng = np.random.default_rng(3)
    x = rng.standard_normal((128, 32)).astype(np.float32)
    keep = rng.random((128, 32)) < 0.5
    np.testing.assert_array_equal(select(x, keep), np.where(keep, x, np.float32(-1.0)))


@pytest.mark.parametrize("backend", ["reference", "jit-strict"])
def test_dma_transpose_moves_fp32_on_the_default_dma_path(backend, monkeypatch):
    monkeypatch.setenv("KNIT_BACKEND", backend)

    @nki.jit
    def transpose(x):
        t = nl.ndarray((x.shape[1], x.shape[0]), x.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=t, src=x)
        out = nl.ndarray(t.shape, x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    x = np.arange(64 * 96, dtype=np.float32).reshape(64, 96)
    np.testing.assert_array_equal(transpose(x), x.T)


def test_dma_transpose_on_the_hardware_dge_keeps_the_two_byte_rule():
    @nki.jit
    def transpose(x):
        t = nl.ndarray((x.shape[1], x.shape[0]), x.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=t, src=x, dge_mode=nisa.dge_mode.hwdge)
        return None

    with pytest.raises(nki.NkiValidationError, match="2-byte dtypes only"):
        transpose(np.zeros((16, 32), np.float32))
