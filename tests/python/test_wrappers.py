"""The nl.* convenience wrappers (python/knit/_wrappers.py) against NumPy.

Each case runs a small @knit.jit kernel on the simulator. Comparison policy:
  * exact (np.array_equal) wherever Knit and NumPy perform the same correctly rounded fp32
    operations: fp32 add/subtract/multiply/divide/sqrt/reciprocal, comparisons, min/max, copies,
    transposes, integer ops, and sums/products/matmuls of small integer-valued floats;
  * bf16 (and other narrow) outputs of one rounding are compared exactly with the fp32 NumPy
    result rounded by ml_dtypes;
  * transcendental activations are compared with a float64 NumPy reference at rtol 1e-6 (fp32
    libm results are within a few ulp; atol 1e-7 covers results that are ~0); functions built
    from several fp32 steps (gelu*, silu*, mish, softplus, erf_dx, cos, tan, softmax, rms_norm,
    mean, var) are compared at the looser tolerance given next to each;
  * a narrow output of a transcendental (two roundings) may differ by one unit in the last place.
"""
import math

import ml_dtypes
import numpy as np
import pytest

import knit
import knit.isa as nisa
import knit.language as nl
from knit import _wrappers

BF16 = ml_dtypes.bfloat16
F32 = np.float32
RNG = np.random.default_rng(1234)


def run(fn, *arrays, target=None):
    """Loads each array into SBUF, applies fn to the tiles and stores the result."""

    def body(*ins):
        r = fn(*[nl.load(a) for a in ins])
        out = nl.ndarray(r.shape, r.dtype, buffer=nl.shared_hbm)
        nl.store(out, r)
        return out

    kernel = knit.jit(body, platform_target=target) if target else knit.jit(body)
    return kernel(*arrays)


def rand(*shape, dtype=F32, lo=-2.0, hi=2.0):
    return RNG.uniform(lo, hi, size=shape).astype(dtype)


def ints(*shape, dtype=F32, lo=-8, hi=8):
    return RNG.integers(lo, hi, size=shape).astype(dtype)


def line_of(marker):
    """Line number of the (unique) line of this file that ends with the comment `# marker`."""
    with open(__file__) as f:
        hits = [i + 1 for i, text in enumerate(f) if text.rstrip().endswith("# " + marker)]
    assert len(hits) == 1, marker
    return hits[0]


def expect_error(kernel, args, rule, marker, target=None):
    with pytest.raises(knit.NkiValidationError) as info:
        (knit.jit(kernel, platform_target=target) if target else knit.jit(kernel))(*args)
    err = info.value
    assert err.rule == rule, str(err)
    assert err.line == line_of(marker), str(err)
    assert err.file == __file__
    return err


# ---- data movement ------------------------------------------------------------------------------


def test_load_store_copy_roundtrip():
    a = rand(16, 24)
    np.testing.assert_array_equal(run(lambda x: x, a), a)
    np.testing.assert_array_equal(run(nl.copy, a), a)


def test_load_and_copy_convert_dtype_with_one_rounding():
    a = rand(8, 32)

    @knit.jit
    def kernel(x):
        t = nl.load(x, dtype=nl.bfloat16)
        c = nl.copy(t, dtype=nl.float32)
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
        nl.store(out, c)
        return out

    np.testing.assert_array_equal(kernel(a), a.astype(BF16).astype(F32))


def test_store_accepts_psum_values():
    x, y = ints(4, 8), ints(4, 16)

    @knit.jit
    def kernel(x, y):
        acc = nl.matmul(nl.load(x), nl.load(y), transpose_x=True)  # a PSUM tile
        out = nl.ndarray(acc.shape, acc.dtype, buffer=nl.shared_hbm)
        nl.store(out, acc)
        return out

    np.testing.assert_array_equal(kernel(x, y), x.T @ y)


