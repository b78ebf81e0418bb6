"""Knit's rounding model (ir/numerics.h) from Python, compared bit for bit with ml_dtypes.

Knit rounds fp32 to bfloat16 / float16 / float8_e4m3 (the IEEE-like variant: bias 7, max 240,
inf and NaNs) / float8_e5m2 to nearest, ties to even, keeping subnormals, overflowing to inf and
keeping NaN (sign included); float8_e4m3fn the same way except that overflow and inf become NaN;
float8_e8m0fnu to the nearest power of two with ties up (numerics.h). ml_dtypes (and NumPy for
float16) implement the same IEEE rules, so every finite result must match exactly; NaNs are
compared with isnan (payloads may differ).

The conversions are exercised two ways:
  * through the reference interpreter: `_core.run_ir` on a dma_copy kernel (dtype conversion
    goes src -> fp32 -> dst through ir::encode / ir::decode);
  * through `_core.encode` / `_core.decode` directly.
"""

import os

import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes")

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from knit import _core  # noqa: E402  (tests/python/conftest.py puts python/ on sys.path)

# Knit dtype name -> (NumPy / ml_dtypes type, unsigned integer type of the same width)
FORMATS = {
    "bfloat16": (ml_dtypes.bfloat16, np.uint16),
    "float16": (np.float16, np.uint16),
    "float8_e4m3": (ml_dtypes.float8_e4m3, np.uint8),
    "float8_e5m2": (ml_dtypes.float8_e5m2, np.uint8),
    # trn3: OCP fp8 (no inf; overflow and inf become NaN) and the MX scale format (powers of two,
    # ties round up, no sign: zero, negatives, inf and NaN all become the NaN code 0xFF).
    "float8_e4m3fn": (ml_dtypes.float8_e4m3fn, np.uint8),
    "float8_e8m0fnu": (ml_dtypes.float8_e8m0fnu, np.uint8),
}
UNSIGNED = {"float8_e8m0fnu"}  # no sign bit: its NaN cannot keep the input's sign
DTYPES = list(FORMATS)


# ---- running conversions through the interpreter --------------------------------------------


def _copy_kernel(src_dtype, dst_dtype, n):
    # A 1-D HBM -> HBM dma_copy; differing dtypes convert through fp32 (nki.isa.dma_copy).
    return (
        'kernel "convert" target=trn2 {\n'
        f'  param %0 "x" hbm {src_dtype}[{n}]\n'
        f'  tensor %1 "y" shared_hbm {dst_dtype}[{n}]\n'
        f'  dma_copy dst=%1@0[[1,{n}]] src=%0@0[[1,{n}]] @ "convert.py":1\n'
        "  return %1\n"
        "}\n"
    )


def ir_encode(values, dtype):
    """Stored codes of float32 `values` written to a `dtype` tensor by the interpreter."""
    values = np.ascontiguousarray(values, dtype=np.float32)
    uint = FORMATS[dtype][1]
    (out_dtype, shape, raw), = _core.run_ir(
        _copy_kernel("float32", dtype, values.size), [("float32", [values.size], values.tobytes())]
    )
    assert out_dtype == dtype and list(shape) == [values.size]
    return np.frombuffer(raw, dtype=uint).copy()


def ir_decode(codes, dtype):
    """float32 values the interpreter reads from `dtype` codes."""
    codes = np.ascontiguousarray(codes, dtype=FORMATS[dtype][1])
    (out_dtype, shape, raw), = _core.run_ir(
        _copy_kernel(dtype, "float32", codes.size), [(dtype, [codes.size], codes.tobytes())]
    )
    assert out_dtype == "float32"
    return np.frombuffer(raw, dtype=np.float32).copy()


def api_encode(values, dtype):
    raw = _core.encode(np.ascontiguousarray(values, dtype=np.float32), dtype)
    return np.frombuffer(raw, dtype=FORMATS[dtype][1]).copy()


def api_decode(codes, dtype):
    codes = np.ascontiguousarray(codes, dtype=FORMATS[dtype][1])
    return np.frombuffer(_core.decode(codes.view(np.uint8), dtype), dtype=np.float32).copy()


