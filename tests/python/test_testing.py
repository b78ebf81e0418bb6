"""knit.testing and the pytest plugin (docs/testing.md).

Tolerance defaults are checked against the rounding model they are derived from, ULP distances
against hand-counted bit patterns, failure messages by content (worst indices, values, ULPs,
profile summary, trace path), and the plugin end to end in pytest subprocesses. Latency
determinism is checked across two separate processes.
"""
import json
import math
import os
import re
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings

import knit
import knit.isa as nisa
import knit.language as nl
import knit.testing as kt
import knit.typing as nt
from kernel_test_util import load_example
from knit.testing import strategies

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BF16 = ml_dtypes.bfloat16


@knit.jit
def scaled_copy(a, factor):
    """out = a * factor (one fp32 multiply on the Vector Engine, rounded to a's dtype)."""
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=factor)
    nisa.dma_copy(dst=out, src=t)
    return out


@knit.jit
def generation_scaled_copy(a):
    """a * 1 on trn1, a * (1 + 2^-20) on later generations: a kernel whose result depends on the
    target, for the differential check."""
    factor = 1.0 if nisa.get_nc_version() == nisa.nc_version.gen2 else 1.0 + 2.0 ** -20
    return scaled_copy(a, factor)


@knit.jit
def add_full_tiles_only(a, b):
    """a + b for whole 128-row tiles; the bug under test: a partial last tile is never written."""
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        ta = nl.ndarray((128, a.shape[1]), a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((128, a.shape[1]), a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[nl.ds(i * 128, 128), :])
        nisa.dma_copy(dst=tb, src=b[nl.ds(i * 128, 128), :])
        nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
        nisa.dma_copy(dst=out[nl.ds(i * 128, 128), :], src=ta)
    return out


def example(name):
    return load_example(f"{name}.py")


# ---- tolerances and ULPs ------------------------------------------------------------------------


def test_default_rtol_is_two_roundings_for_narrow_formats_and_256_ulps_for_fp32():
    # u = 2^-p for p significant bits; rtol = 2u for the narrow formats.
    for dtype, p in [("bfloat16", 8), ("float16", 11), ("float8_e4m3", 4), ("float8_e4m3fn", 4), ("float8_e5m2", 3)]:
        assert kt.tolerance(dtype).rtol == 2 * 2.0 ** -p == float(kt.tolerances.finfo(dtype).eps)
    assert kt.tolerance("float32").rtol == 256 * 2.0 ** -24
    assert kt.tolerance("int32") == (0.0, 0.0) and kt.tolerance("bool") == (0.0, 0.0)


def test_default_atol_is_rtol_of_the_largest_magnitude_plus_the_smallest_subnormal():
    assert kt.tolerance("bfloat16", scale=64.0).atol == pytest.approx(2.0 ** -7 * 64 + 2.0 ** -133, rel=0)
    assert kt.tolerance("float8_e4m3", scale=0.0).atol == 2.0 ** -9  # e4m3 subnormals are 2^-9 apart
    assert kt.tolerance("float8_e5m2", scale=0.0).atol == 2.0 ** -16
    assert kt.tolerance("float32", scale=0.0).atol == 2.0 ** -149


def test_python_and_cpp_tolerance_tables_agree():
    with open(os.path.join(_REPO, "dsl", "include", "knit", "testing.h")) as f:
        header = f.read()
    rows = re.findall(r"X\((\w+),\s*(\d+),\s*(-\d+)\)", header[header.index("#define KNIT_TESTING_TOLERANCES"):])
    assert {name for name, _, _ in rows} == {"float32", "tfloat32", "float16", "bfloat16", "float8_e4m3",
                                             "float8_e4m3fn", "float8_e5m2"}
    for name, bits, rtol_exp in rows:
        assert kt.tolerance(name).rtol == 2.0 ** int(rtol_exp), name
        assert kt.tolerances._TABLE[name][0] == int(bits), name


@pytest.mark.parametrize("dtype, a, b, ulps", [
    ("bfloat16", 1.0, 1.0078125, 1),        # 1 + 2^-7: bf16 keeps 7 fraction bits
    ("bfloat16", 1.0, 1.0 - 2.0 ** -8, 1),  # below 1 the spacing halves
    ("bfloat16", 2.0, 1.0 - 2.0 ** -8, 129),  # 1 step down to 1.0 (0x3F80), 128 within [1, 2)
    ("bfloat16", 0.0, -0.0, 0),
    ("bfloat16", 2.0 ** -133, -(2.0 ** -133), 2),  # the two smallest subnormals, around zero
    ("bfloat16", float(ml_dtypes.finfo(BF16).max), math.inf, 1),
    ("float32", 1.0, 1.0 + 2.0 ** -23, 1),
    ("float16", 1.0, 1.0 + 2.0 ** -10, 1),
    ("float8_e4m3", 1.0, 1.125, 1),
    ("float8_e5m2", 1.0, 1.25, 1),
    ("float8_e5m2", -1.0, 1.0, 2 * 0x3C),   # e5m2 1.0 is code 0x3C
])
def test_ulp_distance_counts_codes_of_the_output_dtype(dtype, a, b, ulps):
    assert kt.ulp_distance(np.array([a]), np.array([b]), dtype)[0] == ulps


def test_ulp_distance_of_nan_is_minus_one():
    assert list(kt.ulp_distance(np.array([np.nan, 1.0]), np.array([1.0, np.nan]), "bfloat16")) == [-1, -1]


# ---- assert_close -------------------------------------------------------------------------------


def test_assert_close_message_names_worst_elements_indices_values_and_ulps():
    expected = np.linspace(1.0, 2.0, 4 * 8).reshape(4, 8)
    actual = expected.astype(BF16)
    # Allowed: rtol * (|expected| + max|expected|) <= 4 * 2^-7, i.e. 4 bf16 ULPs in [1, 2).
    actual[2, 5] = BF16(float(actual[2, 5]) + 5 * 2.0 ** -7)  # 5 ULPs off
    actual[1, 1] = BF16(float(actual[1, 1]) + 2.0 ** -4)      # 8 ULPs off: the worst
    with pytest.raises(AssertionError) as e:
        kt.assert_close(actual, expected)
    msg = str(e.value)
    assert "result (bfloat16[4, 8]) differs from the reference: 2 of 32 elements" in msg
    assert "rtol=0.00781" in msg and "defaults for bfloat16" in msg
    lines = msg.splitlines()
    worst = [line for line in lines if line.startswith("  (")]
    assert worst[0].startswith("  (1, 1): ") and worst[0].endswith(" 8 ULPs")
    assert worst[1].startswith("  (2, 5): ") and worst[1].endswith(" 5 ULPs")
    assert f"{float(actual[1, 1]):.9g} vs {expected[1, 1]:.9g}" in worst[0]
    assert "the mismatches lie within [1:3, 1:6]\nlargest ULP distance 8 at (1, 1)" in msg


def test_assert_close_tolerance_boundary_is_inclusive():
    expected = np.array([1.0, 2.0, 4.0])
    rtol = kt.tolerance("float32").rtol
    atol = kt.tolerance("float32", scale=4.0).atol
    at_limit = (expected + atol + rtol * expected).astype(np.float32)
    at_limit = np.where(at_limit.astype(np.float64) - expected > atol + rtol * expected,
                        np.nextafter(at_limit, np.float32(0)), at_limit)  # the last float32 inside
    kt.assert_close(at_limit, expected)
    with pytest.raises(AssertionError, match="1 of 3 elements"):
        kt.assert_close(np.nextafter(at_limit, np.float32(10)) * np.array([1, 0, 0], np.float32)
                        + at_limit * np.array([0, 1, 1], np.float32), expected)


def test_assert_close_nan_and_inf_rules():
    kt.assert_close(np.array([np.nan, np.inf, -np.inf], np.float32), np.array([np.nan, np.inf, -np.inf]))
    with pytest.raises(AssertionError) as e:
        kt.assert_close(np.array([[1.0, np.nan]], np.float32), np.array([[1.0, 2.0]]))
    assert "NaN: 1 in the result where the reference has none (first at (0, 1))" in str(e.value)
    assert "(0, 1): nan vs 2, |diff| nan" in str(e.value) and "ULPs n/a (NaN)" in str(e.value)
    with pytest.raises(AssertionError, match=r"inf: 1 in the reference where the result has none \(first at \(1,\)\)"):
        kt.assert_close(np.array([np.inf, 3.0], np.float32), np.array([np.inf, np.inf]))
    with pytest.raises(AssertionError, match="NaN never equals NaN"):
        kt.assert_close(np.array([np.nan], np.float32), np.array([np.nan]), equal_nan=False)


def test_reference_overflowing_the_output_dtype_expects_what_the_hardware_writes():
    big = float(ml_dtypes.finfo(BF16).max) * 2
    kt.assert_close(np.array([np.inf, -np.inf], BF16), np.array([big, -big]))
    e4m3fn = np.dtype(ml_dtypes.float8_e4m3fn)  # no infinity: overflow writes NaN
    kt.assert_close(np.array([np.nan], e4m3fn), np.array([1000.0]))


def test_integer_results_compare_exactly():
    kt.assert_close(np.array([1, 2, 3], np.int32), np.array([1, 2, 3]))
    with pytest.raises(AssertionError, match=r"\(2,\): 4 vs 3"):
        kt.assert_close(np.array([1, 2, 4], np.int32), np.array([1, 2, 3]))


def test_explicit_tolerances_replace_the_defaults():
    kt.assert_close(np.array([1.1], np.float32), np.array([1.0]), rtol=0.2)
    with pytest.raises(AssertionError, match=r"rtol=0, atol=0.05"):
        kt.assert_close(np.array([1.1], np.float32), np.array([1.0]), rtol=0, atol=0.05)


def test_bad_references_give_clear_errors():
    a = np.zeros((4, 8), np.float32)
    with pytest.raises(AssertionError, match=r"result has shape \(4, 8\) but the reference has shape \(8, 4\)"):
        kt.assert_close(a, np.zeros((8, 4)))
    with pytest.raises(AssertionError, match="returned 2 result\\(s\\) but the reference 1"):
        kt.assert_close((a, a), np.zeros((4, 8)))
    with pytest.raises(TypeError, match="reference for result must be an array, got str"):
        kt.assert_close(a, "zeros")
    with pytest.raises(TypeError, match="complex128, which is not a real number type"):
        kt.assert_close(a, np.zeros((4, 8), np.complex128))
    with pytest.raises(TypeError, match="the reference returned None"):
        kt.assert_kernel_close(scaled_copy, lambda a, factor: None, a, 2.0)
    with pytest.raises(TypeError, match="float64 is not supported by Knit"):
        kt.assert_kernel_close(scaled_copy, lambda a, factor: a, np.zeros((4, 8)), 2.0)


# ---- assert_kernel_close and run_on_targets -------------------------------------------------------


def test_assert_kernel_close_passes_reference_exact_float64_inputs_and_kwargs():
    seen = {}

    def reference(a, factor):
        seen["dtype"], seen["factor"] = a.dtype, factor
        return a * factor

    x = kt.normal((128, 64), "bfloat16", seed=3)
    out = kt.assert_kernel_close(scaled_copy, reference, x, 3.0)
    assert seen == {"dtype": np.float64, "factor": 3.0}
    assert out.dtype == BF16 and np.array_equal(out.astype(np.float64), (x.astype(np.float32) * 3).astype(BF16)
                                                .astype(np.float64))
    kt.assert_kernel_close(scaled_copy, x.astype(np.float64) * 3, x, 3.0)  # expected arrays work too


def test_assert_kernel_close_failure_names_the_kernel_and_target():
    x = kt.normal((128, 64), "float32", seed=4)
    with pytest.raises(AssertionError) as e:
        kt.assert_kernel_close(scaled_copy, lambda a, factor: a * 2.001, x, 2.0, target="trn3")
    msg = str(e.value)
    assert msg.startswith("kernel scaled_copy on trn3 output (float32[128, 64]) differs from the reference")
    # |diff| = 0.001 |x| against atol + rtol * 2.001 |x|: the largest |x| is off the most.
    worst = tuple(int(i) for i in np.unravel_index(np.argmax(np.abs(x)), x.shape))
    assert msg.splitlines()[2].startswith(f"  {worst}: ") and msg.splitlines()[2].endswith(" ULPs")


def test_a_missing_tile_shows_as_the_slice_of_nan_results():
    a, b = kt.normal((200, 64), "bfloat16", seed=1), kt.normal((200, 64), "bfloat16", seed=2)
    with pytest.raises(AssertionError) as e:
        kt.assert_kernel_close(add_full_tiles_only, lambda a, b: a + b, a, b)
    msg = str(e.value)
    assert "4608 of 12800 elements" in msg and "  (128, 0): nan vs " in msg  # 72 rows x 64 never written
    assert "the mismatches lie within [128:200, 0:64]" in msg
    assert "NaN: 4608 in the result where the reference has none (first at (128, 0))" in msg


def test_run_on_targets_returns_equal_results_and_catches_a_generation_difference():
    x = kt.normal((128, 64), "float32", seed=5)
    results = kt.run_on_targets(scaled_copy, x, 2.0, reference=lambda a, f: a * f)
    assert list(results) == ["trn1", "trn2", "trn3"]
    assert all(np.array_equal(r, x * np.float32(2.0)) for r in results.values())
    with pytest.raises(AssertionError) as e:
        kt.run_on_targets(generation_scaled_copy, x)
    msg = str(e.value)
    assert msg.startswith("kernel generation_scaled_copy on trn2 output (float32[128, 64]) differs")
    assert "with rtol=0, atol=0" in msg and "same kernel's result on trn1" in msg
    kt.run_on_targets(generation_scaled_copy, x, exact=False)  # 2^-20 is within fp32's default rtol


# ---- inputs -------------------------------------------------------------------------------------


def test_generators_are_reproducible_in_the_requested_dtype():
    a, b = kt.normal((64, 32), "bfloat16", seed=7), kt.normal((64, 32), "bfloat16", seed=7)
    assert a.dtype == BF16 and a.shape == (64, 32) and np.array_equal(a.view(np.uint16), b.view(np.uint16))
    assert not np.array_equal(a, kt.normal((64, 32), "bfloat16", seed=8))
    u = kt.uniform((1000,), "float32", seed=1, low=2.0, high=3.0)
    assert u.dtype == np.float32 and u.min() >= 2.0 and u.max() < 3.0
    assert kt.normal(5, "int32", seed=1, std=100).dtype == np.int32


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "float8_e4m3", "float8_e5m2"])
def test_edge_values_contain_every_special_value(dtype):
    x = kt.edge_values((16, 16), dtype, seed=2, nan=True, inf=True)
    f = ml_dtypes.finfo(x.dtype)
    values = x.astype(np.float64).ravel()
    for want in [f.smallest_subnormal, -f.smallest_subnormal, f.tiny, f.max, -f.max, np.inf, -np.inf]:
        assert (values == float(want)).any(), want
    assert np.isnan(values).any()
    assert ((values == 0) & np.signbit(values)).any() and ((values == 0) & ~np.signbit(values)).any()
    assert ((values > 0) & (values < float(f.tiny)) & (values > float(f.smallest_subnormal))).any()  # largest subnormal