@pytest.mark.parametrize("dtype", [BF16, F32, np.int32])
def test_load_transpose2d(dtype):
    a = ints(24, 40, dtype=dtype)  # 2-byte dtypes use dma_transpose, others the Tensor Engine

    @knit.jit
    def kernel(x):
        t = nl.load_transpose2d(x)
        out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
        nl.store(out, t)
        return out

    r = kernel(a)
    assert r.dtype == dtype
    np.testing.assert_array_equal(r, a.T)


def test_transpose_and_dtype():
    a = rand(32, 64)
    np.testing.assert_array_equal(run(nl.transpose, a), a.T)
    r = run(lambda x: nl.transpose(x, dtype=nl.bfloat16), a)
    assert r.dtype == BF16
    np.testing.assert_array_equal(r, a.T.astype(BF16))
    x, y = ints(32, 64), ints(32, 16)  # a PSUM tile is copied to SBUF before the Tensor Engine transpose
    np.testing.assert_array_equal(run(lambda s, m: nl.transpose(nl.matmul(s, m, transpose_x=True)), x, y), (x.T @ y).T)


def test_load_transpose2d_with_dtype():
    a = rand(16, 24, dtype=np.float16)

    @knit.jit
    def kernel(x):
        t = nl.load_transpose2d(x, dtype=nl.float32)
        out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
        nl.store(out, t)
        return out

    r = kernel(a)
    assert r.dtype == F32
    np.testing.assert_array_equal(r, a.T.astype(F32))


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_matmul(dtype):
    # Small integers: every product and partial sum is exact in fp32, so the result is too.
    x, y = ints(32, 48, dtype=dtype), ints(32, 64, dtype=dtype)
    r = run(lambda a, b: nl.matmul(a, b, transpose_x=True), x, y)
    assert r.dtype == F32
    np.testing.assert_array_equal(r, x.astype(F32).T @ y.astype(F32))
    xm = ints(48, 32, dtype=dtype)  # [M, K]: transposed on the Tensor Engine first
    np.testing.assert_array_equal(run(nl.matmul, xm, y), xm.astype(F32) @ y.astype(F32))


def test_broadcast_to_free_dims_is_a_view():
    col, row = rand(16, 1), rand(1, 24)

    @knit.jit
    def kernel(c, r):
        ct = nl.load(c)
        wide = nl.broadcast_to(ct, (16, 24))  # stride-0 view of the column
        rows = nl.broadcast_to(nl.load(r), (16, 24))  # partition broadcast: one DMA
        hbm_rows = nl.load(nl.broadcast_to(r, (16, 24)))  # stride-0 HBM view, then a load
        s = nl.add(nl.add(wide, rows), hbm_rows)
        out = nl.ndarray(s.shape, s.dtype, buffer=nl.shared_hbm)
        nl.store(out, s)
        return out

    np.testing.assert_array_equal(kernel(col, row), (col + row) + row)


@pytest.mark.parametrize("dtype", [np.int32, BF16, np.uint8])
def test_broadcast_to_partitions_is_bit_exact(dtype):
    row = ints(1, 2, 5, dtype=dtype, lo=0)
    r = run(lambda t: nl.broadcast_to(t, (64, 2, 5)), row)
    assert r.dtype == dtype
    np.testing.assert_array_equal(r, np.broadcast_to(row, (64, 2, 5)))


def test_broadcast_to_with_dtype_and_expand_dims():
    col = rand(8, 1)
    r = run(lambda t: nl.broadcast_to(t, (8, 6), dtype=nl.bfloat16), col)
    assert r.dtype == BF16
    np.testing.assert_array_equal(r, np.broadcast_to(col, (8, 6)).astype(BF16))
    a = rand(8, 6)
    r = run(lambda t: nl.copy(nl.expand_dims(t, 1)), a)
    assert r.shape == (8, 1, 6)
    np.testing.assert_array_equal(r, a[:, None, :])
    r = run(lambda t: nl.copy(nl.expand_dims(t, (-1, 2))), a)
    assert r.shape == (8, 6, 1, 1)


def test_gather_flattened():
    data = rand(8, 3, 4)
    idx = RNG.integers(0, 12, size=(8, 5)).astype(np.uint32)
    r = run(nl.gather_flattened, data, idx)
    np.testing.assert_array_equal(r, np.take_along_axis(data.reshape(8, 12), idx.astype(np.int64), axis=1))


