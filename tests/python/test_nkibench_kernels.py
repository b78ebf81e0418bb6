"""The NKIBench kernels of examples/kernels/python/nkibench/ (bench/calibration.py times them).

* Each kernel at a small shape (multiples of its tiles, ragged last tiles where the published
  shape has them) against its float64 NumPy reference. Inputs are fp32, every product and sum is
  rounded to fp32, so the bounds are relative to the size of the terms summed: K · 2^-22 scaled
  by the magnitude of a term for the matmuls, a few ulps for the element-wise kernels (exp,
  sqrt and reciprocal are each within an ulp or two in Knit's fp32 arithmetic).
* Each kernel at its published shape, traced with shape placeholders and timed on trn1 (what the
  benchmark does): it must trace, lower and time without error, move at least its inputs' and
  output's bytes, and last at least as long as its busiest engine is busy.
"""
import numpy as np
import pytest

import knit  # noqa: E402  (tests/python/conftest.py puts python/ on sys.path)
import knit.language as nl  # noqa: E402
import knit.typing as nt  # noqa: E402
from kernel_test_util import load_example  # noqa: E402

nkibench = load_example("nkibench/shapes.py")  # loads the kernels under unique module names
PUBLISHED_SHAPES = nkibench.PUBLISHED_SHAPES
adamw, bmm, lora, matmul, silu, swiglu, transpose_matmul = (
    nkibench.load(n) for n in ("adamw", "bmm", "lora", "matmul", "silu", "swiglu", "transpose_matmul"))

FP32_EPS = 2.0 ** -23