CONVERTERS = [
    pytest.param((ir_encode, ir_decode), id="run_ir"),
    pytest.param((api_encode, api_decode), id="encode_api"),
]


# ---- the inputs -------------------------------------------------------------------------------


def all_codes(dtype):
    uint = FORMATS[dtype][1]
    return np.arange(np.iinfo(uint).max + 1, dtype=np.int64).astype(uint)


def representable(dtype):
    """Sorted non-negative finite values of dtype, as float64."""
    t, _ = FORMATS[dtype]
    with np.errstate(invalid="ignore"):
        v = all_codes(dtype).view(t).astype(np.float64)
    v = v[np.isfinite(v) & (v >= 0)]
    return np.unique(v)


def midpoint_inputs(dtype):
    """Every midpoint between adjacent representable values (exact in fp32), the overflow
    boundary max + ulp/2, both signs, and the fp32 neighbours on either side of each."""
    v = representable(dtype)
    mids = (v[:-1] + v[1:]) / 2
    top_ulp = v[-1] - v[-2]
    mids = np.concatenate([mids, [v[-1] + top_ulp / 2]])
    m32 = mids.astype(np.float32)
    assert np.array_equal(m32.astype(np.float64), mids), "midpoints must be exact in fp32"
    around = [m32, np.nextafter(m32, np.float32(np.inf)), np.nextafter(m32, np.float32(0))]
    pos = np.concatenate(around)
    return np.concatenate([pos, -pos]).astype(np.float32)


def random_inputs(dtype, seed=0):
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2**32, size=200_000, dtype=np.uint64).astype(np.uint32)
    raw = bits.view(np.float32)  # all classes: NaNs, infs, subnormals, huge values
    finfo = ml_dtypes.finfo(FORMATS[dtype][0])
    lo, hi = int(np.log2(float(finfo.smallest_subnormal))) - 3, int(np.log2(float(finfo.max))) + 3
    near = np.ldexp(rng.uniform(1.0, 2.0, 100_000), rng.integers(lo, hi, 100_000))
    near *= rng.choice([-1.0, 1.0], near.size)
    f32 = np.finfo(np.float32)
    special = np.array(
        [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, f32.max, -f32.max, f32.tiny, f32.smallest_subnormal,
         -f32.smallest_subnormal, float(finfo.max), -float(finfo.max), float(finfo.smallest_subnormal) / 2],
        dtype=np.float32,
    )
    payload_nans = np.array([0x7F800001, 0xFF800001, 0x7FC00001, 0xFFFFFFFF, 0x7FA00000], dtype=np.uint32)
    with np.errstate(over="ignore"):
        near32 = near.astype(np.float32)
    return np.concatenate([raw, near32, special, payload_nans.view(np.float32)])


# ---- the comparisons --------------------------------------------------------------------------


def assert_codes_match(values, got, dtype):
    t, uint = FORMATS[dtype]
    with np.errstate(invalid="ignore", over="ignore"):
        want = values.astype(t).view(uint)
    nan_in = np.isnan(values)
    # Non-NaN inputs: the same code, bit for bit.
    bad = np.nonzero((got != want) & ~nan_in)[0]
    if bad.size:
        rows = [
            f"  {values[i]!r} (fp32 0x{values.view(np.uint32)[i]:08x}): knit 0x{int(got[i]):x}, "
            f"ml_dtypes 0x{int(want[i]):x}"
            for i in bad[:10]
        ]
        pytest.fail(f"{bad.size} of {values.size} {dtype} encodings differ:\n" + "\n".join(rows))
    # NaN inputs: the canonical NaN code (positive, quiet), whatever the input NaN's sign and
    # payload (numerics.h): the code ml_dtypes gives the positive default NaN.
    got_nan = got[nan_in].view(t).astype(np.float32)
    assert np.all(np.isnan(got_nan)), f"{dtype}: a NaN input did not stay NaN"
    canonical = np.array([np.float32("nan")]).astype(t).view(uint)[0]
    assert np.all(got[nan_in] == canonical), f"{dtype}: a NaN was not written as the canonical NaN"