# ---- element-wise binary ------------------------------------------------------------------------


def _fp(v):
    return v.astype(F32)


BINARY_EXACT = {  # fp32 tile (op) fp32 tile: one correctly rounded fp32 operation, or exact
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "maximum": np.maximum, "minimum": np.minimum, "fmod": np.fmod, "mod": np.mod,
    "equal": lambda a, b: _fp(a == b), "not_equal": lambda a, b: _fp(a != b), "less": lambda a, b: _fp(a < b),
    "less_equal": lambda a, b: _fp(a <= b), "greater": lambda a, b: _fp(a > b),
    "greater_equal": lambda a, b: _fp(a >= b),
    "logical_and": lambda a, b: _fp((a != 0) & (b != 0)), "logical_or": lambda a, b: _fp((a != 0) | (b != 0)),
    "logical_xor": lambda a, b: _fp((a != 0) ^ (b != 0)),
}


@pytest.mark.parametrize("name", sorted(BINARY_EXACT))
def test_binary_tile_tile_fp32_exact(name):
    a, b = rand(16, 32), rand(16, 32)
    a[0, :8] = b[0, :8]  # equal elements for the comparisons
    a[1, :4] = 0.0
    b[2, :4] = 0.0 if name in ("logical_and", "logical_or", "logical_xor") else 1.0
    r = run(getattr(nl, name), a, b)
    assert r.dtype == F32
    np.testing.assert_array_equal(r, BINARY_EXACT[name](a, b).astype(F32))