def _randn(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _check_matmul_like(out, ref, terms, k):
    """|out - ref| within k fp32 roundings of each term's size: `terms` is the float64 sum of
    |products| per output element (what a sequential fp32 sum's error is bounded by)."""
    assert out.shape == ref.shape
    bound = 2 * k * FP32_EPS * terms + 1e-6
    assert np.all(np.abs(out - ref) <= bound), float(np.max(np.abs(out - ref) / bound))


def test_matmul_small():
    rng = np.random.default_rng(1)
    a, b = _randn(rng, 256, 2048), _randn(rng, 2048, 2048)
    out = matmul.matmul_kernel(a, b)
    terms = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    _check_matmul_like(out, matmul.reference(a, b), terms, 2048)


def test_transpose_matmul_small_with_a_narrow_last_block():
    rng = np.random.default_rng(2)
    lhsT, rhs = _randn(rng, 256, 1024), _randn(rng, 256, 1728)  # N = 1024 + 704, as 10944 ends
    out = transpose_matmul.transpose_matmul_kernel(lhsT, rhs)
    terms = np.abs(lhsT.astype(np.float64)).T @ np.abs(rhs.astype(np.float64))
    _check_matmul_like(out, transpose_matmul.reference(lhsT, rhs), terms, 256)


def test_bmm_small():
    rng = np.random.default_rng(3)
    a, w = _randn(rng, 2, 1024, 64), _randn(rng, 2, 64, 2048)
    out = bmm.bmm_kernel(a, w)
    terms = np.matmul(np.abs(a.astype(np.float64)), np.abs(w.astype(np.float64)))
    _check_matmul_like(out, bmm.reference(a, w), terms, 64)


def test_lora_small():
    """Smaller blocks than the defaults (which need M >= 2048 and K a multiple of 5120), same
    loop structure: two M halves, two K chunks, two N tiles per block."""
    rng = np.random.default_rng(4)
    x, w, a, b = _randn(rng, 1024, 1280), _randn(rng, 1280, 1024), _randn(rng, 1280, 128), _randn(rng, 128, 1024)
    out = lora.lora_kernel(x, w, a, b, m_half=512, block_k=640, k_chunk=640)
    x64, w64, a64, b64 = (np.abs(t.astype(np.float64)) for t in (x, w, a, b))
    xa = np.abs(x.astype(np.float64) @ a.astype(np.float64))
    # x @ a is rounded once more (to fp32) before it multiplies b: its error, carried through b
    terms = x64 @ w64 + xa @ b64 + (x64 @ a64) @ b64
    _check_matmul_like(out, lora.reference(x, w, a, b), terms, 1280 + 128)


def test_swiglu_small():
    rng = np.random.default_rng(5)
    x = _randn(rng, 512, 512)
    w_gate, w_up = _randn(rng, 512, 1024) / 8, _randn(rng, 512, 1024) / 8
    w_down = _randn(rng, 1024, 512)
    out = swiglu.swiglu_kernel(x, w_gate, w_up, w_down)
    ref = swiglu.reference(x, w_gate, w_up, w_down)
    # h = silu(g) * u has a relative error of a few ulps from g, u and the element-wise chain
    # (each |d silu / dg| <= 1.1); it then goes through a 1024-term sum with w_down.
    x64 = np.abs(x.astype(np.float64))
    g_terms, u_terms = x64 @ np.abs(w_gate), x64 @ np.abs(w_up)
    g = x.astype(np.float64) @ w_gate.astype(np.float64)
    u = x.astype(np.float64) @ w_up.astype(np.float64)
    h_err = 2 * 512 * FP32_EPS * (1.1 * g_terms * np.abs(u) + np.abs(g) * u_terms) + 16 * FP32_EPS * np.abs(g * u)
    h_abs = np.abs(g / (1 + np.exp(-g)) * u)
    bound = (h_err + 2 * 1024 * FP32_EPS * h_abs) @ np.abs(w_down.astype(np.float64)) + 1e-6
    assert out.shape == ref.shape and np.all(np.abs(out - ref) <= bound), float(np.max(np.abs(out - ref) / bound))


def test_silu_small_matches_and_keeps_the_row_layout():
    rng = np.random.default_rng(6)
    x = _randn(rng, 256, 2048) * 4
    out = silu.silu_kernel(x)
    ref = silu.reference(x)
    np.testing.assert_allclose(out, ref, rtol=16 * FP32_EPS, atol=1e-30)


def test_silu_edges():
    """Large |x|: exp(-x) overflows to inf for x < -88.7 and silu goes to -0; x = 0 gives 0."""
    x = np.zeros((128, 1024), np.float32)
    x[:, 0], x[:, 1], x[:, 2], x[:, 3] = -100.0, 100.0, 0.0, -20.0
    out = silu.silu_kernel(x)
    assert out[0, 0] == 0.0 and out[0, 1] == 100.0 and out[0, 2] == 0.0
    np.testing.assert_allclose(out[:, 3], silu.reference(x)[:, 3], rtol=16 * FP32_EPS)


def test_adamw_small_with_a_partial_last_row_tile():
    rng = np.random.default_rng(7)
    shape = (320, 2048)  # 2 full 128-row tiles and one of 64, as 10944 = 85 * 128 + 64 ends
    theta, g, m = (_randn(rng, *shape) for _ in range(3))
    v = np.abs(_randn(rng, *shape))
    out = adamw.adamw_kernel(theta, g, m, v)
    ref = adamw.reference(theta, g, m, v)
    # out = theta (1 - 1e-5) - step: theta's part is exact to an ulp or two, the step's to a few
    # ulps of its own size (a chain of about ten fp32 operations).
    step = np.abs(ref - theta.astype(np.float64) * (1 - adamw.LR * adamw.WD))
    bound = 4 * FP32_EPS * np.abs(theta) + 32 * FP32_EPS * step
    assert np.all(np.abs(out - ref) <= bound), float(np.max(np.abs(out - ref) / bound))


def _output_elements(name, shapes):
    if name == "transpose_matmul":
        return shapes[0][1] * shapes[1][1]
    if name == "bmm":
        return shapes[0][0] * shapes[0][1] * shapes[1][2]
    if name in ("swiglu",):
        return shapes[0][0] * shapes[0][1]
    if name in ("matmul", "lora"):
        return shapes[0][0] * shapes[1][1]
    return int(np.prod(shapes[0]))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PUBLISHED_SHAPES))
def test_traces_and_times_at_the_published_shape_on_trn1(name):
    kernel, _, shapes = PUBLISHED_SHAPES[name]
    bench = knit.benchmark(kernel, *[nt.tensor[list(s), nl.float32] for s in shapes], target="trn1")
    prof = bench.profile
    latency_ms = bench.benchmark_result.nc_latency.get_latency_percentile(50) / 1e3
    assert np.isfinite(latency_ms) and latency_ms > 0
    # Every byte of the inputs is read at least once and the output written once.
    must_move = 4 * (sum(int(np.prod(s)) for s in shapes) + _output_elements(name, shapes))
    assert prof.hbm_read_bytes + prof.hbm_write_bytes >= must_move
    # The run is no shorter than its busiest engine's busy time.
    assert prof.total_ns >= max(e.busy_ns for e in prof.engines.values())
    assert sum(prof.instructions[q] for q in ("pe", "act", "dve", "pool")) > 0