@pytest.mark.parametrize("conv", CONVERTERS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_decode_every_code_matches_ml_dtypes(dtype, conv):
    _, decode = conv
    t, uint = FORMATS[dtype]
    codes = all_codes(dtype)
    got = decode(codes, dtype)
    want = codes.view(t).astype(np.float32)
    assert got.shape == want.shape
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), f"{dtype}: NaN codes differ"
    bad = np.nonzero(got.view(np.uint32)[~nan] != want.view(np.uint32)[~nan])[0]
    assert bad.size == 0, f"{dtype}: codes {[hex(int(c)) for c in codes[~nan][bad[:10]]]} decode differently"


@pytest.mark.parametrize("conv", CONVERTERS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_encode_midpoints_match_ml_dtypes(dtype, conv):
    encode, _ = conv
    values = midpoint_inputs(dtype)
    assert_codes_match(values, encode(values, dtype), dtype)


@pytest.mark.parametrize("conv", CONVERTERS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_encode_random_values_match_ml_dtypes(dtype, conv):
    encode, _ = conv
    values = random_inputs(dtype, seed=len(dtype))
    assert_codes_match(values, encode(values, dtype), dtype)


@pytest.mark.parametrize("conv", CONVERTERS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_code_survives_decode_encode(dtype, conv):
    encode, decode = conv
    t, uint = FORMATS[dtype]
    codes = all_codes(dtype)
    values = decode(codes, dtype)
    back = encode(values, dtype)
    finite_or_inf = ~np.isnan(codes.view(t).astype(np.float32))
    assert np.array_equal(back[finite_or_inf], codes[finite_or_inf])


@pytest.mark.parametrize("conv", CONVERTERS)
def test_hand_picked_encodings(conv):
    # Independent of ml_dtypes: values worked out from the formats' bit layouts.
    encode, _ = conv
    cases = {
        "bfloat16": [(1.0, 0x3F80), (np.uint32(0x3F808000).view(np.float32), 0x3F80),
                     (np.uint32(0x3F818000).view(np.float32), 0x3F82), (-0.0, 0x8000),
                     (np.uint32(0x7F7F8000).view(np.float32), 0x7F80)],
        "float16": [(65504.0, 0x7BFF), (65520.0, 0x7C00), (2.0**-24, 0x0001), (2.0**-25, 0x0000),
                    (1.5 * 2.0**-24, 0x0002), (2049.0, 0x6800)],
        "float8_e4m3": [(240.0, 0x77), (248.0, 0x78), (1.0625, 0x38), (1.1875, 0x3A), (2.0**-9, 0x01),
                        (7.5 * 2.0**-9, 0x08), (-np.inf, 0xF8), (np.nan, 0x7C)],
        "float8_e5m2": [(57344.0, 0x7B), (61440.0, 0x7C), (1.125, 0x3C), (1.375, 0x3E), (2.0**-16, 0x01),
                        (-0.0, 0x80), (np.nan, 0x7E)],
        "float8_e4m3fn": [(448.0, 0x7E), (464.0, 0x7E), (465.0, 0x7F), (-np.inf, 0xFF), (256.0, 0x78),
                          (2.0**-9, 0x01), (-0.0, 0x80), (np.nan, 0x7F)],
        "float8_e8m0fnu": [(1.0, 127), (1.5, 128), (3.0, 129), (2.0**-127, 0), (2.0**-140, 0), (2.0**127, 254),
                           (0.0, 0xFF), (-1.0, 0xFF), (np.inf, 0xFF)],
    }
    for dtype, pairs in cases.items():
        values = np.array([v for v, _ in pairs], dtype=np.float32)
        got = encode(values, dtype)
        assert [int(c) for c in got] == [c for _, c in pairs], dtype


# ---- run_ir on a small kernel -----------------------------------------------------------------

STAGE_KERNEL = """kernel "stage" target=trn2 {
  param %0 "x" hbm float32[128, 64] @ "stage.py":1:1
  tensor %1 "out" shared_hbm float32[128, 64] @ "stage.py":2:5
  tensor %2 "tile" sbuf float32[128, 64] @ "stage.py":3:5
  dma_copy dst=%2@0[[64,128],[1,64]] src=%0@0[[64,128],[1,64]] @ "stage.py":4:5
  dma_copy dst=%1@0[[64,128],[1,64]] src=%2@0[[64,128],[1,64]] @ "stage.py":5:5
  return %1
}
"""


def _run(text, *arrays):
    args = [(str(a.dtype) if a.dtype != ml_dtypes.bfloat16 else "bfloat16", list(a.shape), a.tobytes())
            for a in arrays]
    return _core.run_ir(text, args)


def test_run_ir_dma_hbm_sbuf_hbm_is_exact():
    x = np.random.default_rng(7).standard_normal((128, 64)).astype(np.float32)
    x[0, 0], x[1, 1], x[2, 2] = np.inf, -0.0, np.float32(1e-45)
    (dtype, shape, raw), = _run(STAGE_KERNEL, x)
    assert dtype == "float32" and list(shape) == [128, 64]
    out = np.frombuffer(raw, dtype=np.float32).reshape(128, 64)
    assert np.array_equal(out.view(np.uint32), x.view(np.uint32))


def test_run_ir_staging_through_bfloat16_rounds_like_ml_dtypes():
    text = STAGE_KERNEL.replace('"tile" sbuf float32', '"tile" sbuf bfloat16')
    x = np.random.default_rng(8).standard_normal((128, 64)).astype(np.float32) * 1000
    (_, _, raw), = _run(text, x)
    out = np.frombuffer(raw, dtype=np.float32).reshape(128, 64)
    want = x.astype(ml_dtypes.bfloat16).astype(np.float32)
    assert np.array_equal(out, want)
    assert not np.array_equal(out, x)  # the rounding really happened


def test_run_ir_strided_views_match_numpy_slicing():
    # out = x[::-1, ::2] staged through SBUF; views are the NKI access patterns of those slices.
    text = """kernel "strided" target=trn2 {
  param %0 "x" hbm float32[128, 64] @ "s.py":1
  tensor %1 "out" shared_hbm float32[128, 32] @ "s.py":2
  tensor %2 "tile" sbuf float32[128, 32] @ "s.py":3
  dma_copy dst=%2@0[[32,128],[1,32]] src=%0@8128[[-64,128],[2,32]] @ "s.py":4
  dma_copy dst=%1@0[[32,128],[1,32]] src=%2@0[[32,128],[1,32]] @ "s.py":5
  return %1
}
"""
    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    (_, shape, raw), = _run(text, x)
    assert list(shape) == [128, 32]
    out = np.frombuffer(raw, dtype=np.float32).reshape(128, 32)
    assert np.array_equal(out, x[::-1, ::2])


def test_run_ir_bfloat16_input_widens_exactly():
    text = STAGE_KERNEL.replace('param %0 "x" hbm float32', 'param %0 "x" hbm bfloat16')
    x = np.random.default_rng(9).standard_normal((128, 64)).astype(ml_dtypes.bfloat16)
    (_, _, raw), = _run(text, x)
    out = np.frombuffer(raw, dtype=np.float32).reshape(128, 64)
    assert np.array_equal(out, x.astype(np.float32))


def test_roundtrip_and_verify_ir():
    assert _core.roundtrip_ir(STAGE_KERNEL) == STAGE_KERNEL
    _core.verify_ir(STAGE_KERNEL)  # valid: no exception
    bad = STAGE_KERNEL.replace('"tile" sbuf', '"tile" psum')  # dma_copy cannot write (or read) PSUM
    with pytest.raises(_core.KnitError, match=r"stage\.py:4:5: error: \[buffer\] dma_copy: dst"):
        _core.verify_ir(bad)
    with pytest.raises(_core.KnitError, match=r"\[ir-parse\]"):
        _core.roundtrip_ir(STAGE_KERNEL.replace("dma_copy", "dma_cpy", 1))
    with pytest.raises(_core.KnitError, match=r"\[buffer\]"):
        _run(bad, np.zeros((128, 64), np.float32))