def test_power_tile_tile_and_scalar():
    a, b = rand(8, 16, lo=0.1, hi=3.0), rand(8, 16, lo=-2.0, hi=2.0)
    ref = np.power(a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(run(nl.power, a, b), ref, rtol=1e-6)  # libm powf: within 1 ulp
    np.testing.assert_allclose(run(lambda x: x ** 2.0, a), a.astype(np.float64) ** 2, rtol=1e-6)


@pytest.mark.parametrize("name,ref", [("abs_max", lambda a, b: np.where(np.abs(a) > np.abs(b), a, b)),
                                      ("abs_min", lambda a, b: np.where(np.abs(a) < np.abs(b), a, b))])
def test_abs_max_abs_min_on_trn3(name, ref):
    a, b = rand(8, 16), rand(8, 16)
    b[0, :3] = -a[0, :3]  # ties return y
    np.testing.assert_array_equal(run(getattr(nl, name), a, b, target="trn3"), ref(a, b))


def test_scalar_operands_on_either_side():
    a = rand(8, 16, lo=0.5, hi=3.0)
    np.testing.assert_array_equal(run(lambda x: nl.subtract(x, 3.0), a), a - F32(3))
    np.testing.assert_array_equal(run(lambda x: nl.subtract(3.0, x), a), F32(3) - a)
    np.testing.assert_array_equal(run(lambda x: nl.divide(2.0, x), a), F32(2) / a)
    np.testing.assert_array_equal(run(lambda x: nl.less(1.0, x), a), _fp(1 < a))
    np.testing.assert_array_equal(run(lambda x: 1.5 - x * 2.0 + 1.0, a), (F32(1.5) - a * 2) + 1)


def test_column_operands_on_either_side():
    a, c = rand(8, 16), rand(8, 1, lo=0.5, hi=2.0)
    np.testing.assert_array_equal(run(nl.add, a, c), a + c)
    np.testing.assert_array_equal(run(nl.subtract, c, a), c - a)
    np.testing.assert_array_equal(run(nl.divide, c, a), c / a)
    a3 = rand(8, 2, 5)
    np.testing.assert_array_equal(run(nl.multiply, a3, c), a3 * c[:, :, None])


def test_dunders_use_the_wrappers():
    a, b = rand(8, 16), rand(8, 16, lo=0.5, hi=2.0)
    np.testing.assert_array_equal(run(lambda x, y: (x + y) * y - x / y, a, b), (a + b) * b - a / b)
    np.testing.assert_array_equal(run(lambda x, y: -x, a, b), -a)
    np.testing.assert_array_equal(run(lambda x, y: x > y, a, b), _fp(a > b))


def test_bf16_outputs_round_once():
    a, b = rand(16, 32, dtype=BF16), rand(16, 32, dtype=BF16)
    for op, ref in [(nl.add, np.add), (nl.multiply, np.multiply), (nl.divide, np.divide)]:
        r = run(op, a, b)
        assert r.dtype == BF16
        np.testing.assert_array_equal(r, ref(a.astype(F32), b.astype(F32)).astype(BF16))
    r = run(lambda x, y: nl.multiply(x, y, dtype=nl.float32), a, b)
    assert r.dtype == F32
    np.testing.assert_array_equal(r, a.astype(F32) * b.astype(F32))


def test_int32_add_is_exact():
    a = np.array([[2 ** 30 + 3, -(2 ** 30) - 7, 123456789, 5]] * 4, dtype=np.int32)
    b = np.array([[2 ** 29 + 1, 11, 987654321, -5]] * 4, dtype=np.int32)
    r = run(nl.add, a, b)
    assert r.dtype == np.int32
    np.testing.assert_array_equal(r, a + b)


# (tile dtype, other operand: a dtype for a second tile or a Python/NumPy scalar, expected dtype)
PROMOTION = [
    (F32, BF16, F32), (np.float16, BF16, F32), (BF16, np.int32, BF16), (np.int8, np.float16, np.float16),
    (ml_dtypes.float8_e4m3, np.float16, np.float16), (ml_dtypes.float8_e4m3, BF16, BF16),
    (ml_dtypes.float8_e4m3, ml_dtypes.float8_e5m2, BF16), (np.int16, np.int32, np.int32),
    (np.uint8, np.uint16, np.uint16), (np.uint16, np.int32, np.int32), (np.int8, np.uint8, np.int16),
    (np.int8, np.uint16, np.int32), (np.int32, np.uint32, F32),
    (BF16, 1.5, F32), (np.float16, 1.25, F32), (BF16, 2, BF16), (np.int8, 2, np.int32), (np.uint8, True, np.uint8),
    (np.int32, 1.5, F32), (F32, np.float16(2), F32), (np.float16, np.float16(2), np.float16),
    (np.int8, np.int8(3), np.int8),
]


@pytest.mark.parametrize("tile_dtype,other,expected", PROMOTION,
                         ids=[f"{np.dtype(a).name}-{b if not isinstance(b, type) else np.dtype(b).name}"
                              for a, b, _ in PROMOTION])
def test_dtype_promotion(tile_dtype, other, expected):
    a = ints(8, 16, dtype=tile_dtype, lo=0, hi=6)
    if isinstance(other, type):
        b = ints(8, 16, dtype=other, lo=0, hi=6)
        r = run(nl.add, a, b)
        ref = a.astype(np.float64) + b.astype(np.float64)
    else:
        r = run(lambda x: nl.add(x, other), a)
        ref = a.astype(np.float64) + float(other)
    assert r.dtype == expected
    np.testing.assert_array_equal(r, ref.astype(F32).astype(expected))  # small values: one rounding


def test_explicit_dtype_and_comparison_dtypes():
    a, b = rand(8, 16, dtype=BF16), rand(8, 16, dtype=BF16)
    r = run(lambda x, y: nl.greater(x, y), a, b)
    assert r.dtype == BF16
    np.testing.assert_array_equal(r, (a > b).astype(BF16))
    r = run(lambda x, y: nl.greater(x, y, dtype=nl.uint8), a, b)
    assert r.dtype == np.uint8
    np.testing.assert_array_equal(r, (a > b).astype(np.uint8))
    r = run(lambda x: nl.add(x, 1.5, dtype=nl.bfloat16), a)
    assert r.dtype == BF16
    np.testing.assert_array_equal(r, (a.astype(F32) + F32(1.5)).astype(BF16))


def test_bitwise_and_shifts():
    a = RNG.integers(-2 ** 31, 2 ** 31 - 1, size=(8, 16), dtype=np.int64).astype(np.int32)
    b = RNG.integers(-2 ** 31, 2 ** 31 - 1, size=(8, 16), dtype=np.int64).astype(np.int32)
    np.testing.assert_array_equal(run(nl.bitwise_and, a, b), a & b)
    np.testing.assert_array_equal(run(nl.bitwise_or, a, b), a | b)
    np.testing.assert_array_equal(run(nl.bitwise_xor, a, b), a ^ b)
    np.testing.assert_array_equal(run(lambda x: x & 0xFF, a), a & 0xFF)
    np.testing.assert_array_equal(run(lambda x: nl.left_shift(x, 3), a), a << 3)
    # logical right shift: on the 32-bit pattern
    np.testing.assert_array_equal(run(lambda x: nl.right_shift(x, 5), a), (a.view(np.uint32) >> 5).view(np.int32))
    np.testing.assert_array_equal(run(nl.invert, a), ~a)
    u = ints(8, 16, dtype=np.uint8, lo=0, hi=255)
    r = run(lambda x: x & 0x0F, u)  # weak int -> int32 (NKI's type promotion table)
    assert r.dtype == np.int32
    np.testing.assert_array_equal(r, (u & 0x0F).astype(np.int32))


# ---- element-wise unary ------------------------------------------------------------------------


def _np64(f):
    return lambda a: f(a.astype(np.float64))


_erf = np.vectorize(math.erf)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _phi(x):
    return 0.5 * (1.0 + _erf(x / math.sqrt(2.0)))


UNARY_EXACT = {  # one correctly rounded fp32 operation (or exact): equal bits
    "abs": np.abs, "negative": np.negative, "square": np.square, "sqrt": np.sqrt, "reciprocal": np.reciprocal,
    "rsqrt": lambda a: F32(1) / np.sqrt(a), "relu": lambda a: np.maximum(a, F32(0)), "sign": np.sign,
    "logical_not": lambda a: _fp(a == 0), "ceil": np.ceil, "floor": np.floor, "trunc": np.trunc,
}
# name -> (float64 reference, input range, rtol). rtol 1e-6 = a few fp32 ulp (libm-quality);
# composite formulas evaluated step by step in fp32 get 1e-5.
UNARY_CLOSE = {
    "exp": (np.exp, (-4, 4), 1e-6), "log": (np.log, (0.01, 10), 1e-6), "sin": (np.sin, (-3, 3), 1e-6),
    "arctan": (np.arctan, (-1.5, 1.5), 1e-6), "tanh": (np.tanh, (-3, 3), 1e-6), "erf": (_erf, (-2, 2), 1e-6),
    "cos": (np.cos, (-3, 3), 1e-6), "tan": (np.tan, (-1.5, 1.5), 1e-6), "sigmoid": (_sigmoid, (-5, 5), 1e-6),
    "silu": (lambda x: x * _sigmoid(x), (-5, 5), 1e-5),
    "silu_dx": (lambda x: _sigmoid(x) * (1 + x * (1 - _sigmoid(x))), (-5, 5), 1e-5),
    "gelu": (lambda x: x * _phi(x), (-3, 3), 1e-5),
    "gelu_dx": (lambda x: _phi(x) + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi), (-3, 3), 1e-5),
    "gelu_apprx_tanh": (lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
                        (-3, 3), 1e-5),
    "gelu_apprx_sigmoid": (lambda x: x * _sigmoid(1.702 * x), (-3, 3), 1e-5),
    "gelu_apprx_sigmoid_dx": (lambda x: _sigmoid(1.702 * x) * (1 + 1.702 * x * (1 - _sigmoid(1.702 * x))),
                              (-3, 3), 1e-5),
    "softplus": (lambda x: np.log1p(np.exp(x)), (-4, 4), 1e-5),
    "mish": (lambda x: x * np.tanh(np.log1p(np.exp(x))), (-3, 3), 1e-5),
    "erf_dx": (lambda x: 2 / math.sqrt(math.pi) * np.exp(-x * x), (-2, 2), 1e-5),
}


