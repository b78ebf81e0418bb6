"""NKI 0.4 - 0.6 behaviour changes (nki-0.6-additions.md §6) that apply to a single-core
simulator, each checked against what NKI 0.6 does: the worked examples of the release notes and
API docs, or NumPy. Instructions other work adds (random numbers, activate2, topk, ...) and
collectives are tested with them, not here."""
import importlib.util
import warnings

import ml_dtypes
import numpy as np
import pytest

import knit
import knit.isa as nisa
import knit.language as nl
from knit import NkiValidationError

F32_MIN = float(np.finfo(np.float32).min)


def run(kernel, *args, **options):
    return knit.jit(kernel, **options)(*args)


# ---- fp32 -> integer casts: round half to even, saturate (0.6 simulator fix) --------------------
CAST_IN = np.array([[2.5, 3.5, -1.5, 300.7, -5.0, 0.5, -0.5, 1.5, 254.5, 255.5, 1e10, -1e10]], np.float32)


def rne_saturate(x, dtype):
    """The 0.6 rule, computed independently: NumPy's round-half-even, then clip to the range."""
    info = np.iinfo(dtype)
    return np.clip(np.rint(x.astype(np.float64)), info.min, info.max).astype(dtype)


def cast_kernel(dtype, how):
    def k(a):
        out = nl.ndarray(a.shape, dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, nl.float32)
        nisa.dma_copy(t, a)
        u = nl.ndarray(a.shape, dtype)
        if how == "vector":
            nisa.tensor_copy(u, t, engine=nisa.engine.vector)
        elif how == "scalar":
            nisa.activation(u, nl.copy, t)
        else:
            nisa.tensor_scalar(u, t, nl.add, 0.0, engine=nisa.engine.gpsimd)
        nisa.dma_copy(out, u)
        return out

    return k


@pytest.mark.parametrize("how", ["vector", "scalar", "gpsimd"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16, np.int32, np.uint32])
def test_fp32_to_int_rounds_half_to_even_and_saturates(dtype, how):
    got = run(cast_kernel(dtype, how), CAST_IN)
    np.testing.assert_array_equal(got, rne_saturate(CAST_IN, dtype))


def test_the_release_notes_cast_examples():
    got = run(cast_kernel(nl.uint8, "vector"), np.array([[2.5, 3.5, 300.7, -5.0]], np.float32))
    np.testing.assert_array_equal(got, [[2, 4, 255, 0]])
    got = run(cast_kernel(nl.int8, "vector"), np.array([[-1.5, 2.5, 3.5]], np.float32))
    np.testing.assert_array_equal(got, [[-2, 2, 4]])


def test_nan_and_infinity_casts_follow_the_documented_choice():
    """NKI leaves NaN / inf unstated (§7 point 15); Knit's choice (docs/language.md): NaN -> 0,
    +inf -> the type's maximum, -inf -> its minimum (saturation, as for any out-of-range value)."""
    x = np.array([[np.nan, np.inf, -np.inf]], np.float32)
    for dtype in (np.uint8, np.int16, np.int32):
        info = np.iinfo(dtype)
        np.testing.assert_array_equal(run(cast_kernel(dtype, "vector"), x), [[0, info.max, info.min]])


# ---- nc_find_index8 (0.6: unmatched -> all ones, duplicates advance) ---------------------------
def find_index8(data, vals, dtype):
    def k(d, v):
        out = nl.ndarray((1, 8), dtype, buffer=nl.shared_hbm)
        td, tv = nl.ndarray(d.shape, nl.float32), nl.ndarray(v.shape, nl.float32)
        nisa.dma_copy(td, d)
        nisa.dma_copy(tv, v)
        r = nl.ndarray((1, 8), dtype)
        nisa.nc_find_index8(r, td, tv)
        nisa.dma_copy(out, r)
        return out

    return run(k, data, vals)


def test_nc_find_index8_duplicates_advance_and_misses_are_all_ones():
    data = np.array([[5, 1, 5, 3, 9, 5, 2, 7, 4, 5]], np.float32)
    vals = np.array([[9, 7, 5, 5, 4, 3, 2, 5]], np.float32)
    np.testing.assert_array_equal(find_index8(data, vals, nl.uint32), [[4, 7, 0, 2, 8, 3, 6, 5]])
    vals[0, 1] = 42
    np.testing.assert_array_equal(find_index8(data, vals, nl.uint32), [[4, 0xFFFFFFFF, 0, 2, 8, 3, 6, 5]])
    np.testing.assert_array_equal(find_index8(data, vals, nl.uint16), [[4, 0xFFFF, 0, 2, 8, 3, 6, 5]])


