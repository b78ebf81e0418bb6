"""NKI 0.6 tensor_scalar_cumulative (a Vector Engine row scan with the accumulator) and activate2
(trn3 Scalar Engine: a tensor-scalar stage, an activation with nl.prelu's relu_param, a reduction
into the ScalarE accumulator), and the 0.4 ALU-operator additions (abs_max / abs_min, square /
relu as tensor_scalar op0, prelu only in activate2). Against the additions reference's worked
examples and NumPy models, on the reference and native backends (the same bytes)."""
import numpy as np
import pytest

import knit as nki
import knit.isa as nisa
import knit.language as nl
from nki06_support import BF16, run_both, sbuf, to_hbm

F32 = np.float32


def column(v):
    """An immediate as it is, an HBM [P, 1] tensor copied into SBUF."""
    return v if v is None or isinstance(v, (int, float)) else sbuf(v)


# ---- tensor_scalar_cumulative -------------------------------------------------------------------

def cumulative_model(x, op0, imm0, op1, start):
    """reg = op1(op0(x, imm0), reg) per row in fp32, from `start` (one value per row)."""
    ops = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "maximum": np.maximum,
           "minimum": np.minimum}
    rows = x.reshape(x.shape[0], -1).astype(F32)
    out = np.empty_like(rows)
    reg = np.array(start, F32).reshape(-1).copy()
    imm0 = np.broadcast_to(np.asarray(imm0, F32).reshape(-1), (x.shape[0],))
    for p in range(rows.shape[0]):
        for j in range(rows.shape[1]):
            reg[p] = ops[op1](ops[op0](rows[p, j], imm0[p]), reg[p])
            out[p, j] = reg[p]
    return out.reshape(x.shape), reg


@nki.jit(platform_target="trn2")
def worked_scans(a, b, c):
    ta, tb, tc = sbuf(a), sbuf(b), sbuf(c)
    ya = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
    yb = nl.ndarray(b.shape, nl.float32, buffer=nl.sbuf)
    yc = nl.ndarray(c.shape, nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_cumulative(dst=ya, src=ta, op0=nl.multiply, op1=nl.add, imm0=2.0,
                                  reduce_cmd=nisa.reduce_cmd.reset_reduce)
    nisa.tensor_scalar_cumulative(dst=yb, src=tb, op0=nl.add, op1=nl.add, imm0=0.0,
                                  reduce_cmd=nisa.reduce_cmd.reduce)
    nisa.tensor_scalar_cumulative(dst=yc, src=tc, op0=nl.add, op1=nl.maximum, imm0=0.0, imm1=10.0,
                                  reduce_cmd=nisa.reduce_cmd.load_reduce)
    return to_hbm(ya), to_hbm(yb), to_hbm(yc)


def test_cumulative_worked_example(monkeypatch):
    ya, yb, yc = run_both(monkeypatch, worked_scans, np.array([[1, 2, 3, 4]], F32), np.array([[1, 1]], F32),
                          np.array([[5, 12, 7]], F32))
    np.testing.assert_array_equal(ya, [[2, 6, 12, 20]])
    np.testing.assert_array_equal(yb, [[21, 22]])  # goes on from the accumulator the first left
    np.testing.assert_array_equal(yc, [[10, 12, 12]])


@nki.jit(platform_target="trn3")
def scan(x, imm0, op0, op1, dtype, imm1=None, cmd=nisa.reduce_cmd.reset_reduce):
    t = sbuf(x, dtype)
    s0 = column(imm0)
    y = nl.ndarray(x.shape, dtype, buffer=nl.sbuf)
    nisa.tensor_scalar_cumulative(dst=y, src=t, op0=op0, op1=op1, imm0=s0, imm1=imm1, reduce_cmd=cmd)
    y32 = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=y32, src=y)
    return to_hbm(y32)


