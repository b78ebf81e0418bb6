"""The trn3 MX dtypes and instructions from Python (knit.isa.quantize_mx / nc_matmul_mx).

The reference is an independent NumPy implementation of the algorithm documented in
docs/architecture.md ("MX data"), rounding with ml_dtypes:

  * groups of 32 = 8 partitions x 4 consecutive free elements; scale exponent
    s = clip(floor(log2 amax) - (emax - 1), -127, 127) with emax 8 (e4m3fn) / 15 (e5m2),
    s = -127 for an all-zero group, NaN scale (0xFF) when the group holds NaN or inf;
  * element = x / 2^s clipped to +-max finite, rounded to nearest even by ml_dtypes;
  * word w of partition p packs elements 4w..4w+3 in bytes 0..3 (little endian);
  * nc_matmul_mx contracts over k = 4p + j with dequantized values fp8 * 2^(scale - 127).

Matmul tolerance: every dequantized operand is an fp8 value times a power of two, so each
product is exact in fp32 (4 + 4 significant bits, no under/overflow for the data used here);
only the K - 1 fp32 additions round. The classical bound for a sequential fp32 sum of K terms is
|out - exact| <= gamma_(K-1) * sum|a_k b_k| with gamma_n = n u / (1 - n u), u = 2^-24. The tests
use K * u * (|A|.T @ |B|), which dominates it for K <= 512.
"""
import importlib.util
import os
import runpy

import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes")

import knit  # noqa: E402
import knit as nki  # noqa: E402
import knit.isa as nisa  # noqa: E402
import knit.language as nl  # noqa: E402

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
U32 = 2.0**-24

# Knit packed dtype -> (ml_dtypes element type, emax of the element format)
FORMATS = {"float8_e4m3fn_x4": (ml_dtypes.float8_e4m3fn, 8), "float8_e5m2_x4": (ml_dtypes.float8_e5m2, 15)}


# ---- the NumPy reference ------------------------------------------------------------------------