# ---- activation: reduce_res aliasing dst keeps the reduction (0.6 fix) --------------------------
def test_activation_reduce_res_aliasing_dst_keeps_the_reduction():
    x = np.arange(8, dtype=np.float32).reshape(2, 4)

    def k(a):
        out = nl.ndarray((2, 4), nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((2, 4), nl.float32)
        nisa.dma_copy(t, a)
        d = nl.ndarray((2, 4), nl.float32)
        nisa.activation(d, nl.copy, t, reduce_op=nl.add, reduce_res=d[:, 0:1],
                        reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.dma_copy(out, d)
        return out

    want = x.copy()
    want[:, 0] = x.sum(axis=1)
    np.testing.assert_array_equal(run(k, x), want)


# ---- predicated copy / select_reduce: ranks may differ, per-partition counts match (0.6) --------
def test_tensor_copy_predicated_with_a_2d_src_and_4d_dst():
    src = np.arange(16, dtype=np.float32).reshape(2, 8)
    pred = (np.arange(16).reshape(2, 2, 2, 2) % 3 == 0).astype(np.float32)

    def k(s, p):
        out = nl.ndarray((2, 2, 2, 2), nl.float32, buffer=nl.shared_hbm)
        ts, tp = nl.ndarray((2, 8), nl.float32), nl.ndarray((2, 2, 2, 2), nl.float32)
        nisa.dma_copy(ts, s)
        nisa.dma_copy(tp, p)
        d = nl.full((2, 2, 2, 2), -1.0, nl.float32)
        nisa.tensor_copy_predicated(d, ts, tp)
        nisa.dma_copy(out, d)
        return out

    want = np.where(pred != 0, src.reshape(2, 2, 2, 2), -1.0)
    np.testing.assert_array_equal(run(k, src, pred), want)


def test_select_reduce_with_a_4d_predicate_and_2d_on_true():
    on_true = np.arange(16, dtype=np.float32).reshape(2, 8)
    pred = (np.arange(16).reshape(2, 2, 2, 2) % 2 == 0)

    def k(t, p):
        out = nl.ndarray((2, 2, 2, 2), nl.float32, buffer=nl.shared_hbm)
        tt, tp = nl.ndarray((2, 8), nl.float32), nl.ndarray((2, 2, 2, 2), nl.uint8)
        nisa.dma_copy(tt, t)
        nisa.dma_copy(tp, p)
        d = nl.ndarray((2, 2, 2, 2), nl.float32)
        nisa.select_reduce(d, tp, tt, 0.5)
        nisa.dma_copy(out, d)
        return out

    want = np.where(pred, on_true.reshape(2, 2, 2, 2), 0.5)
    np.testing.assert_array_equal(run(k, on_true, pred.astype(np.uint8)), want)


# ---- range_select / affine_select take a Python float on_false_value (0.6) ----------------------
def test_range_select_and_affine_select_take_a_python_float_fill():
    x = np.arange(8, dtype=np.float32).reshape(2, 4)

    def k(a):
        out_r = nl.ndarray((2, 4), nl.float32, buffer=nl.shared_hbm)
        out_a = nl.ndarray((2, 4), nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((2, 4), nl.float32)
        nisa.dma_copy(t, a)
        lo, hi = nl.full((2, 1), 1.0, nl.float32), nl.full((2, 1), 3.0, nl.float32)
        r = nl.ndarray((2, 4), nl.float32)
        nisa.range_select(r, t, nl.greater_equal, nl.less, lo, hi, on_false_value=F32_MIN)
        s = nl.ndarray((2, 4), nl.float32)
        # keep t[p, i] where p - i >= 0 (a lower-triangular mask)
        nisa.affine_select(s, [[-1, 4]], 1, t, F32_MIN, cmp_op=nl.greater_equal)
        nisa.dma_copy(out_r, r)
        nisa.dma_copy(out_a, s)
        return out_r, out_a

    r, s = run(k, x)
    p, i = np.indices(x.shape)
    # range_select compares the free index with the bounds: keep columns 1 <= i < 3
    np.testing.assert_array_equal(r, np.where((i >= 1) & (i < 3), x, F32_MIN))
    np.testing.assert_array_equal(s, np.where(p - i >= 0, x, F32_MIN))


# ---- loops: deprecations and aliases -------------------------------------------------------------
def test_dynamic_range_warns_that_it_is_deprecated_and_fori_loop_does_not():
    def k(a, use):
        out = nl.ndarray((1, 4), nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((1, 4), nl.float32)
        nisa.dma_copy(t, a)
        if use == "dynamic_range":
            for _ in nl.dynamic_range(3):
                nisa.tensor_scalar(t, t, nl.add, 1.0)
        else:
            nl.fori_loop(0, 3, lambda i: nisa.tensor_scalar(t, t, nl.add, 1.0))
        nisa.dma_copy(out, t)
        return out

    x = np.zeros((1, 4), np.float32)
    with pytest.warns(DeprecationWarning, match="fori_loop") as record:
        np.testing.assert_array_equal(run(k, x, "dynamic_range"), x + 3)
    assert record[0].filename == __file__  # points at the kernel's line
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        np.testing.assert_array_equal(run(k, x, "fori_loop"), x + 3)


def test_a_bare_while_on_a_register_is_an_error_naming_while_loop():
    """NKI 0.6 deprecates `while reg:`; a Python tracer cannot see the loop, so Knit refuses it
    with a pointer to nl.while_loop (docs/language.md)."""
    def k(a):
        r = nisa.register_alloc(1)
        while r:
            pass

    with pytest.raises(TypeError, match="while_loop"):
        knit.compile(k, np.zeros((1, 1), np.float32))


@pytest.mark.parametrize("name", ["affine_range", "sequential_range", "static_range"])
def test_static_loops_are_aliases_of_range(name):
    rng = getattr(nl, name)
    assert list(rng(5)) == list(range(5))
    assert list(rng(2, 9, 3)) == list(range(2, 9, 3))


# ---- nl.copy: VectorE tensor_copy, bit-exact for equal dtypes (0.6) ------------------------------
def test_nl_copy_is_bit_exact_on_the_vector_engine():
    big = np.array([[16777217, -16777217, 2**31 - 1, -(2**31)]], np.int32)

    def k(a, dtype):
        out = nl.ndarray(a.shape, dtype or nl.int32, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, nl.int32)
        nisa.dma_copy(t, a)
        nisa.dma_copy(out, nl.copy(t, dtype=dtype))
        return out

    np.testing.assert_array_equal(run(k, big, None), big)
    np.testing.assert_array_equal(run(k, big, nl.float32), big.astype(np.float32))  # a dtype change rounds
    stats = knit.compile(k, big, None).stats
    assert stats["instructions"]["dve"] == 1 and stats["instructions"]["act"] == 0


def test_nl_copy_moves_a_psum_matmul_result_to_sbuf():
    a = np.arange(16, dtype=np.float32).reshape(4, 4)

    def k(x):
        out = nl.ndarray((4, 4), nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((4, 4), nl.float32)
        nisa.dma_copy(t, x)
        p = nl.ndarray((4, 4), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(p, t, t)
        s = nl.copy(p)
        assert s.buffer is nl.sbuf
        nisa.dma_copy(out, s)
        return out

    np.testing.assert_allclose(run(k, a), a.T @ a, rtol=1e-6)


# ---- nl.rsqrt runs on GpSimd and rejects PSUM (0.5) ----------------------------------------------
def test_nl_rsqrt_runs_on_gpsimd_and_rejects_psum():
    x = np.array([[1.0, 4.0, 0.25, 2.0]], np.float32)

    def k(a, buffer):
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, nl.float32, buffer=buffer)
        if buffer is nl.psum:
            nisa.memset(t, 4.0)
        else:
            nisa.dma_copy(t, a)
        nisa.dma_copy(out, nl.rsqrt(t))
        return out

    np.testing.assert_allclose(run(k, x, nl.sbuf), 1 / np.sqrt(x), rtol=1e-6)
    assert knit.compile(k, x, nl.sbuf).stats["instructions"]["pool"] == 1
    with pytest.raises(NkiValidationError, match="GpSimd.*PSUM"):
        knit.compile(k, x, nl.psum)


# ---- nl.tile_size additions (0.4 / 0.5) ----------------------------------------------------------
SBUF_PARTITION_KIB = {"trn1": 192, "trn2": 224, "trn3": 256}  # 24 / 28 / 32 MiB over 128 partitions


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
def test_tile_size_sbuf_fields_follow_the_target(target, monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", target)
    per_partition = SBUF_PARTITION_KIB[target] * 1024
    ts = nl.tile_size
    assert ts.sbuf_fmax_bytes == per_partition and ts.sbuf_fmax == per_partition // 4
    assert ts.sbuf_size_bytes == 128 * per_partition
    assert ts.total_available_sbuf_size == per_partition  # deprecated: per partition despite its name
    assert (ts.psum_bank_fmax, ts.psum_bank_fmax_bytes, ts.psum_num_banks, ts.psum_fmax) == (512, 2048, 8, 512)
    assert ts.psum_min_align == 2048 and ts.sbuf_min_align > 0
    assert all(type(getattr(ts, f)) is int for f in ("sbuf_fmax", "sbuf_size_bytes", "psum_min_align"))


def test_tile_size_follows_the_kernel_target_while_tracing():
    seen = {}

    def k(a):
        seen["fmax"] = nl.tile_size.sbuf_fmax_bytes
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(out, a)
        return out

    knit.compile(k, np.zeros((1, 1), np.float32), target="trn3")
    assert seen["fmax"] == 256 * 1024


def test_sbuf_min_align_is_what_the_allocator_gives():
    def k(a):
        out = nl.ndarray((1, 3), nl.float32, buffer=nl.shared_hbm)
        t1, t2 = nl.ndarray((1, 3), nl.float32), nl.ndarray((1, 3), nl.float32)
        nisa.dma_copy(t1, a)
        nisa.tensor_copy(t2, t1)
        nisa.dma_copy(out, t2)
        return out

    plan = knit.compile(k, np.zeros((1, 3), np.float32)).program.to_text()
    offsets = [int(line.split("bytes [")[1].split(",")[0]) for line in plan.splitlines() if "bytes [" in line]
    assert all(o % nl.tile_size.sbuf_min_align == 0 for o in offsets)


# ---- dma_transpose: dst shape is the transposed src shape, rank included (0.4) -------------------
def test_dma_transpose_dst_must_have_the_transposed_shape_and_rank():
    x = np.arange(32, dtype=np.float32).reshape(4, 8)

    def k(a, dst_shape):
        out = nl.ndarray((8, 4), nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray(dst_shape, nl.float32)
        nisa.dma_transpose(t, a)
        nisa.dma_copy(out, t.reshape((8, 4)))
        return out

    np.testing.assert_array_equal(run(k, x, (8, 4)), x.T)
    with pytest.raises(NkiValidationError, match="dst shape"):
        knit.compile(k, x, (8, 1, 4))


# ---- removed instructions name their replacement (0.4) -------------------------------------------
@pytest.mark.parametrize("name", ["tensor_copy_dynamic_src", "tensor_copy_dynamic_dst"])
def test_removed_dynamic_copies_name_the_replacement(name):
    assert not hasattr(nisa, name)
    with pytest.raises(AttributeError, match=r"removed in NKI 0\.4.*tensor_copy.*scalar_offset"):
        getattr(nisa, name)


# ---- nc_matmul: float8_e4m3fn may not mix with float8_e4m3 (0.4) ---------------------------------
def test_nc_matmul_rejects_mixing_the_two_e4m3_formats():
    a = np.ones((4, 4), np.float32)

    def k(x, y, dt_x, dt_y):
        out = nl.ndarray((4, 4), nl.float32, buffer=nl.shared_hbm)
        tx, ty = nl.ndarray((4, 4), dt_x), nl.ndarray((4, 4), dt_y)
        nisa.dma_copy(tx, x)
        nisa.dma_copy(ty, y)
        p = nl.ndarray((4, 4), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(p, tx, ty)
        s = nl.ndarray((4, 4), nl.float32)
        nisa.tensor_copy(s, p)
        nisa.dma_copy(out, s)
        return out

    fn = ml_dtypes.float8_e4m3fn
    np.testing.assert_array_equal(knit.jit(k, platform_target="trn3")(a.astype(fn), a.astype(fn), nl.float8_e4m3fn,
                                                                    nl.float8_e4m3fn), 4 * a)
    with pytest.raises(NkiValidationError, match="cannot be mixed"):
        knit.compile(k, a.astype(fn), a.astype(fn), nl.float8_e4m3, nl.float8_e4m3fn, target="trn3")


# ---- JAX scalar dtypes map to NKI dtypes; unsupported ones raise TypeError (0.4) -----------------
def test_numpy_and_ml_dtypes_scalar_types_map_to_nki_dtypes():
    """JAX's scalar dtypes (jnp.bfloat16, jnp.float32, ...) are the ml_dtypes / NumPy scalar types,
    checked here without JAX itself."""
    def k(a, dtype):
        out = nl.ndarray(a.shape, dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, dtype)
        nisa.dma_copy(t, a)
        nisa.dma_copy(out, t)
        return out

    x = np.array([[1.5, -2.25]], ml_dtypes.bfloat16)
    got = run(k, x, ml_dtypes.bfloat16)
    assert got.dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(got, x)
    with pytest.raises(TypeError, match="float64"):
        knit.compile(k, np.zeros((1, 2), np.float32), np.float64)


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="JAX is not installed")
def test_jax_dtypes_map_to_nki_dtypes():
    import jax.numpy as jnp

    from knit._dtypes import to_dtype

    assert to_dtype(jnp.bfloat16) == nl.bfloat16 and to_dtype(jnp.int8) == nl.int8
    with pytest.raises(TypeError):
        to_dtype(jnp.complex64)