def test_edge_values_have_nan_and_inf_only_when_asked():
    x = kt.edge_values((32, 32), "bfloat16", seed=3).astype(np.float64)
    assert np.isfinite(x).all()
    with pytest.raises(ValueError, match="float8_e4m3fn has no infinity"):
        kt.edge_values((8,), "float8_e4m3fn", inf=True)


# ---- latency and utilization ------------------------------------------------------------------------


def test_assert_latency_returns_the_profile_when_within_bounds():
    softmax = example("softmax")
    x = kt.normal((256, 512), "bfloat16", seed=1)
    expected = knit.profile(softmax.softmax_kernel, x, target="trn2").total_ns
    prof = kt.assert_latency(softmax.softmax_kernel, x, max_us=expected / 1e3, min_us=expected / 1e3, target="trn2")
    assert prof.total_ns == expected
    kt.assert_latency(softmax.softmax_kernel, nt.tensor[[256, 512], "bfloat16"], max_us={"trn2": expected / 1e3})


def test_assert_latency_failure_has_summary_and_saved_trace(tmp_path, monkeypatch):
    monkeypatch.setattr(kt.timing, "trace_dir", str(tmp_path))
    matmul = example("matmul")
    args = nt.tensor[[256, 128], "bfloat16"], nt.tensor[[256, 512], "bfloat16"]
    with pytest.raises(kt.KnitTimingError) as e:
        kt.assert_latency(matmul.matmul_kernel, *args, max_us=10, target="trn1")
    msg = str(e.value)
    took = knit.profile(matmul.matmul_kernel, *args, target="trn1").latency_us
    assert msg.startswith(f"kernel matmul_kernel on trn1 took {took:.3f} us, over the 10 us bound")
    assert "kernel matmul_kernel on trn1 (NC-v2)" in msg and "  engine       busy us" in msg and "  pe  " in msg
    # Named after the running test (the plugin tells knit.testing which one), then the target.
    assert e.value.trace_path == str(tmp_path / ("tests_python_test_testing.py_test_assert_latency_failure_has_summary_"
                                                 "and_saved_trace-trn1.json"))
    assert f"Perfetto trace: {e.value.trace_path}" in msg
    with open(e.value.trace_path) as f:
        events = json.load(f)["traceEvents"]
    assert sum(ev["name"] == "nc_matmul" for ev in events) == e.value.profile.instructions["pe"]
    with pytest.raises(kt.KnitTimingError, match="under the 1000 us lower bound"):
        kt.assert_latency(matmul.matmul_kernel, *args, max_us=2000, min_us=1000, target="trn1")
    with pytest.raises(KeyError, match="no bound for target trn1"):
        kt.assert_latency(matmul.matmul_kernel, *args, max_us={"trn2": 50}, target="trn1")


