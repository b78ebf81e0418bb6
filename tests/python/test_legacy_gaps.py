"""The G1 facade's masks everywhere G1 takes them, operand masking, non-rectangular masks,
``nl.loop_reduce`` and ``nl.all_reduce``: every kernel is checked element by element against a
NumPy reference, including the elements a mask leaves out (zero in a fresh result, unchanged in
an existing tile)."""
import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes")

import knit.legacy as nki  # noqa: E402
import knit.legacy.isa as nisa  # noqa: E402
import knit.legacy.language as nl  # noqa: E402
from kernel_test_util import randn, source_line  # noqa: E402
from knit.errors import NkiValidationError  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)


def _line(marker):
    """Line number (in this file) of the first source line containing `marker`."""
    return source_line(__file__, marker)


_randn = randn


def _grid(p, f):
    return np.arange(p)[:, None], np.arange(f)[None, :]


# ---- mask= on the matmuls -------------------------------------------------------------------------
def test_nl_matmul_mask_bounds_result_rows_and_columns():
    @nki.jit
    def kernel(a, b):
        out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
        i_m, i_n = nl.mgrid[0:128, 0:256]
        r = nl.matmul(nl.load(a), nl.load(b), mask=(i_m < 100) & (i_n >= 16) & (i_n < 200))
        nl.store(out, r)
        return out

    a, b = _randn(128, 64), _randn(64, 256, seed=1)
    expected = np.zeros((128, 256), np.float32)
    expected[:100, 16:200] = (a @ b)[:100, 16:200]
    np.testing.assert_allclose(kernel(a, b), expected, rtol=1e-5, atol=1e-4)


def test_nc_matmul_mask_accumulates_only_the_masked_box():
    @nki.jit
    def kernel(a, b):
        out = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        i_m, i_n = nl.mgrid[0:64, 0:128]
        acc = nl.zeros((64, 128), nl.float32, buffer=nl.psum)
        for k in nl.affine_range(2):
            s = nl.load(a[k * 128 + nl.arange(128)[:, None], nl.arange(64)[None, :]])
            m = nl.load(b[k * 128 + nl.arange(128)[:, None], nl.arange(128)[None, :]])
            acc += nisa.nc_matmul(s, m, mask=(i_m < 32 + 16 * k) & (i_n < 100))  # the box grows with k
        nl.store(out, acc)
        return out

    a, b = _randn(256, 64), _randn(256, 128, seed=1)
    expected = np.zeros((64, 128), np.float32)
    expected[:32, :100] += (a[:128].T @ b[:128])[:32, :100]
    expected[:48, :100] += (a[128:].T @ b[128:])[:48, :100]
    np.testing.assert_allclose(kernel(a, b), expected, rtol=1e-5, atol=1e-4)


def test_operand_masking_of_matmul():
    # NKI's nl.matmul docs (G1): nl.matmul(x[i_lhs_f <= 64], y[i_rhs_f <= 256], ...); a partition bound on an
    # operand cuts the contraction.
    @nki.jit
    def kernel(x, y):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        out2 = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        i_lhs_p, i_lhs_f = nl.mgrid[0:128, 0:128]
        i_rhs_p, i_rhs_f = nl.mgrid[0:128, 0:512]
        xt, yt = nl.load(x), nl.load(y)
        nl.store(out, nl.matmul(xt[i_lhs_f <= 64], yt[i_rhs_f <= 256], transpose_x=True))
        nl.store(out2, nisa.nc_matmul(xt[i_lhs_p < 100], yt))
        return out, out2

    x, y = _randn(128, 128), _randn(128, 512, seed=1)
    out, out2 = kernel(x, y)
    expected = np.zeros((128, 512), np.float32)
    expected[:65, :257] = (x.T @ y)[:65, :257]
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(out2, x[:100].T @ y[:100], rtol=1e-5, atol=1e-4)