@pytest.mark.parametrize("name", sorted(UNARY_EXACT))
def test_unary_exact(name):
    a = rand(16, 32, lo=-5, hi=5)
    a[0, :8] = [0.0, -0.5, 0.5, 2.0, -2.0, 1e-10, -1e-10, 8388607.5]
    if name in ("sqrt", "rsqrt", "reciprocal"):
        a = np.abs(a) + F32(0.01)
    r = run(getattr(nl, name), a)
    assert r.dtype == F32
    np.testing.assert_array_equal(r, UNARY_EXACT[name](a).astype(F32))


@pytest.mark.parametrize("name", sorted(UNARY_CLOSE))
def test_unary_transcendental(name):
    ref, (lo, hi), rtol = UNARY_CLOSE[name]
    a = rand(16, 64, lo=lo, hi=hi)
    r = run(getattr(nl, name), a)
    assert r.dtype == F32
    np.testing.assert_allclose(r, ref(a.astype(np.float64)), rtol=rtol, atol=1e-7)


def test_unary_keeps_input_dtype_or_takes_dtype():
    a = rand(8, 32, dtype=BF16)
    r = run(nl.exp, a)
    assert r.dtype == BF16  # two roundings (fp32 exp, then bf16): within one bf16 ulp
    np.testing.assert_allclose(r.astype(F32), np.exp(a.astype(np.float64)), rtol=2 ** -8)
    r = run(lambda x: nl.exp(x, dtype=nl.float32), a)
    assert r.dtype == F32
    np.testing.assert_allclose(r, np.exp(a.astype(np.float64)), rtol=1e-6)
    np.testing.assert_array_equal(run(nl.square, a), (a.astype(F32) ** 2).astype(BF16))  # one rounding