def test_assert_engine_utilization(tmp_path, monkeypatch):
    monkeypatch.setattr(kt.timing, "trace_dir", str(tmp_path))
    matmul = example("matmul")
    args = nt.tensor[[512, 128], "bfloat16"], nt.tensor[[512, 512], "bfloat16"]
    pe = knit.profile(matmul.matmul_kernel, *args).engines["pe"].utilization
    assert 0 < pe < 1
    kt.assert_engine_utilization(matmul.matmul_kernel, *args, engine="tensor", min_util=pe, max_util=pe)
    with pytest.raises(kt.KnitTimingError) as e:
        kt.assert_engine_utilization(matmul.matmul_kernel, *args, engine="TensorE", min_util=0.9)
    assert f"pe busy {100 * pe:.2f}% of the run, below the 90.00% minimum" in str(e.value)
    assert "MFU" in str(e.value) and os.path.exists(e.value.trace_path)
    with pytest.raises(ValueError, match="unknown engine 'mxu'"):
        kt.assert_engine_utilization(matmul.matmul_kernel, *args, engine="mxu", min_util=0.1)


def _profile_in_subprocess(backend):
    code = textwrap.dedent("""
        import sys, json
        sys.path.insert(0, %r)
        import knit, knit.typing as nt
        from matmul import matmul_kernel
        from softmax import softmax_kernel
        import knit.testing as kt
        p = knit.profile(matmul_kernel, nt.tensor[[512, 128], "bfloat16"], nt.tensor[[512, 512], "bfloat16"])
        s = knit.profile(softmax_kernel, kt.normal((256, 512), "float32", seed=1), target="trn1")
        print(json.dumps([[q.hex() for q in (p.total_ns, s.total_ns)],
                          [e.busy_ns.hex() for e in list(p.engines.values()) + list(s.engines.values())],
                          [list(map(float.hex, t[3:5])) for t in p._timeline + s._timeline]]))
    """ % os.path.join(_REPO, "examples", "kernels", "python"))
    env = dict(os.environ, PYTHONPATH=os.path.join(_REPO, "python"), KNIT_PROGRESS="0", KNIT_BACKEND=backend)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout


@pytest.mark.slow
def test_simulated_latency_is_identical_in_two_separate_processes():
    first, second = _profile_in_subprocess("jit"), _profile_in_subprocess("jit")
    assert first == second  # every total, busy time and timeline start/end, bit for bit
    assert _profile_in_subprocess("reference") == first  # and whichever backend computes the data
    totals = json.loads(first)[0]
    assert all(float.fromhex(t) > 15000 for t in totals)  # more than the launch overhead


# ---- hypothesis strategies ------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(strategies.tile_shapes("float32", buffer="psum", free_dims=2), strategies.tile_shapes("bfloat16", "psum"),
       strategies.matmul_shapes())
def test_strategies_respect_partition_and_psum_bank_limits(psum_fp32, psum_bf16, kmn):
    assert 1 <= psum_fp32[0] <= 128 and psum_fp32[1] * psum_fp32[2] <= 512
    assert 1 <= psum_bf16[0] <= 128 and 1 <= psum_bf16[1] <= 1024
    k, m, n = kmn
    assert 1 <= k <= 128 and 1 <= m <= 128 and 1 <= n <= 512


@settings(max_examples=8, deadline=None)
@given(strategies.tiles("bfloat16"))
def test_tiles_strategy_drives_a_kernel_property(x):
    assert x.dtype == BF16 and x.shape[0] <= 128
    kt.assert_kernel_close(scaled_copy, lambda a, f: a * f, x, 0.5)  # halving is exact in bf16