@pytest.mark.parametrize("shape, dtype, op0, op1", [
    ((128, 64), nl.float32, "multiply", "add"),
    ((32, 3, 5), nl.float32, "subtract", "subtract"),
    ((16, 40), nl.bfloat16, "add", "maximum"),
    ((8, 12), nl.float32, "maximum", "multiply"),
    ((64, 9), nl.int16, "add", "minimum"),
])
def test_cumulative_matches_numpy(monkeypatch, shape, dtype, op0, op1):
    rng = np.random.default_rng(shape[0])
    x = rng.integers(-4, 5, size=shape).astype(F32) if dtype == nl.int16 else rng.standard_normal(shape).astype(F32)
    imm0 = (rng.standard_normal((shape[0], 1)) * 0.5).astype(F32)
    (y,) = run_both(monkeypatch, scan, x, imm0, getattr(nl, op0), getattr(nl, op1), dtype)
    np_dtype = {nl.float32: F32, nl.bfloat16: BF16, nl.int16: np.int16}[dtype]
    x_in = x.astype(np_dtype).astype(F32)
    identity = {"add": 0, "subtract": 0, "multiply": 1, "maximum": -np.inf, "minimum": np.inf}[op1]
    want, _ = cumulative_model(x_in, op0, imm0, op1, np.full(shape[0], identity, F32))
    if dtype == nl.int16:
        want = np.clip(np.rint(want), -32768, 32767)
    np.testing.assert_array_equal(y, want.astype(np_dtype).astype(F32))


def test_cumulative_subtract_is_an_alternating_sum(monkeypatch):
    (y,) = run_both(monkeypatch, scan, np.array([[1, 2, 3]], F32), 0.0, nl.add, nl.subtract, nl.float32)
    np.testing.assert_array_equal(y, [[1, 1, 2]])  # reg = t - reg


def cumulative_kernel(src_dtype=nl.float32, op0=nl.add, op1=nl.add, cmd=nisa.reduce_cmd.reset_reduce, imm1=None):
    @nki.jit
    def k(x):
        t = nl.ndarray((4, 8), src_dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=1)
        nisa.tensor_scalar_cumulative(dst=t, src=t, op0=op0, op1=op1, imm0=1.0, imm1=imm1, reduce_cmd=cmd)
        return None
    return k


@pytest.mark.parametrize("args, message", [
    ({"op1": nl.divide}, "op1 'divide' cannot accumulate"),
    ({"op0": nl.bitwise_and, "src_dtype": nl.int16}, "op0 'bitwise_and' is not allowed"),
    ({"src_dtype": nl.int32}, "dtype int32"),
    ({"cmd": nisa.reduce_cmd.idle}, "reduce_cmd reset_reduce"),
    ({"cmd": nisa.reduce_cmd.load_reduce}, "pass imm1"),
])
def test_cumulative_rules(args, message):
    with pytest.raises(nki.NkiValidationError, match=message):
        cumulative_kernel(**args)(np.zeros((1, 1), F32))


# ---- activate2 ----------------------------------------------------------------------------------

@nki.jit(platform_target="trn3")
def act2(x, imm0, imm1, op0, op1, op, relu, reduce_op, cmd, reverse0=False, reverse1=False):
    t = sbuf(x)
    i0, i1, r = column(imm0), column(imm1), column(relu)
    y = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    res = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=res, value=0.0)
    nisa.activate2(dst=y, op=op, data=t, imm0=i0, imm1=i1, op0=op0, op1=op1, relu_param=r, reverse0=reverse0,
                   reverse1=reverse1, reduce_op=reduce_op, reduce_res=res if cmd != nisa.reduce_cmd.idle else None,
                   reduce_cmd=cmd)
    return to_hbm(y), to_hbm(res)


def test_activate2_worked_example(monkeypatch):
    x = np.array([[-2, 0.5, 3], [1, -1, 0]], F32)
    imm1 = np.array([[1.0], [0.5]], F32)
    y, r = run_both(monkeypatch, act2, x, 2.0, imm1, nl.multiply, nl.subtract, nl.prelu, 0.1, nl.maximum,
                    nisa.reduce_cmd.reset_reduce)
    np.testing.assert_allclose(y, [[-0.5, 0, 5], [1.5, -0.25, -0.05]], rtol=1e-6)
    np.testing.assert_array_equal(r, [[5.0], [1.5]])
    y, _ = run_both(monkeypatch, act2, x, 2.0, imm1, nl.multiply, nl.subtract, nl.prelu, 0.1, nl.maximum,
                    nisa.reduce_cmd.reset_reduce, False, True)
    np.testing.assert_allclose(y[0], [5, 0, -0.5], rtol=1e-6)  # 1 - [-4, 1, 6], then prelu


STAGES = {"multiply": np.multiply, "add": np.add, "subtract": np.subtract}