def test_operand_masking_of_untransposed_matmul_and_non_rectangular_operand_mask():
    @nki.jit
    def kernel(x, y):
        out = nl.ndarray((64, 96), dtype=nl.float32, buffer=nl.shared_hbm)
        i_m, i_k = nl.mgrid[0:64, 0:128]
        xt, yt = nl.load(x), nl.load(y)
        nl.store(out, nl.matmul(xt[(i_m < 50) & (i_k >= i_m)], yt))  # x is [M, K]: transposed inside
        return out

    x, y = _randn(64, 128), _randn(128, 96, seed=1)
    m, k = _grid(64, 128)
    xm = np.where((m < 50) & (k >= m), x, 0)
    np.testing.assert_allclose(kernel(x, y), xm @ y, rtol=1e-5, atol=1e-4)


def test_non_rectangular_matmul_mask_keeps_psum_accumulation():
    @nki.jit
    def kernel(a, b):
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        i_m, i_n = nl.mgrid[0:128, 0:128]
        acc = nl.zeros((128, 128), nl.float32, buffer=nl.psum)
        sa, sb = nl.load(a), nl.load(b)
        acc += nisa.nc_matmul(sa, sb, mask=(i_m >= i_n))  # causal: lower triangle only
        acc += nisa.nc_matmul(sa, sb, mask=(i_m < 8))
        nl.store(out, acc)
        return out

    a, b = _randn(128, 128), _randn(128, 128, seed=1)
    m, n = _grid(128, 128)
    prod = a.T @ b
    expected = np.where(m >= n, prod, 0) + np.where(m < 8, prod, 0)
    np.testing.assert_allclose(kernel(a, b), expected, rtol=1e-5, atol=1e-4)


# ---- transposes: the mask is over the input's index grid -----------------------------------------
def test_transposes_with_masks():
    @nki.jit
    def kernel(a, c):
        o1 = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        o2 = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        o3 = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        o4 = nl.ndarray((32, 16), dtype=c.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:64]
        t = nl.load(a)
        nl.store(o1, nl.transpose(t, mask=(i_p < 100) & (i_f >= 8)))
        nl.store(o2, nisa.nc_transpose(t, mask=(i_p >= i_f)))
        nl.store(o3, nl.load_transpose2d(a[i_p, i_f], mask=(i_p < 77)))
        j_p, j_f = nl.mgrid[0:16, 0:32]
        nl.store(o4, nisa.dma_transpose(nl.load(c), mask=(j_f < 20)))
        return o1, o2, o3, o4

    a = _randn(128, 64)
    c = _randn(16, 32, seed=1).astype(BF16)
    o1, o2, o3, o4 = kernel(a, c)
    p, f = _grid(128, 64)
    np.testing.assert_array_equal(o1, np.where((p < 100) & (f >= 8), a, 0).T)
    np.testing.assert_array_equal(o2, np.where(p >= f, a, 0).T)
    np.testing.assert_array_equal(o3, np.where(p < 77, a, 0).T)
    jp, jf = _grid(16, 32)
    np.testing.assert_array_equal(o4.astype(np.float32), np.where(jf < 20, c.astype(np.float32), 0).T)


# ---- nl.* calls ---------------------------------------------------------------------------------------
def _masked_softmax(x, keep):
    z = np.where(keep, x.astype(np.float64), -np.inf)
    with np.errstate(invalid="ignore"):  # rows with no masked element: NaN, dropped below
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return np.where(keep, e / e.sum(axis=1, keepdims=True), 0)


def test_softmax_with_rectangular_and_causal_masks():
    @nki.jit
    def kernel(a):
        o1 = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        o2 = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:128]
        t = nl.load(a)
        nl.store(o1, nl.softmax(t, axis=1, mask=(i_p < 90) & (i_f < 100)))
        nl.store(o2, nl.softmax(t, axis=1, mask=(i_f <= i_p)))
        return o1, o2

    a = _randn(128, 128) * 3
    o1, o2 = kernel(a)
    p, f = _grid(128, 128)
    np.testing.assert_allclose(o1, _masked_softmax(a, (p < 90) & (f < 100)), rtol=2e-5, atol=1e-7)
    np.testing.assert_allclose(o2, _masked_softmax(a, f <= p), rtol=2e-5, atol=1e-7)