def test_strategies_refuse_impossible_limits():
    with pytest.raises(ValueError, match="no psum tile"):
        strategies.tile_shapes("float32", "psum", max_partitions=0)


# ---- the pytest plugin ---------------------------------------------------------------------------


def _pytest(*args, cwd=None, extra_path=None):
    path = [os.path.join(_REPO, "python")] + ([extra_path] if extra_path else [])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path), KNIT_PROGRESS="0")
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "knit.pytest_plugin", "-p", "no:cacheprovider",
                           *args], cwd=cwd or _REPO, env=env, capture_output=True, text=True)


@pytest.mark.slow
def test_example_tests_pass_on_every_target():
    r = _pytest("examples/tests", "-q", "--knit-target", "all")
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"\b31 passed\b", r.stdout), r.stdout
    listed = _pytest("examples/tests", "-q", "--collect-only", "--knit-target", "trn1,trn3", "-m", "knit_latency")
    assert "test_softmax_latency[trn1]" in listed.stdout and "test_matmul_latency[trn3]" in listed.stdout
    assert "[trn2]" not in listed.stdout


@pytest.mark.slow
def test_plugin_reports_the_trace_of_a_failing_latency_test(tmp_path):
    (tmp_path / "test_slow.py").write_text(textwrap.dedent("""
        import os, sys, pytest
        sys.path.insert(0, %r)
        import knit.typing as nt
        from knit.testing import assert_latency
        from matmul import matmul_kernel

        @pytest.mark.knit_latency
        def test_too_slow(knit_target):
            assert os.environ["KNIT_BACKEND"] == "reference"
            assert_latency(matmul_kernel, nt.tensor[[128, 128], "bfloat16"], nt.tensor[[128, 512], "bfloat16"],
                           max_us=1, target=knit_target)
    """ % os.path.join(_REPO, "examples", "kernels", "python")))
    traces = tmp_path / "traces"
    r = _pytest("--strict-markers", "--knit-target", "trn3", "--knit-backend", "reference",
                "--knit-trace-dir", str(traces), "test_slow.py", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    trace = traces / "test_slow.py_test_too_slow_trn3-trn3.json"
    assert trace.exists()
    assert f"Perfetto trace of the failing run: {trace}" in r.stdout
    assert "over the 1 us bound" in r.stdout and "knit: targets trn3, backend reference" in r.stdout


@pytest.mark.slow
def test_knit_durations_reports_the_time_kernel_runs_took(tmp_path):
    """--knit-durations N: the session's kernel runs counted per test (a test calling its kernel
    three times has 3 runs), their instructions (this small example stays below the JIT's
    threshold, so each run interprets all its instructions, as its own last_run says), by file,
    and only the N slowest tests listed."""
    examples = os.path.join(_REPO, "examples", "kernels", "python")
    (tmp_path / "test_k.py").write_text(textwrap.dedent(f"""
        import sys
        import numpy as np
        import knit
        sys.path.insert(0, {examples!r})
        from tensor_add import tensor_add_kernel as add

        def test_three_runs():
            a = np.ones((4, 8), np.float32)
            assert (add(a, a) == 2).all() and (add(a, a) == 2).all()
            c = knit.compile(add, a, a)
            c.run(a, a)
            open("counts.txt", "w").write(f"{{c.last_run['native']}} {{c.last_run['interpreted']}}")

        def test_one_run():
            assert (add(np.ones((4, 8), np.float32), np.ones((4, 8), np.float32)) == 2).all()

        def test_none():
            pass
    """))
    r = _pytest("-q", "test_k.py", "--knit-durations", "1", "--knit-backend", "jit", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    native, per_run = map(int, (tmp_path / "counts.txt").read_text().split())
    assert native == 0 and per_run > 0
    assert re.search(rf"4 kernel runs took [\d.]+ s of the session's [\d.]+ s \(\d+%\); instructions: 0 native, "
                     rf"{4 * per_run} interpreted", r.stdout), r.stdout
    assert re.search(r"[\d.]+ s +4 runs +test_k.py", r.stdout), r.stdout
    listed = r.stdout.split("slowest 1 by kernel-run time:")[1].strip().splitlines()
    assert re.search(rf"3 runs +0 native +{3 * per_run} interpreted +test_k.py::test_three_runs", listed[0]), r.stdout
    assert "test_one_run" not in r.stdout.split("slowest 1")[1]
    quiet = _pytest("-q", "test_k.py", cwd=tmp_path)
    assert quiet.returncode == 0 and "kernel runs" not in quiet.stdout


@pytest.mark.slow
def test_plugin_rejects_unknown_targets():
    r = _pytest("--knit-target", "trn9", "--collect-only", "-q", "examples/tests")
    assert r.returncode != 0 and "--knit-target: unknown target(s) ['trn9']" in r.stderr


@pytest.mark.slow
def test_plugin_is_registered_once_with_the_entry_point_and_explicit_loading(tmp_path):
    # An installed Knit's entry point, simulated by a dist-info folder on the path.
    dist = tmp_path / "site" / "knit_entry_point_probe-0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: knit-entry-point-probe\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text("[pytest11]\nknit.pytest_plugin = knit.pytest_plugin\n")
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["knit.pytest_plugin"]\n')
    (tmp_path / "test_one.py").write_text(textwrap.dedent("""
        import pytest

        def test_target(knit_target):
            assert knit_target == "trn2"

        @pytest.mark.parametrize("knit_target", ["trn1", "trn3"])  # the test's own choice wins
        def test_own_targets(knit_target):
            assert knit_target in ("trn1", "trn3")
    """))
    r = _pytest("-q", "test_one.py", cwd=tmp_path, extra_path=str(tmp_path / "site"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "3 passed" in r.stdout
