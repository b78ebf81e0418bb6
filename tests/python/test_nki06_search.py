"""The NKI 0.6 search and index instructions: nc_match_replace8 (0.6 reverse slot order, against
nc_find_index8's forward one), nonzero_with_count (trn2+), sequence_bounds and topk. Each against
the additions reference's worked example and an independent NumPy model, on the reference and
native backends (the same bytes, the native path running every instruction), and their rules."""
import numpy as np
import pytest

import knit
import knit as nki
import knit.isa as nisa
import knit.language as nl
from nki06_support import BF16, run_both, sbuf, to_hbm

ALL_ONES = {np.uint32: 0xFFFFFFFF, np.uint16: 0xFFFF}


# ---- nc_match_replace8 --------------------------------------------------------------------------

def match_replace8_model(data, vals, imm):
    """Slots 7..0 each claim the first unclaimed position holding their value (IEEE ==)."""
    p_count = data.shape[0]
    flat = data.reshape(p_count, -1).astype(np.float32)
    out = flat.copy()
    idx = np.full((p_count, 8), -1, np.int64)
    for p in range(p_count):
        claimed = set()
        for i in range(7, -1, -1):
            for j in range(flat.shape[1]):
                if j not in claimed and flat[p, j] == np.float32(vals[p, i]):
                    claimed.add(j)
                    idx[p, i] = j
                    out[p, j] = imm
                    break
    return out.reshape(data.shape), idx


def find_index8_model(data, vals):
    """nc_find_index8: slots 0..7, each the next unclaimed occurrence."""
    idx = np.full((data.shape[0], 8), -1, np.int64)
    for p in range(data.shape[0]):
        claimed = set()
        for i in range(8):
            for j in range(data.shape[1]):
                if j not in claimed and data[p, j] == vals[p, i]:
                    claimed.add(j)
                    idx[p, i] = j
                    break
    return idx


@nki.jit(platform_target="trn3")
def match_replace(data, vals, imm, idx_dtype, in_place):
    d = sbuf(data)
    v = sbuf(vals)
    dst = d if in_place else nl.ndarray(data.shape, data.dtype, buffer=nl.sbuf)
    if idx_dtype is None:
        nisa.nc_match_replace8(dst=dst, data=d, vals=v, imm=imm)
        return to_hbm(dst)
    idx = nl.ndarray((data.shape[0], 8), idx_dtype, buffer=nl.sbuf)
    nisa.nc_match_replace8(dst=dst, data=d, vals=v, imm=imm, dst_idx=idx)
    return to_hbm(dst), to_hbm(idx)


@nki.jit(platform_target="trn3")
def find_index(data, vals):
    d = sbuf(data)
    v = sbuf(vals)
    idx = nl.ndarray((data.shape[0], 8), nl.uint32, buffer=nl.sbuf)
    nisa.nc_find_index8(dst=idx, data=d, vals=v)
    return to_hbm(idx)


def expected_idx(model_idx, dtype):
    return np.where(model_idx < 0, ALL_ONES[dtype], model_idx).astype(dtype)


def test_match_replace8_worked_example_and_find_index8_contrast(monkeypatch):
    data = np.array([[5, 1, 5, 3, 9, 5, 2, 7, 4, 5]], np.float32)
    vals = np.array([[9, 7, 5, 5, 4, 3, 2, 5]], np.float32)
    dst, idx = run_both(monkeypatch, match_replace, data, vals, 0.0, nl.uint32, False)
    np.testing.assert_array_equal(idx, [[4, 7, 5, 2, 8, 3, 6, 0]])
    np.testing.assert_array_equal(dst, [[0, 1, 0, 0, 0, 0, 0, 0, 0, 5]])
    (forward,) = run_both(monkeypatch, find_index, data, vals)
    np.testing.assert_array_equal(forward, [[4, 7, 0, 2, 8, 3, 6, 5]])
    vals[0, 1] = 42  # absent: the all-ones sentinel in both (a DESIGN CHOICE for match_replace8)
    (forward,) = run_both(monkeypatch, find_index, data, vals)
    assert forward[0, 1] == 0xFFFFFFFF
    dst, idx = run_both(monkeypatch, match_replace, data, vals, 0.0, nl.uint32, False)
    assert idx[0, 1] == 0xFFFFFFFF and dst[0, 7] == 7  # 7 is not claimed any more