def test_rms_norm_var_mean_with_masks():
    @nki.jit
    def kernel(a, w):
        o1 = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        o2 = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        o3 = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:96]
        t = nl.load(a)
        nl.store(o1, nl.rms_norm(t, w, axis=1, n=64, mask=(i_f < 64) & (i_p < 120)))
        nl.store(o2, nl.var(t, axis=1, mask=(i_f >= 32)))
        nl.store(o3, nl.mean(t, axis=1, mask=(i_f >= 32) & (i_p < 100)))
        return o1, o2, o3

    a, w = _randn(128, 96), _randn(1, 96, seed=1)
    o1, o2, o3 = kernel(a, w)
    x = a[:120, :64].astype(np.float64)
    expected = np.zeros_like(a)
    expected[:120, :64] = x / np.sqrt((x ** 2).sum(axis=1, keepdims=True) / 64 + 1e-6) * w[:, :64]
    np.testing.assert_allclose(o1, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(o2[:, 0], a[:, 32:].var(axis=1), rtol=1e-4)
    np.testing.assert_allclose(o3[:100, 0], a[:100, 32:].mean(axis=1), rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(o3[100:], 0)


def test_masked_reductions_leave_masked_off_elements_out():
    @nki.jit
    def kernel(a):
        o1 = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        o2 = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        o3 = nl.ndarray((1, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        o4 = nl.ndarray((1, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:64]
        t = nl.load(a)
        nl.store(o1, nl.sum(t, axis=1, keepdims=True, mask=(i_f <= i_p)))  # a triangle
        nl.store(o2, nisa.tensor_reduce(np.max, t, axis=1, keepdims=True, mask=(i_f != 5) & (i_f < 60)))
        nl.store(o3, nisa.tensor_partition_reduce(np.add, t, mask=(i_p < 100)))
        nl.store(o4, nisa.tensor_partition_reduce(np.maximum, t, mask=(i_p >= 2 * i_f)))
        return o1, o2, o3, o4

    a = _randn(128, 64)
    o1, o2, o3, o4 = kernel(a)
    p, f = _grid(128, 64)
    np.testing.assert_allclose(o1[:, 0], np.where(f <= p, a, 0).sum(axis=1), rtol=1e-5, atol=1e-5)
    keep = (f != 5) & (f < 60)
    np.testing.assert_array_equal(o2[:, 0], np.where(keep, a, -np.inf).max(axis=1))
    np.testing.assert_allclose(o3[0], a[:100].sum(axis=0), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(o4[0], np.where(p >= 2 * f, a, -np.inf).max(axis=0))


def test_gather_flattened_and_device_print_with_masks(capsys):
    @nki.jit
    def kernel(data, idx):
        out = nl.ndarray((128, 16), dtype=data.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:16]
        d, ix = nl.load(data), nl.load(idx)
        g = nl.gather_flattened(d, ix, mask=(i_f < i_p + 3))
        nl.store(out, g)
        j_p, j_f = nl.mgrid[0:2, 0:4]
        nl.device_print("masked", nl.copy(d[j_p, j_f]), mask=(j_f < 2))
        nl.device_print("tri", nl.copy(d[j_p, j_f]), mask=(j_f <= j_p))
        return out

    data = np.arange(128 * 32, dtype=np.float32).reshape(128, 32)
    idx = np.random.default_rng(0).integers(0, 32, (128, 16)).astype(np.uint32)
    idx[5, 10] = 4000  # out of range but masked off: never read
    p, f = _grid(128, 16)
    expected = np.where(f < p + 3, np.take_along_axis(data, idx.astype(np.int64) % 32, axis=1), 0)
    np.testing.assert_array_equal(kernel(data, idx), expected)
    printed = capsys.readouterr().out
    assert "masked: [[ 0.  1.]\n [32. 33.]]" in printed
    assert "tri: [[ 0.  0.  0.  0.]\n [32. 33.  0.  0.]]" in printed


# ---- nisa.* calls -------------------------------------------------------------------------------------
def test_iota_and_affine_select_with_masks():
    @nki.jit
    def kernel(a):
        o1 = nl.ndarray((128, 64), dtype=nl.int32, buffer=nl.shared_hbm)
        o2 = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:64]
        nl.store(o1, nisa.iota(1000 * i_p + 2 * i_f + 7, dtype=nl.int32, mask=(i_p >= 10) & (i_f < 50)))
        nl.store(o2, nisa.affine_select(i_p >= i_f, nl.load(a), -5.0, mask=(i_p < 120) & (i_f >= 3)))
        return o1, o2

    a = _randn(128, 64)
    o1, o2 = kernel(a)
    p, f = _grid(128, 64)
    np.testing.assert_array_equal(o1, np.where((p >= 10) & (f < 50), 1000 * p + 2 * f + 7, 0))
    box = (p < 120) & (f >= 3)
    np.testing.assert_array_equal(o2, np.where(box, np.where(p >= f, a, -5.0), 0))


def test_reducing_selects_and_scans_with_rectangular_masks():
    @nki.jit
    def kernel(a, b0, b1):
        o1 = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        r1 = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        o2 = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        r2 = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        o3 = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        o4 = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        r4 = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        o5 = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        r5 = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:64]
        box = (i_p < 100) & (i_f >= 8) & (i_f < 40)
        t = nl.load(a)
        pred = nl.greater(t, 0.0, dtype=nl.uint8)
        res1 = nl.zeros((128, 1), nl.float32)
        nl.store(o1, nisa.select_reduce(predicate=pred, on_true=t, on_false=-1.0, reduce_res=res1, reduce_op=np.max,
                                        mask=box))
        nl.store(r1, res1)
        res2 = nl.zeros((128, 1), nl.float32)
        nl.store(o2, nisa.range_select(on_true_tile=t, comp_op0=nl.greater_equal, comp_op1=nl.less,
                                       bound0=nl.load(b0), bound1=nl.load(b1), reduce_res=res2, mask=box))
        nl.store(r2, res2)
        ones = nl.full((128, 64), 1.0, nl.float32)
        nl.store(o3, nisa.tensor_tensor_scan(ones, t, 0.0, np.multiply, np.add, mask=box))  # cumsum
        res4 = nl.zeros((128, 1), nl.float32)
        nl.store(o4, nisa.tensor_scalar_reduce(data=t, op0=np.multiply, operand0=2.0, reduce_op=np.add,
                                               reduce_res=res4, mask=box))
        nl.store(r4, res4)
        res5 = nl.zeros((128, 1), nl.float32)
        nl.store(o5, nisa.activation_reduce(np.exp, t, reduce_op=np.add, reduce_res=res5, mask=box))
        nl.store(r5, res5)
        return o1, r1, o2, r2, o3, o4, r4, o5, r5

    a = _randn(128, 64)
    b0 = np.full((128, 1), 10.0, np.float32)
    b1 = np.full((128, 1), 30.0, np.float32)
    o1, r1, o2, r2, o3, o4, r4, o5, r5 = kernel(a, b0, b1)
    rows, cols = slice(0, 100), slice(8, 40)

    def boxed(v, fill=0.0):
        out = np.full((128, 64), fill, np.float32)
        out[rows, cols] = v[rows, cols]
        return out

    def col(v):
        out = np.zeros(128, np.float32)
        out[rows] = v
        return out

    sel = np.where(a > 0, a, -1.0)
    np.testing.assert_array_equal(o1, boxed(sel))
    np.testing.assert_array_equal(r1[:, 0], col(sel[rows, cols].max(axis=1)))
    idx = np.arange(64)[None, :]
    kept = np.where((idx >= 10) & (idx < 30), a, np.float32(-3.4028234663852886e38))  # whole-row index
    np.testing.assert_array_equal(o2, boxed(kept))
    np.testing.assert_array_equal(r2[:, 0], col(kept[rows, cols].max(axis=1)))
    scan = np.zeros((128, 64), np.float32)
    scan[rows, cols] = np.cumsum(a[rows, cols], axis=1)
    np.testing.assert_allclose(o3, scan, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(o4, boxed(2 * a))
    np.testing.assert_allclose(r4[:, 0], col((2 * a[rows, cols]).sum(axis=1)), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(o5, boxed(np.exp(a)), rtol=1e-6)
    np.testing.assert_allclose(r5[:, 0], col(np.exp(a[rows, cols]).sum(axis=1)), rtol=1e-5)


def test_max8_find_index8_and_gathers_with_masks():
    @nki.jit
    def kernel(a, idx32):
        o1 = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        o2 = nl.ndarray((128, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
        o4 = nl.ndarray((128, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:64]
        t = nl.load(a)
        top = nisa.max8(src=t, mask=(i_f >= 16) & (i_p < 120))
        nl.store(o1, top)
        nl.store(o2, nisa.nc_find_index8(data=t, vals=nl.load(a[i_p, i_f][:, 0:8]), mask=(i_f >= 1)))
        k_p, k_f = nl.mgrid[0:128, 0:16]
        nl.store(o4, nisa.nc_n_gather(t, nl.load(idx32), mask=(k_p < 64) & (k_f > 1)))
        return o1, o2, o4

    a = np.random.default_rng(0).permutation(128 * 64).reshape(128, 64).astype(np.float32)
    idx32 = np.random.default_rng(2).integers(0, 64, (128, 16)).astype(np.uint32)
    o1, o2, o4 = kernel(a, idx32)
    top = -np.sort(-a[:, 16:], axis=1)[:, :8]
    top[120:] = 0
    np.testing.assert_array_equal(o1, top)
    # the first 8 values of each row: value 0 is outside the mask (not found), the others at 1..7
    np.testing.assert_array_equal(o2[:, 0], np.uint32(0xFFFFFFFF))
    np.testing.assert_array_equal(o2[:, 1:], np.broadcast_to(np.arange(1, 8, dtype=np.uint32), (128, 7)))
    p, f = _grid(128, 16)
    g = np.take_along_axis(a, idx32.astype(np.int64), axis=1)
    np.testing.assert_array_equal(o4, np.where((p < 64) & (f > 1), g, 0))


def test_local_gather_mask_matches_the_unmasked_result():
    @nki.jit
    def kernel(a, idx16):
        full = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        part = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        j_p, j_f = nl.mgrid[0:128, 0:4]
        t, ix = nl.load(a), nl.load(idx16)
        nl.store(full, nisa.local_gather(t, ix, num_elem_per_idx=1, num_valid_indices=4))
        nl.store(part, nisa.local_gather(t, ix, num_elem_per_idx=1, num_valid_indices=4, mask=(j_f + 60 <= j_p)))
        return full, part

    a = _randn(128, 64)
    idx16 = np.random.default_rng(1).integers(0, 16, (128, 1)).astype(np.uint16)
    full, part = kernel(a, idx16)
    p, f = _grid(128, 4)
    assert np.all(np.isfinite(full))
    np.testing.assert_array_equal(part, np.where(f + 60 <= p, full, 0))


# ---- non-rectangular masks on element-wise calls, loads and stores ------------------------------------
def test_non_rectangular_masks_on_loads_stores_and_element_wise_calls():
    @nki.jit
    def kernel(a, b):
        o1 = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        o2 = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        o3 = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:96]
        t = nl.load(a[i_p, i_f], mask=(i_p >= i_f))  # lower triangle, zeros elsewhere
        nl.store(o1, t)
        nl.store(o2, nl.load(b))
        nl.store(o2[i_p, i_f], nl.exp(t), mask=(i_f > i_p + 10))
        y = nl.load(b)
        y[i_p, i_f] = nl.add(t, 100.0, mask=(i_p != i_f) & (i_p < 64))  # written only there
        nl.store(o3, y)
        return o1, o2, o3

    a, b = _randn(128, 96), _randn(128, 96, seed=1)
    o1, o2, o3 = kernel(a, b)
    p, f = _grid(128, 96)
    tri = np.where(p >= f, a, 0)
    np.testing.assert_array_equal(o1, tri)
    np.testing.assert_allclose(o2, np.where(f > p + 10, np.exp(tri), b), rtol=1e-6)
    keep = (p != f) & (p < 64)
    # y[...] = result writes y directly: its masked-off elements keep their values
    np.testing.assert_allclose(o3, np.where(keep, tri + 100, b), rtol=1e-6)


def test_non_rectangular_masks_keep_existing_tile_elements():
    @nki.jit
    def kernel(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:64, 0:64]
        x = nl.load(a)
        y = nl.load(b)
        nisa.tensor_copy_predicated(src=x, dst=y, predicate=nl.greater(x, 0.0, dtype=nl.uint8),
                                    mask=(i_p + i_f < 64))
        nisa.dma_copy(dst=out, src=y)
        nisa.dma_copy(dst=out[i_p, i_f], src=x, mask=(i_p == i_f + 1))
        return out

    a, b = _randn(64, 64), _randn(64, 64, seed=1)
    p, f = _grid(64, 64)
    expected = np.where((p + f < 64) & (a > 0), a, b)
    expected = np.where(p == f + 1, a, expected)
    np.testing.assert_array_equal(kernel(a, b), expected)


def test_where_and_isa_element_wise_calls_with_a_triangular_mask():
    @nki.jit
    def kernel(a, b):
        o1 = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        o2 = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        o3 = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:128]
        x, y = nl.load(a), nl.load(b)
        causal = i_f <= i_p
        nl.store(o1, nl.where(nl.greater(x, y), x, y, mask=causal))
        nl.store(o2, nisa.tensor_tensor(x, y, np.multiply, mask=causal))
        nl.store(o3, nisa.activation(nl.exp, x, bias=None, scale=2.0, mask=causal & (i_p < 100)))
        return o1, o2, o3

    a, b = _randn(128, 128), _randn(128, 128, seed=1)
    o1, o2, o3 = kernel(a, b)
    p, f = _grid(128, 128)
    np.testing.assert_array_equal(o1, np.where(f <= p, np.maximum(a, b), 0))
    np.testing.assert_array_equal(o2, np.where(f <= p, a * b, 0))
    np.testing.assert_allclose(o3, np.where((f <= p) & (p < 100), np.exp(2 * a), 0), rtol=1e-6)


def test_operand_masking_of_element_wise_calls():
    @nki.jit
    def kernel(a, b):
        o1 = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        o2 = nl.ndarray((128, 1), dtype=a.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:64]
        x, y = nl.load(a), nl.load(b)
        nl.store(o1, nl.multiply(x[i_f < 32], y))
        nl.store(o2, nl.max(x[i_f >= 10], axis=1, keepdims=True))
        return o1, o2

    a, b = _randn(128, 64), _randn(128, 64, seed=1)
    o1, o2 = kernel(a, b)
    f = np.arange(64)[None, :]
    np.testing.assert_array_equal(o1, np.where(f < 32, a * b, 0))
    np.testing.assert_array_equal(o2[:, 0], a[:, 10:].max(axis=1))


# ---- loop_reduce / all_reduce ---------------------------------------------------------------------
def test_loop_reduce_reduces_into_the_assigned_tile():
    @nki.jit
    def kernel(a):
        o1 = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        o2 = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        o3 = nl.ndarray((2, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:64]
        b = nl.zeros((128, 64), dtype=nl.float32)
        for k in nl.affine_range(4):
            t = nl.load(a[k])
            b = nl.loop_reduce(t, op=np.maximum, loop_indices=[k], dtype=nl.float32)  # max with the zeros
        nl.store(o1, b)
        for k in nl.affine_range(4):
            c = nl.loop_reduce(nl.load(a[k]), np.add, k, mask=(i_f < 32))  # c unbound at k = 0: starts as a[0]
        nl.store(o2, c)
        acc = nl.zeros((2, nl.par_dim(128), 64), dtype=nl.float32)
        for j in nl.affine_range(2):
            for k in nl.sequential_range(4):
                acc[j] = nl.loop_reduce(nl.load(a[k]) * (j + 1), np.add, loop_indices=(k,))
            nl.store(o3[j], acc[j])
        return o1, o2, o3

    a = _randn(4, 128, 64)
    o1, o2, o3 = kernel(a)
    np.testing.assert_array_equal(o1, np.maximum(a.max(axis=0), 0))
    f = np.arange(64)[None, :]
    np.testing.assert_allclose(o2, np.where(f < 32, a.sum(axis=0), 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(o3, np.stack([a.sum(axis=0), 2 * a.sum(axis=0)]), rtol=1e-5, atol=1e-5)


def test_loop_reduce_must_be_assigned():
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        for k in nl.affine_range(2):
            nl.store(out, nl.loop_reduce(nl.load(a), np.add, [k]))  # LOOP-REDUCE-UNASSIGNED
        return out

    with pytest.raises(NkiValidationError) as e:
        kernel(np.zeros((128, 64), np.float32))
    assert e.value.line == _line("# LOOP-REDUCE-UNASSIGNED") and "b = nl.loop_reduce" in str(e.value)


def test_all_reduce_on_one_instance_and_rejected_across_a_grid():
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.all_reduce(nl.load(a), np.add, program_axes=[0]))  # ALL-REDUCE
        return out

    a = _randn(128, 64)
    np.testing.assert_array_equal(kernel(a), a)
    with pytest.raises(NkiValidationError) as e:
        kernel[2](a)
    assert e.value.line == _line("# ALL-REDUCE") and "one after another" in str(e.value)


# ---- what stays rejected ----------------------------------------------------------------------------
@pytest.mark.parametrize("call", ["scan", "activation_reduce", "var", "bn_stats"])
def test_non_rectangular_mask_rejected_where_a_reduction_would_see_the_box(call):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:64]
        t = nl.load(a)
        tri = i_f <= i_p
        if call == "scan":
            r = nisa.tensor_tensor_scan(t, t, 0.0, np.multiply, np.add, mask=tri)  # REJECTED
        elif call == "activation_reduce":
            res = nl.zeros((128, 1), nl.float32)
            r = nisa.activation_reduce(np.exp, t, reduce_op=np.add, reduce_res=res, mask=tri)  # REJECTED
        elif call == "var":
            r = nl.var(t, axis=1, mask=tri)  # REJECTED
        else:
            r = nisa.bn_stats(t, mask=tri)  # REJECTED
        nl.store(out, r)
        return out

    with pytest.raises(NkiValidationError) as e:
        kernel(np.zeros((128, 64), np.float32))
    assert e.value.rule == "unsupported" and "non-rectangular" in str(e.value)
    assert e.value.line in [i for i, text in enumerate(open(__file__), 1) if "# REJECTED" in text]


def test_operand_mask_rejected_where_the_grids_differ():
    @nki.jit
    def kernel(a):
        out = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:64]
        nl.store(out, nl.transpose(nl.load(a)[i_f < 3]))  # OPERAND-MASK-TRANSPOSE
        return out

    with pytest.raises(NkiValidationError) as e:
        kernel(np.zeros((128, 64), np.float32))
    assert e.value.line == _line("# OPERAND-MASK-TRANSPOSE") and "pass mask= here instead" in str(e.value)


def test_disjunctive_masks_stay_rejected():
    i_p, i_f = nl.mgrid[0:128, 0:64]
    with pytest.raises(TypeError, match="conjunctions"):
        (i_p < 3) | (i_f < 2)