def stage_model(x, op0, imm0, rev0, op1, imm1, rev1):
    v = x.astype(F32)
    for op, imm, rev in ((op0, imm0, rev0), (op1, imm1, rev1)):
        if op is not None:
            v = STAGES[op](imm, v) if rev else STAGES[op](v, imm)
    return v


@pytest.mark.parametrize("op0, op1, rev0, rev1", [
    ("multiply", "add", True, False), ("multiply", "subtract", False, True), ("multiply", None, False, False),
    ("add", None, False, False), ("subtract", None, True, False), (None, None, False, False),
])
def test_activate2_pairs_match_numpy(monkeypatch, op0, op1, rev0, rev1):
    rng = np.random.default_rng(len(str((op0, op1))))
    x = rng.standard_normal((64, 48)).astype(F32)
    x[0, 0] = -0.0  # a bypassed stage keeps its sign
    imm0 = rng.standard_normal((64, 1)).astype(F32)
    imm1 = np.float32(0.75)
    op = lambda name: None if name is None else getattr(nl, name)  # noqa: E731
    y, r = run_both(monkeypatch, act2, x, imm0, float(imm1), op(op0), op(op1), nl.copy, 0.0, nl.add,
                    nisa.reduce_cmd.reset_reduce, rev0, rev1)
    want = stage_model(x, op0, imm0, rev0, op1, imm1, rev1)
    np.testing.assert_array_equal(y, want)
    np.testing.assert_allclose(r[:, 0], want.astype(np.float64).sum(axis=1), rtol=1e-4, atol=1e-4)
    if op0 is None:
        assert np.signbit(y[0, 0])


def test_activate2_prelu_slope_per_partition_and_abs_reductions(monkeypatch):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((32, 20)).astype(F32)
    slope = rng.uniform(0, 1, (32, 1)).astype(F32)
    for reduce_op, fold in ((nl.abs_max, lambda v: v[np.argmax(np.abs(v))]),
                            (nl.abs_min, lambda v: v[np.argmin(np.abs(v))])):
        y, r = run_both(monkeypatch, act2, x, 1.5, 0.0, nl.multiply, None, nl.prelu, slope, reduce_op,
                        nisa.reduce_cmd.reset_reduce)
        v = x * np.float32(1.5)
        want = np.where(v >= 0, v, slope * v).astype(F32)
        np.testing.assert_array_equal(y, want)
        np.testing.assert_array_equal(r[:, 0], [fold(row) for row in want])


@nki.jit(platform_target="trn3")
def act2_chain(x):
    """Three calls on the ScalarE accumulator: reset, reduce, reduce with read-out."""
    t = sbuf(x)
    y = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    res = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    kw = {"op": nl.exp, "data": t, "imm0": 0.0, "imm1": 0.0, "op0": None, "op1": None, "reduce_op": nl.minimum}
    nisa.activate2(dst=y, reduce_cmd=nisa.reduce_cmd.reset, **kw)
    nisa.activate2(dst=y, reduce_cmd=nisa.reduce_cmd.reduce, **kw)
    nisa.activate2(dst=y, reduce_cmd=nisa.reduce_cmd.reduce, reduce_res=res, **kw)
    return to_hbm(res)


def test_activate2_accumulates_across_calls(monkeypatch):
    x = np.array([[0.0, 1.0, -2.0], [3.0, 2.0, 1.0]], F32)
    (r,) = run_both(monkeypatch, act2_chain, x)
    np.testing.assert_allclose(r[:, 0], np.exp(x).min(axis=1), rtol=1e-6)  # from +inf (reset)


def activate2_kernel(target="trn3", op=nl.exp, op0=nl.multiply, op1=nl.add, reverse0=False, reverse1=False,
                     reduce_op=None, cmd=nisa.reduce_cmd.idle, tiles=False):
    @nki.jit(platform_target=target)
    def k(x):
        t = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=1.0)
        c0 = nl.ndarray((4, 1), nl.float32, buffer=nl.sbuf)
        c1 = nl.ndarray((4, 1), nl.bfloat16, buffer=nl.sbuf)
        nisa.memset(dst=c0, value=1.0)
        nisa.memset(dst=c1, value=1.0)
        nisa.activate2(dst=t, op=op, data=t, imm0=c0 if tiles else 1.0, imm1=c1 if tiles else 1.0, op0=op0, op1=op1,
                       reverse0=reverse0, reverse1=reverse1, reduce_op=reduce_op, reduce_cmd=cmd)
        return None
    return k