@pytest.mark.parametrize("shape, dtype, idx_dtype, in_place", [
    ((128, 64), np.float32, np.uint32, False),
    ((16, 4, 10), np.float32, np.uint16, True),
    ((32, 40), BF16, np.uint32, False),
    ((8, 16), np.int32, None, True),
    ((128, 1024), np.float32, np.uint32, True),
])
def test_match_replace8_matches_numpy(monkeypatch, shape, dtype, idx_dtype, in_place):
    rng = np.random.default_rng(sum(shape))
    data = rng.integers(-6, 7, size=shape).astype(dtype)  # many repeats
    flat = data.reshape(shape[0], -1).astype(np.float32)
    vals = np.stack([rng.choice(np.append(row, [100.0]), 8) for row in flat]).astype(dtype)  # some absent
    out = run_both(monkeypatch, match_replace, data, vals, -0.5, idx_dtype, in_place)
    want_dst, want_idx = match_replace8_model(data, vals.astype(np.float32), np.float32(-0.5))
    np.testing.assert_array_equal(out[0].astype(np.float32), want_dst.astype(dtype).astype(np.float32))
    if idx_dtype is not None:
        np.testing.assert_array_equal(out[1], expected_idx(want_idx, idx_dtype))


def test_match_replace8_differs_from_find_index8_only_in_duplicate_order(monkeypatch):
    rng = np.random.default_rng(3)
    data = rng.integers(0, 4, size=(16, 24)).astype(np.float32)
    vals = np.stack([rng.choice(row, 8) for row in data]).astype(np.float32)
    _, idx = run_both(monkeypatch, match_replace, data, vals, 0.0, nl.uint32, False)
    (forward,) = run_both(monkeypatch, find_index, data, vals)
    np.testing.assert_array_equal(forward, expected_idx(find_index8_model(data, vals), np.uint32))
    for p in range(16):  # the same positions per value, handed out in the opposite slot order
        for v in set(vals[p].tolist()):
            slots = np.flatnonzero(vals[p] == v)
            np.testing.assert_array_equal(idx[p, slots], forward[p, slots[::-1]])


def test_match_replace8_rules():
    def kernel(data_shape, vals_cols, idx_dtype):
        @nki.jit(platform_target="trn3")
        def k(x):
            d = nl.ndarray(data_shape, nl.float32, buffer=nl.sbuf)
            nisa.memset(dst=d, value=0.0)
            v = nl.ndarray((data_shape[0], vals_cols), nl.float32, buffer=nl.sbuf)
            nisa.memset(dst=v, value=0.0)
            i = nl.ndarray((data_shape[0], 8), idx_dtype, buffer=nl.sbuf)
            nisa.nc_match_replace8(dst=d, data=d, vals=v, imm=0.0, dst_idx=i)
            return None
        return k

    x = np.zeros((1, 1), np.float32)
    with pytest.raises(nki.NkiValidationError, match=r"vals must be \[P, 8\]"):
        kernel((4, 16), 7, nl.uint32)(x)
    with pytest.raises(nki.NkiValidationError, match="dst_idx has dtype int32"):
        kernel((4, 16), 8, nl.int32)(x)
    with pytest.raises(nki.NkiValidationError, match="8 to 16384"):
        kernel((4, 6), 8, nl.uint32)(x)
    with pytest.raises(nki.NkiValidationError, match="at most 3"):
        kernel((4, 2, 2, 4), 8, nl.uint32)(x)


# ---- nonzero_with_count -------------------------------------------------------------------------

@nki.jit(platform_target="trn2")
def nonzero(src, index_offset, padding_val):
    s = sbuf(src)
    dst = nl.ndarray((src.shape[0], src.shape[1] + 1), nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=dst, value=12345)  # partitions it does not process keep this
    nisa.nonzero_with_count(dst=dst, src=s, index_offset=index_offset, padding_val=padding_val)
    return to_hbm(dst)