def test_op_objects_still_work_as_isa_operators():
    a = rand(8, 16)

    @knit.jit
    def kernel(x):
        t = nl.load(x)
        y = nl.ndarray(t.shape, nl.float32)
        nisa.activation(y, nl.copy, t)  # nl.copy: the identity activation, and nl.copy(x) the wrapper
        z = nl.ndarray(t.shape, nl.float32)
        nisa.tensor_tensor(z, y, nl.copy(t), nl.add)
        out = nl.ndarray(t.shape, nl.float32, buffer=nl.shared_hbm)
        nl.store(out, z)
        return out

    np.testing.assert_array_equal(kernel(a), a + a)


def test_public_names():
    for name in _wrappers.__all__:
        assert callable(getattr(nl, name)), name
    assert isinstance(nl.maximum, nl.Op) and not isinstance(nl.max, nl.Op)
    operator_only = {"prelu", "bypass", "average"}
    for name, op in nl.OPS.items():
        assert (op.fn is not None) == (name not in operator_only), name


# ---- reductions -------------------------------------------------------------------------------


REDUCTIONS = {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize("axis,keepdims,shape", [(2, False, (8, 3)), (-1, True, (8, 3, 1)),
                                                 ((1, 2), False, (8, 1)), ((2, 1), True, (8, 1, 1))])
def test_reductions(name, axis, keepdims, shape):
    a = ints(8, 3, 4, lo=-3, hi=4)  # small integers: every fp32 fold is exact
    r = run(lambda x: getattr(nl, name)(x, axis, keepdims=keepdims), a)
    assert r.shape == shape and r.dtype == F32
    np.testing.assert_array_equal(r, REDUCTIONS[name](a, axis=axis, keepdims=True).reshape(shape))


def test_reduction_dtype_and_2d_shape():
    a = rand(16, 64, dtype=BF16)
    r = run(lambda x: nl.sum(x, axis=1, dtype=nl.float32), a)
    assert r.shape == (16, 1) and r.dtype == F32  # on-chip results keep >= 2 dims
    np.testing.assert_allclose(r[:, 0], a.astype(np.float64).sum(axis=1), rtol=1e-6, atol=1e-6)
    r = run(lambda x: nl.max(x, axis=1), a)
    assert r.dtype == BF16
    np.testing.assert_array_equal(r[:, 0], a.max(axis=1))


def test_all():
    a = ints(8, 3, 4, lo=0, hi=3)
    a[0] = 1.0
    r = run(lambda x: nl.all(x, axis=(1, 2)), a)
    np.testing.assert_array_equal(r[:, 0], np.all(a != 0, axis=(1, 2)).astype(F32))
    b = ints(8, 3, 1, lo=0, hi=3)  # one-element reduction: still 0/1
    np.testing.assert_array_equal(run(lambda x: nl.all(x, axis=2), b), (b[:, :, 0] != 0).astype(F32))


def test_mean_and_var():
    a = rand(16, 4, 32)
    # mean: sequential fp32 sum times an fp32 1/n; var: E[x^2] - E[x]^2 in fp32 (cancellation).
    r = run(lambda x: nl.mean(x, axis=(1, 2)), a)
    np.testing.assert_allclose(r[:, 0], a.astype(np.float64).mean(axis=(1, 2)), rtol=1e-5, atol=1e-6)
    r = run(lambda x: nl.mean(x, axis=2, keepdims=True, dtype=nl.bfloat16), a)
    assert r.shape == (16, 4, 1) and r.dtype == BF16
    np.testing.assert_allclose(r.astype(F32), a.astype(np.float64).mean(axis=2, keepdims=True), rtol=2 ** -8,
                               atol=1e-3)
    r = run(lambda x: nl.var(x, axis=-1), a)
    assert r.shape == (16, 4, 1)  # G2: var keeps the reduced dims
    np.testing.assert_allclose(r, a.astype(np.float64).var(axis=-1, keepdims=True), rtol=1e-5, atol=1e-6)


# ---- composites -------------------------------------------------------------------------------


def _softmax64(a, axis):
    a = a.astype(np.float64)
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def test_softmax():
    a = rand(32, 128, lo=-6, hi=6)
    np.testing.assert_allclose(run(nl.softmax, a), _softmax64(a, -1), rtol=2e-6)  # exp + 2 fp32 roundings
    a3 = rand(16, 3, 20)
    np.testing.assert_allclose(run(lambda x: nl.softmax(x, axis=2), a3), _softmax64(a3, 2), rtol=2e-6)
    np.testing.assert_allclose(run(lambda x: nl.softmax(x, axis=(1, 2)), a3), _softmax64(a3, (1, 2)), rtol=2e-6)
    b = rand(16, 64, dtype=BF16)
    r = run(nl.softmax, b)
    assert r.dtype == BF16
    np.testing.assert_allclose(r.astype(F32), _softmax64(b, -1), rtol=2 ** -8)


def _rms_norm64(x, w, axis, n, eps=1e-6):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).sum(axis=axis, keepdims=True) / n + eps) * w.astype(np.float64)