@pytest.mark.parametrize("args, message", [
    ({"target": "trn2"}, "gen4"),
    ({"op0": nl.add, "op1": nl.add}, r"\(add, add\) is not an activate2 pair"),
    ({"op0": None, "op1": nl.add}, r"\(bypass, add\) is not an activate2 pair"),
    ({"op0": nl.maximum, "op1": None}, "not an activate2 pair"),
    ({"op1": None, "reverse1": True}, "reverse1 swaps op1's operands"),
    ({"tiles": True}, "must share a dtype"),
    ({"reduce_op": nl.multiply, "cmd": nisa.reduce_cmd.reset_reduce}, "not an activate2 reduction"),
    ({"reduce_op": nl.add, "cmd": nisa.reduce_cmd.load_reduce}, "load_reduce"),
    ({"cmd": nisa.reduce_cmd.reduce}, "needs reduce_op"),
])
def test_activate2_rules(args, message):
    with pytest.raises(nki.NkiValidationError, match=message):
        activate2_kernel(**args)(np.zeros((1, 1), F32))


# ---- the 0.4 ALU-operator additions -------------------------------------------------------------

@nki.jit(platform_target="trn3")
def abs_ops(x, y):
    a, b = sbuf(x), sbuf(y)
    mx = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    mn = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=mx, data1=a, data2=b, op=nl.abs_max)
    nisa.tensor_tensor(dst=mn, data1=a, data2=b, op=nl.abs_min)
    return to_hbm(mx), to_hbm(mn)


def test_abs_max_abs_min_keep_the_signed_operand_and_need_trn3(monkeypatch):
    x = np.array([[-5, 5, 2, 1, 0]], F32)
    y = np.array([[3, -3, -2, -1, -0.0]], F32)
    mx, mn = run_both(monkeypatch, abs_ops, x, y)
    np.testing.assert_array_equal(mx, [[-5, 5, -2, -1, -0.0]])  # ties give y
    np.testing.assert_array_equal(mn, [[3, -3, -2, -1, -0.0]])

    @nki.jit(platform_target="trn2")
    def on_trn2(x):
        t = sbuf(x)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.abs_max, operand0=1.0)
        return None

    with pytest.raises(nki.NkiValidationError, match="gen4"):
        on_trn2(x)


@nki.jit(platform_target="trn3")
def scalar_ops(x):
    t = sbuf(x)
    sq = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    rl = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    am = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
    res = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=sq, data=t, op0=nl.square, operand0=None)
    nisa.tensor_scalar(dst=rl, data=t, op0=nl.relu, operand0=0)
    nisa.tensor_scalar_reduce(dst=am, data=t, op0=nl.abs_max, operand0=1.0, reduce_op=nl.add, reduce_res=res)
    return to_hbm(sq), to_hbm(rl), to_hbm(am), to_hbm(res)


def test_square_relu_and_abs_max_as_tensor_scalar_op0_on_trn3(monkeypatch):
    x = np.array([[-3, -0.5, 0, 2]], F32)
    sq, rl, am, res = run_both(monkeypatch, scalar_ops, x)
    np.testing.assert_array_equal(sq, x * x)
    np.testing.assert_array_equal(rl, np.maximum(x, 0))
    np.testing.assert_array_equal(am, [[-3, 1, 1, 2]])
    np.testing.assert_array_equal(res, [[1.0]])


def test_nl_abs_max_abs_min_calls_are_trn3_only():
    def kernel(target):
        @nki.jit(platform_target=target)
        def k(x, y):
            a, b = sbuf(x), sbuf(y)
            return to_hbm(nl.abs_max(a, b)), to_hbm(nl.abs_min(a, b))
        return k

    x = np.array([[-5, 5, 2]], F32)
    y = np.array([[3, -3, -2]], F32)
    mx, mn = kernel("trn3")(x, y)
    np.testing.assert_array_equal(mx, [[-5, 5, -2]])
    np.testing.assert_array_equal(mn, [[3, -3, -2]])
    with pytest.raises(nki.NkiValidationError, match="gen4"):
        kernel("trn2")(x, y)