def nonzero_model(src, index_offset, padding_val):
    out = np.full((src.shape[0], src.shape[1] + 1), 12345, np.int64)
    for p in range(0, src.shape[0], 16):
        pos = np.flatnonzero(src[p] != 0)
        out[p, :] = padding_val
        out[p, :len(pos)] = pos + index_offset
        out[p, -1] = len(pos)
    return out


def test_nonzero_with_count_worked_example(monkeypatch):
    src = np.zeros((32, 6), np.float32)
    src[0] = [0, 2.5, 0, -1, 0, 7]
    src[1:16] = 3.0  # partitions 1-15 are not read
    (dst,) = run_both(monkeypatch, nonzero, src, 100, -9)
    np.testing.assert_array_equal(dst[0], [101, 103, 105, -9, -9, -9, 3])
    np.testing.assert_array_equal(dst[16], [-9, -9, -9, -9, -9, -9, 0])
    assert (dst[1:16] == 12345).all() and (dst[17:] == 12345).all()


@pytest.mark.parametrize("shape, dtype", [((128, 40), np.float32), ((48, 7), np.int32), ((16, 1), np.float32),
                                          ((128, 700), np.float32)])  # big enough to split over threads
def test_nonzero_with_count_matches_numpy(monkeypatch, shape, dtype):
    rng = np.random.default_rng(shape[0])
    src = (rng.integers(-2, 3, size=shape) * (rng.random(shape) < 0.4)).astype(dtype)
    if dtype == np.float32:
        src[0, 0] = -0.0  # counts as zero
    (dst,) = run_both(monkeypatch, nonzero, src, -3, 77)
    np.testing.assert_array_equal(dst, nonzero_model(src, -3, 77))


def test_nonzero_with_count_rules():
    def kernel(target, src_dtype, dst_cols):
        @nki.jit(platform_target=target)
        def k(x):
            s = nl.ndarray((16, 4), src_dtype, buffer=nl.sbuf)
            nisa.memset(dst=s, value=1)
            d = nl.ndarray((16, dst_cols), nl.int32, buffer=nl.sbuf)
            nisa.nonzero_with_count(dst=d, src=s)
            return None
        return k

    x = np.zeros((1, 1), np.float32)
    with pytest.raises(nki.NkiValidationError, match="gen3"):
        kernel("trn1", nl.float32, 5)(x)
    with pytest.raises(nki.NkiValidationError, match="one element more"):
        kernel("trn2", nl.float32, 4)(x)
    with pytest.raises(nki.NkiValidationError, match="src has dtype bfloat16"):
        kernel("trn3", nl.bfloat16, 5)(x)


# ---- sequence_bounds ----------------------------------------------------------------------------

@nki.jit
def bounds(ids):
    s = sbuf(ids)
    dst = nl.ndarray((1, 2, ids.shape[1]), ids.dtype, buffer=nl.sbuf)
    nisa.sequence_bounds(dst=dst, segment_ids=s)
    return to_hbm(dst)


def bounds_model(ids):
    n = len(ids)
    starts, ends = np.empty(n, np.int64), np.empty(n, np.int64)
    for j in range(n):
        if ids[j] == 0:
            starts[j], ends[j] = n, -1
            continue
        s = j
        while s > 0 and ids[s - 1] == ids[j]:
            s -= 1
        e = j + 1
        while e < n and ids[e] == ids[j]:
            e += 1
        starts[j], ends[j] = s, e
    return np.stack([starts, ends])[None]


def test_sequence_bounds_worked_examples(monkeypatch):
    (d,) = run_both(monkeypatch, bounds, np.array([[2, 2, 0, 5, 5, 5, 7]], np.int32))
    np.testing.assert_array_equal(d, [[[0, 0, 7, 3, 3, 3, 6], [2, 2, -1, 6, 6, 6, 7]]])
    (d,) = run_both(monkeypatch, bounds, np.array([[3, 3, 4, 3]], np.float32))
    np.testing.assert_array_equal(d, [[[0, 0, 2, 3], [2, 2, 3, 4]]])