def test_rms_norm_weight_tile():
    x, w = rand(16, 64), rand(16, 64)
    r = run(lambda a, b: nl.rms_norm(a, b, axis=1, n=64), x, w)
    np.testing.assert_allclose(r, _rms_norm64(x, w, 1, 64), rtol=1e-5)


@pytest.mark.parametrize("w_shape", [(64,), (1, 64)])
def test_rms_norm_hbm_weight_is_broadcast_to_partitions(w_shape):
    x, w = rand(32, 64, dtype=BF16), rand(*w_shape)

    @knit.jit
    def kernel(x, w):
        r = nl.rms_norm(nl.load(x), w, axis=1, n=64, epsilon=1e-3, dtype=nl.float32)
        out = nl.ndarray(r.shape, r.dtype, buffer=nl.shared_hbm)
        nl.store(out, r)
        return out

    r = kernel(x, w)
    assert r.dtype == F32
    np.testing.assert_allclose(r, _rms_norm64(x, w.reshape(1, 64), 1, 64, 1e-3), rtol=1e-5)


def test_where():
    a, b = rand(16, 32), rand(16, 32)
    c = rand(16, 1)

    @knit.jit
    def kernel(a, b, c):
        x, y, col = nl.load(a), nl.load(b), nl.load(c)
        cond = nl.greater(x, y)
        r1 = nl.where(cond, x, y)  # max
        r2 = nl.where(cond, col, -1.0)  # column and number
        r3 = nl.where(cond, 2, y)  # weak int with fp32: fp32
        outs = []
        for r in (r1, r2, r3):
            o = nl.ndarray(r.shape, r.dtype, buffer=nl.shared_hbm)
            nl.store(o, r)
            outs.append(o)
        return tuple(outs)

    r1, r2, r3 = kernel(a, b, c)
    np.testing.assert_array_equal(r1, np.where(a > b, a, b))
    np.testing.assert_array_equal(r2, np.where(a > b, np.broadcast_to(c, a.shape), F32(-1)))
    np.testing.assert_array_equal(r3, np.where(a > b, F32(2), b))
    assert r3.dtype == F32