def np_quantize_mx(x, packed):
    """x: [P, F] float values -> (uint32 words [P, F/4], uint8 scale codes [P/8, F/4])."""
    elem, emax = FORMATS[packed]
    x = np.asarray(x, dtype=np.float64)
    P, F = x.shape
    groups = x.reshape(P // 8, 8, F // 4, 4).transpose(0, 2, 1, 3)  # [G, W, 8 partitions, 4]
    amax = np.abs(groups).max(axis=(2, 3))
    finite = np.isfinite(groups).all(axis=(2, 3))
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.clip(np.floor(np.log2(amax)) - (emax - 1), -127, 127)
    s = np.where(amax == 0, -127, s)
    s = np.where(finite, s, 0).astype(np.int64)
    top = float(ml_dtypes.finfo(elem).max)
    with np.errstate(invalid="ignore"):
        scaled = np.clip(groups / np.exp2(s)[:, :, None, None], -top, top)
    scaled = np.where(finite[:, :, None, None], scaled, np.nan)
    codes = scaled.astype(elem).view(np.uint8)  # [G, W, 8, 4]
    words = codes.transpose(0, 2, 1, 3).reshape(P, F).copy().view("<u4")  # bytes 0..3 of word w
    scales = np.where(finite, s + 127, 255).astype(np.uint8)
    return words, scales


def np_dequantize(words, scales, element):
    """[P, W] words + [P/8, W] scale codes -> float64 [4P, W] in contraction order k = 4p + j."""
    P, W = words.shape
    if element == "float4_e2m1fn_x4":
        nibbles = (words[:, :, None] >> (4 * np.arange(4, dtype=np.uint32))) & 0xF
        values = nibbles.astype(np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float64)
    else:
        values = words.view(np.uint8).reshape(P, W, 4).view(FORMATS[element][0]).astype(np.float64)
    scale = np.exp2(np.repeat(scales.astype(np.float64) - 127, 8, axis=0))  # [P, W]
    scale[np.repeat(scales, 8, axis=0) == 255] = np.nan
    return (values * scale[:, :, None]).transpose(0, 2, 1).reshape(4 * P, W)


# ---- kernels ---------------------------------------------------------------------------------------


def quantize(x, packed="float8_e4m3fn_x4", scale_dtype=nl.float8_e8m0fnu, target="trn3"):
    @nki.jit(platform_target=target)
    def kernel(x):
        P, F = x.shape
        src = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=src, src=x)
        q = nl.ndarray((P, F // 4), dtype=packed, buffer=nl.sbuf)
        s = nl.ndarray((P // 8, F // 4), dtype=scale_dtype, buffer=nl.sbuf)
        nisa.quantize_mx(dst=q, src=src, dst_scale=s)
        q_out = nl.ndarray((P, F // 4), dtype=packed, buffer=nl.shared_hbm)
        s_out = nl.ndarray((P // 8, F // 4), dtype=scale_dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=q_out, src=q)
        nisa.dma_copy(dst=s_out, src=s)
        return q_out, s_out

    q, s = kernel(x)
    return q, s.view(np.uint8)


@nki.jit(platform_target="trn3")
def quantize_matmul(a, b, fa, fb):
    """a [P, 4M], b [P, 4N] -> fp32 [M, N] = dequant(quantize(a)).T @ dequant(quantize(b))."""
    P = a.shape[0]
    M, N = a.shape[1] // 4, b.shape[1] // 4
    tiles = []
    for x, packed, F in ((a, fa, M), (b, fb, N)):
        src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=src, src=x)
        q = nl.ndarray((P, F), dtype=packed, buffer=nl.sbuf)
        s = nl.ndarray((P // 8, F), dtype=nl.float8_e8m0fnu, buffer=nl.sbuf)
        nisa.quantize_mx(q, src, s)
        tiles += [q, s]
    acc = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul_mx(acc, tiles[0], tiles[2], tiles[1], tiles[3])
    res = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=res)
    return out


def assert_quantized_equal(x, packed, got_words, got_scales):
    want_words, want_scales = np_quantize_mx(np.asarray(x).astype(np.float64), packed)
    np.testing.assert_array_equal(got_scales, want_scales)
    nan_groups = np.repeat(want_scales == 255, 8, axis=0)  # [P, W]
    np.testing.assert_array_equal(got_words[~nan_groups], want_words[~nan_groups])
    elem = FORMATS[packed][0]
    nan_values = got_words[nan_groups].view(np.uint8).view(elem).astype(np.float32)
    assert np.all(np.isnan(nan_values)), "every element of a NaN group must be NaN"


# ---- dtypes ------------------------------------------------------------------------------------------


def test_dtype_objects():
    assert nl.float8_e4m3fn == ml_dtypes.float8_e4m3fn and nl.float8_e4m3fn == "float8_e4m3fn"
    assert nl.float8_e8m0fnu == ml_dtypes.float8_e8m0fnu
    for name in ("float8_e5m2_x4", "float8_e4m3fn_x4", "float4_e2m1fn_x4"):
        d = getattr(nl, name)
        assert d == name and d.itemsize == 4
        assert d != np.uint32  # stored in uint32 words, but not the same type
    assert knit._dtypes.to_dtype(np.uint32) == "uint32"


# ---- quantize_mx ------------------------------------------------------------------------------------


@pytest.mark.parametrize("src_dtype", [ml_dtypes.bfloat16, np.float16])
@pytest.mark.parametrize("packed", list(FORMATS))
def test_quantize_mx_random(packed, src_dtype):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((128, 64))
    # Spread the groups over many binades (float16 keeps its normal range).
    spread = 12 if src_dtype == np.float16 else 60
    x = (x * np.exp2(rng.integers(-spread, spread // 2, size=(128, 64)))).astype(src_dtype)
    q, s = quantize(x, packed)
    assert q.dtype == np.uint32 and q.shape == (128, 16) and s.shape == (16, 16)
    assert_quantized_equal(x, packed, q, s)


@pytest.mark.parametrize("packed", list(FORMATS))
def test_quantize_mx_edge_groups(packed):
    x = np.random.default_rng(2).uniform(-1, 1, size=(32, 32))
    g = lambda gi, w: (slice(8 * gi, 8 * gi + 8), slice(4 * w, 4 * w + 4))  # noqa: E731
    x[g(0, 0)] = 0.0                                     # all zero: scale 2^-127, elements 0
    x[g(0, 1)] = 0.5
    x[g(0, 1)][3, 2] = -8.0                              # amax exactly a power of two
    x[g(0, 2)] = 1e-3
    x[g(0, 2)][0, 0] = 1.9921875                         # top of the binade: x / scale rounds to 2^emax
    x[g(0, 3)] = 1.0
    x[g(0, 3)][7, 3] = 3.0e38                            # the largest bf16 scales
    x[g(1, 0)] = np.ldexp(1.0, -131)                     # bf16 subnormals: scale clamps at 2^-127
    x[g(1, 1)][2, 2] = np.nan                            # NaN group
    x[g(1, 2)][5, 0] = np.inf                            # inf group
    x[g(1, 3)] = np.ldexp(1.0, -np.arange(32).reshape(8, 4))  # small members underflow to subnormal / 0
    xb = x.astype(ml_dtypes.bfloat16)
    q, s = quantize(xb, packed)
    assert_quantized_equal(xb, packed, q, s)
    emax = FORMATS[packed][1]
    assert s[0, 0] == 0 and q[0:8, 0].tolist() == [0] * 8
    assert s[0, 1] == 127 + 3 - (emax - 1)
    assert s[0, 2] == 127 - (emax - 1)
    assert s[1, 0] == 0
    assert s[1, 1] == 255 and s[1, 2] == 255
    # The top element of group (0, 2) is exactly 2^emax after rounding: e4m3fn 256 = 0x78.
    top = q[0, 2] & 0xFF
    assert np.array([top], np.uint8).view(FORMATS[packed][0]).astype(np.float64)[0] == 2.0**emax


def test_quantize_mx_uint8_scales():
    x = np.full((32, 8), 3.0, dtype=ml_dtypes.bfloat16)
    _, s = quantize(x, "float8_e4m3fn_x4", scale_dtype=nl.uint8)
    assert s.tolist() == [[127 + 1 - 7] * 2] * 4


# ---- nc_matmul_mx -----------------------------------------------------------------------------------


@pytest.mark.parametrize("fa,fb", [("float8_e4m3fn_x4", "float8_e4m3fn_x4"), ("float8_e5m2_x4", "float8_e4m3fn_x4"),
                                   ("float8_e5m2_x4", "float8_e5m2_x4")])
def test_quantize_then_matmul_matches_float64(fa, fb):
    rng = np.random.default_rng(3)
    P, M, N = 128, 64, 96
    a = (rng.standard_normal((P, 4 * M)) * 3).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((P, 4 * N)).astype(ml_dtypes.bfloat16)
    out = quantize_matmul(a, b, fa, fb)
    A = np_dequantize(*np_quantize_mx(a.astype(np.float64), fa), fa)
    B = np_dequantize(*np_quantize_mx(b.astype(np.float64), fb), fb)
    ref = A.T @ B
    bound = 4 * P * U32 * (np.abs(A).T @ np.abs(B))
    err = np.abs(out - ref)
    worst = np.unravel_index(err.argmax(), err.shape)
    assert np.all(err <= bound), f"max error {err.max():.3g}, bound there {bound[worst]:.3g}"
    # Quantization really happened: the result differs from the unquantized product.
    assert np.abs(out - a.astype(np.float64).reshape(P, M, 4).transpose(0, 2, 1).reshape(4 * P, M).T
                  @ b.astype(np.float64).reshape(P, N, 4).transpose(0, 2, 1).reshape(4 * P, N)).max() > 0


def test_nc_matmul_mx_fp4_bitcast_words_and_accumulate():
    P, M, N = 64, 4, 6
    rng = np.random.default_rng(4)
    a = rng.integers(0, 2**16, size=(P, M), dtype=np.uint32)  # four fp4 nibbles per word
    b = rng.integers(0, 2**16, size=(P, N), dtype=np.uint32)
    sa = rng.integers(118, 136, size=(P // 8, M), dtype=np.uint8)
    sb = rng.integers(118, 136, size=(P // 8, N), dtype=np.uint8)

    @nki.jit(platform_target="trn3")
    def kernel(a, b, sa, sb):
        ins = []
        for x in (a, b, sa, sb):
            t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x)
            ins.append(t)
        a4, b4 = ins[0].view(nl.float4_e2m1fn_x4), ins[1].view(nl.float4_e2m1fn_x4)
        acc = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul_mx(acc, a4, b4, ins[2], ins[3])                    # overwrites (fresh PSUM)
        nisa.nc_matmul_mx(acc, a4, b4, ins[2], ins[3], accumulate=True)   # adds
        res = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=res)
        return out

    out = kernel(a, b, sa, sb)
    A = np_dequantize(a, sa, "float4_e2m1fn_x4")
    B = np_dequantize(b, sb, "float4_e2m1fn_x4")
    ref = 2 * (A.T @ B)
    np.testing.assert_array_less(np.abs(out - ref), 2 * 4 * P * U32 * (np.abs(A).T @ np.abs(B)) + 1e-300)


# ---- the example kernel -----------------------------------------------------------------------------


def _load_example():
    path = os.path.join(_REPO, "examples", "kernels", "python", "mx_matmul.py")
    spec = importlib.util.spec_from_file_location("knit_example_mx_matmul", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, path


@pytest.mark.parametrize("K,M,N", [(512, 128, 256), (128, 32, 64)])
def test_example_mx_matmul(K, M, N):
    module, _ = _load_example()
    rng = np.random.default_rng(K)
    lhsT = rng.standard_normal((K, M)).astype(ml_dtypes.bfloat16)
    rhs = rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
    out = module.mx_matmul_kernel(lhsT, rhs)
    # Against this file's quantizer: the kernel's [P, F, 4] tile is x[4p + j, f].
    P = K // 4
    mx_layout = lambda x: x.astype(np.float64).reshape(P, 4, -1).transpose(0, 2, 1).reshape(P, -1)  # noqa: E731
    A = np_dequantize(*np_quantize_mx(mx_layout(lhsT), "float8_e4m3fn_x4"), "float8_e4m3fn_x4")
    B = np_dequantize(*np_quantize_mx(mx_layout(rhs), "float8_e4m3fn_x4"), "float8_e4m3fn_x4")
    ref = A.T @ B
    assert np.all(np.abs(out - ref) <= K * U32 * (np.abs(A).T @ np.abs(B)))
    # And the example's own bound against the unquantized product.
    assert np.all(np.abs(out - module.reference(lhsT, rhs)) <= module.quantization_bound(lhsT, rhs))


def test_example_mx_matmul_main_block(capsys):
    _, path = _load_example()
    runpy.run_path(path, run_name="__main__")
    assert "mx_matmul: max abs error" in capsys.readouterr().out


# ---- rejections ----------------------------------------------------------------------------------------


def _rule(fn, *args):
    with pytest.raises(knit.KnitError) as info:
        fn(*args)
    return info.value


def test_quantize_mx_needs_trn3():
    err = _rule(quantize, np.ones((32, 8), ml_dtypes.bfloat16), "float8_e4m3fn_x4", nl.float8_e8m0fnu, "trn2")
    assert err.rule == "target" and "trn2" in str(err)


def test_quantize_mx_rejects_float32_source():
    err = _rule(quantize, np.ones((32, 8), np.float32))
    assert err.rule == "dtype" and "src has dtype float32" in str(err)


def test_quantize_mx_rejects_partitions_not_a_multiple_of_32():
    err = _rule(quantize, np.ones((16, 8), ml_dtypes.bfloat16))
    assert err.rule == "mx-shape" and "multiple of 32" in str(err)


def test_nc_matmul_mx_rejects_odd_stationary_and_wrong_target():
    a = np.ones((32, 4 * 3), ml_dtypes.bfloat16)
    err = _rule(quantize_matmul, a, np.ones((32, 8), ml_dtypes.bfloat16), "float8_e4m3fn_x4", "float8_e4m3fn_x4")
    assert err.rule == "matmul-shape" and "even" in str(err)

    @nki.jit(platform_target="trn2")
    def on_trn2(x):
        q = nl.ndarray((32, 2), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        s = nl.ndarray((4, 2), dtype=nl.float8_e8m0fnu, buffer=nl.sbuf)
        nisa.nc_matmul_mx(nl.ndarray((2, 2), dtype=nl.float32, buffer=nl.psum), q, q, s, s)

    err = _rule(on_trn2, np.ones((1, 1), np.float32))
    assert err.rule == "target" and "trn2" in str(err)


def test_packed_dtypes_are_rejected_elsewhere():
    @nki.jit(platform_target="trn3")
    def misuse(x):
        q = nl.ndarray((32, 8), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        nisa.memset(q, 0)
        nisa.tensor_scalar(dst=q, data=q, op0=nl.add, operand0=1.0)

    err = _rule(misuse, np.ones((1, 1), np.float32))
    assert err.rule == "packed-dtype" and "float8_e4m3fn_x4" in str(err) and "uint32" in str(err)