@pytest.mark.parametrize("n, dtype", [(1, np.int32), (50, np.float32), (300, np.int32)])
def test_sequence_bounds_matches_numpy(monkeypatch, n, dtype):
    rng = np.random.default_rng(n)
    ids = np.repeat(rng.integers(0, 4, size=n), rng.integers(1, 4, size=n))[:n].reshape(1, n).astype(dtype)
    (d,) = run_both(monkeypatch, bounds, ids)
    np.testing.assert_array_equal(d, bounds_model(ids[0]))


@pytest.mark.parametrize("bad, message", [(-1, "negative"), (2.5, "not an integer")])
def test_sequence_bounds_rejects_bad_ids(monkeypatch, bad, message):
    ids = np.array([[1, 1, bad, 3]], np.float32)
    for backend in ("reference", "jit"):
        monkeypatch.setenv("KNIT_BACKEND", backend)
        with pytest.raises(knit.KnitError, match=message):
            bounds(ids)


def test_sequence_bounds_rules():
    def kernel(ids_shape, dst_shape, dtype=nl.int32):
        @nki.jit
        def k(x):
            s = nl.ndarray(ids_shape, dtype, buffer=nl.sbuf)
            nisa.memset(dst=s, value=1)
            d = nl.ndarray(dst_shape, dtype, buffer=nl.sbuf)
            nisa.sequence_bounds(dst=d, segment_ids=s)
            return None
        return k

    x = np.zeros((1, 1), np.float32)
    with pytest.raises(nki.NkiValidationError, match="one partition"):
        kernel((2, 4), (2, 2, 4))(x)
    with pytest.raises(nki.NkiValidationError, match=r"shape \(1, 2, 4\)"):
        kernel((1, 4), (1, 8))(x)
    with pytest.raises(nki.NkiValidationError, match="dtype int16"):
        kernel((1, 4), (1, 2, 4), nl.int16)(x)


# ---- topk ---------------------------------------------------------------------------------------

@nki.jit(platform_target="trn2")
def top(src, n, k):
    s = sbuf(src, nl.bfloat16)
    vals = nl.ndarray((src.shape[0], k), nl.bfloat16, buffer=nl.sbuf)
    idx = nl.ndarray((src.shape[0], k), nl.uint32, buffer=nl.sbuf)
    nisa.topk(val_dst=vals, idx_dst=idx, src=s, n=n)
    return to_hbm(vals), to_hbm(idx)