@pytest.mark.parametrize("target", ["trn1", "trn3"])
def test_composites_are_valid_on_every_target(target):
    # Same instructions on every generation (no immediate activation bias, which trn1 lacks).
    a, b = rand(16, 32, lo=-3, hi=3), rand(32, 16)
    for fn in (nl.softmax, nl.cos, nl.tan, nl.floor, lambda x: nl.var(x, 1), lambda x: nl.rms_norm(x, x, 1, 32),
               lambda x: nl.where(x > 0, x, 0.0), lambda x: nl.broadcast_to(x[0:1, :], (16, 32))):
        np.testing.assert_array_equal(run(fn, a, target=target), run(fn, a))
    np.testing.assert_array_equal(run(nl.matmul, a, b, target=target), run(nl.matmul, a, b))


# ---- errors -------------------------------------------------------------------------------


def test_error_broadcast_mismatch():
    def kernel(a, b):
        x, y = nl.load(a), nl.load(b)
        nl.add(x, y)  # MARK-broadcast

    err = expect_error(kernel, (rand(8, 16), rand(8, 4)), "broadcast", "MARK-broadcast")
    assert "(8, 16)" in err.message and "(8, 4)" in err.message


def test_error_reduce_axis_0():
    def kernel(a):
        x = nl.load(a)
        nl.sum(x, axis=0)  # MARK-axis0

    expect_error(kernel, (rand(8, 16),), "reduce-axis", "MARK-axis0")


def test_error_reduce_non_trailing_axis():
    def kernel(a):
        x = nl.load(a)
        nl.max(x, axis=1)  # MARK-trailing

    expect_error(kernel, (rand(8, 3, 4),), "reduce-axis", "MARK-trailing")


def test_error_load_from_sbuf_and_store_to_sbuf():
    def kernel(a):
        x = nl.load(a)
        nl.load(x)  # MARK-load

    expect_error(kernel, (rand(8, 16),), "buffer", "MARK-load")

    def kernel2(a):
        x = nl.load(a)
        nl.store(nl.ndarray(x.shape, x.dtype), x)  # MARK-store

    expect_error(kernel2, (rand(8, 16),), "buffer", "MARK-store")


def test_error_from_the_verifier_points_at_the_kernel_line():
    def kernel(a):
        x = nl.load(a)
        nl.bitwise_and(x, x)  # MARK-bitvec

    expect_error(kernel, (rand(8, 16),), "dtype", "MARK-bitvec")

    def kernel2(a):
        x = nl.load(a)
        nl.abs_max(x, x)  # MARK-gen

    err = expect_error(kernel2, (rand(8, 16),), "target", "MARK-gen", target="trn2")
    assert "abs_max" in str(err) or "trn3" in str(err) or "gen" in str(err)


def test_error_broadcast_to_bad_shape_and_operator_only_calls():
    def kernel(a):
        x = nl.load(a)
        nl.broadcast_to(x, (8, 3, 2))  # MARK-bto

    expect_error(kernel, (rand(8, 2),), "broadcast", "MARK-bto")

    def kernel2(a):
        x = nl.load(a)
        nl.prelu(x)  # MARK-prelu

    expect_error(kernel2, (rand(8, 2),), "unsupported", "MARK-prelu")