def topk_model(src, n, k):
    """Per group: the snake, the k largest (lower position first among equals), ascending."""
    vals = np.empty((src.shape[0], k), np.float32)
    idx = np.empty((src.shape[0], k), np.uint32)
    for g in range(0, src.shape[0], 16):
        snake = np.array([src[g + s % 16, s // 16] for s in range(n)], np.float32)
        kept = sorted(range(n), key=lambda s: (-snake[s], s))[:k]
        kept.sort(key=lambda s: (snake[s], s))
        vals[g:g + 16] = snake[kept]
        idx[g:g + 16] = kept
    return vals, idx


def test_topk_worked_example(monkeypatch):
    snake = np.arange(32, dtype=np.float32)
    snake[5], snake[17] = 100, 50
    src = snake.reshape(2, 16).T.copy()  # position s at partition s % 16, column s // 16
    vals, idx = run_both(monkeypatch, top, src, 20, 3)
    np.testing.assert_array_equal(vals.astype(np.float32), np.tile([19, 50, 100], (16, 1)))
    np.testing.assert_array_equal(idx, np.tile([19, 17, 5], (16, 1)))


@pytest.mark.parametrize("partitions, cols, n, k", [(32, 8, 100, 10), (128, 4, 64, 64), (16, 30, 470, 1),
                                                     (128, 600, 9000, 40)])
def test_topk_matches_numpy(monkeypatch, partitions, cols, n, k):
    rng = np.random.default_rng(n)
    src = rng.integers(-20, 20, size=(partitions, cols)).astype(np.float32)  # ties on purpose
    vals, idx = run_both(monkeypatch, top, src, n, k)
    want_vals, want_idx = topk_model(src.astype(BF16).astype(np.float32), n, k)
    np.testing.assert_array_equal(vals.astype(np.float32), want_vals)
    np.testing.assert_array_equal(idx, want_idx)


def test_topk_rules():
    def kernel(partitions, cols, n, k, src_dtype=nl.bfloat16):
        @nki.jit
        def kern(x):
            s = nl.ndarray((partitions, cols), src_dtype, buffer=nl.sbuf)
            nisa.memset(dst=s, value=1.0)
            v = nl.ndarray((partitions, k), nl.bfloat16, buffer=nl.sbuf)
            i = nl.ndarray((partitions, k), nl.uint32, buffer=nl.sbuf)
            nisa.topk(val_dst=v, idx_dst=i, src=s, n=n)
            return None
        return kern

    x = np.zeros((1, 1), np.float32)
    with pytest.raises(nki.NkiValidationError, match="multiple of 16"):
        kernel(24, 4, 16, 2)(x)
    with pytest.raises(nki.NkiValidationError, match="8 <= n < 65536"):
        kernel(16, 4, 4, 2)(x)
    with pytest.raises(nki.NkiValidationError, match="at most n"):
        kernel(16, 4, 10, 11)(x)
    with pytest.raises(nki.NkiValidationError, match="need 3"):
        kernel(16, 2, 40, 2)(x)
    with pytest.raises(nki.NkiValidationError, match="src has dtype float32"):
        kernel(16, 4, 40, 2, nl.float32)(x)


@nki.jit(platform_target="trn2")
def nonzero_rows(src, rows):
    """nonzero_with_count into a dst nothing wrote before; rows of it copied out."""
    s = sbuf(src)
    dst = nl.ndarray((src.shape[0], src.shape[1] + 1), nl.int32, buffer=nl.sbuf)
    nisa.nonzero_with_count(dst=dst, src=s)
    out = nl.ndarray((len(rows), src.shape[1] + 1), nl.int32, buffer=nl.shared_hbm)
    for i, r in enumerate(rows):
        nisa.dma_copy(dst=out[i:i + 1, :], src=dst[r:r + 1, :])
    return out


def test_nonzero_with_count_writes_only_its_partitions(monkeypatch):
    src = np.random.default_rng(1).integers(0, 2, size=(32, 9)).astype(np.float32)
    (out,) = run_both(monkeypatch, nonzero_rows, src, (0, 16))
    np.testing.assert_array_equal(out, nonzero_model(src, 0, -1)[[0, 16]])
    outcomes = {}
    for backend in ("reference", "jit-strict"):  # partition 1 was never written: the same report
        monkeypatch.setenv("KNIT_BACKEND", backend)
        try:
            nonzero_rows(src, (1,))
            outcomes[backend] = "ran"
        except knit.KnitError as e:
            outcomes[backend] = type(e).__name__ + str(e).split("\n")[0].split(":", 2)[-1]
    assert outcomes["reference"] != "ran" and outcomes["reference"] == outcomes["jit-strict"], outcomes


def test_match_replace8_ieee_equality_nan_never_matches_and_zeros_match(monkeypatch):
    data = np.array([[np.nan, -0.0, 1, 0.0, np.nan, 2, 3, 4, 5, 6]], np.float32)
    vals = np.array([[np.nan, 0.0, -0.0, 7, 7, 7, 7, 7]], np.float32)
    dst, idx = run_both(monkeypatch, match_replace, data, vals, 9.0, nl.uint32, False)
    # slot 2 (-0) claims position 1 first, slot 1 (+0) the next zero; NaN and 7 are not found
    np.testing.assert_array_equal(idx, [[0xFFFFFFFF, 3, 1] + [0xFFFFFFFF] * 5])
    np.testing.assert_array_equal(dst[0, [1, 3]], [9, 9])
    assert np.isnan(dst[0, 0]) and np.isnan(dst[0, 4])
