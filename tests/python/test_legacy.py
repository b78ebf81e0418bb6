"""The legacy ``neuronxcc.nki`` (G1) facade (knit.legacy) and the import aliases (knit.compat).

* the G1 example kernels (examples/kernels/python/legacy/*.py) against their NumPy references,
  in float32 and bfloat16, under the same rigorous rounding bounds as the current-API examples:
  ``|out - ref| <= n * u32 * mag + r * |ref|`` (n fp32 roundings on magnitude ``mag``, r the
  output's unit roundoff);
* ``knit.compat.install()``: ``import neuronxcc.nki as nki`` / ``neuronxcc.nki.language`` ... and
  ``import nki`` resolve to Knit, idempotently, leaving real packages alone;
* the G1 semantics: result-returning ISA calls with ``dtype=`` / ``mask=``, NumPy ufuncs as ops,
  ``nl.arange`` / ``nl.mgrid`` index expressions, ``nl.par_dim`` and block tensors,
  ``psum += nisa.nc_matmul(...)`` accumulation, SPMD grids, dtype promotion;
* errors raised at the user's kernel line.
"""
import importlib.util
import os
import sys
import textwrap

import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes")

import knit  # noqa: E402
import knit.compat  # noqa: E402
import knit.legacy as nki  # noqa: E402
import knit.legacy.isa as nisa  # noqa: E402
import knit.legacy.language as nl  # noqa: E402
from kernel_test_util import source_line  # noqa: E402
from knit.errors import KnitError, NkiValidationError  # noqa: E402

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_EXAMPLES = os.path.join(_REPO, "examples", "kernels", "python", "legacy")

U32 = 2.0 ** -24
EPS_BF16 = 2.0 ** -8
BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = {"float32": np.dtype(np.float32), "bfloat16": BF16}


def _line(marker):
    """Line number (in this file) of the first source line containing `marker`."""
    return source_line(__file__, marker)


# ---- the legacy example kernels -------------------------------------------------------------------
_MODULES = {}


def example(name):
    if name not in _MODULES:
        path = os.path.join(_EXAMPLES, f"{name}.py")
        spec = importlib.util.spec_from_file_location(f"knit_legacy_example_{name}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _MODULES[name] = module
    return _MODULES[name]


def _randn(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


CASES = {
    # name: (module, kernel, inputs(rng), (n, mag) of the bound from the float64 inputs and reference)
    "tensor_add": ("tensor_add", "tensor_add_kernel", lambda r: [_randn(r, 300, 512), _randn(r, 300, 512)],
                   lambda x, ref: (1, np.abs(x[0]) + np.abs(x[1]))),
    "tensor_add_exact_tiles": ("tensor_add", "tensor_add_kernel", lambda r: [_randn(r, 256, 64), _randn(r, 256, 64)],
                               lambda x, ref: (1, np.abs(x[0]) + np.abs(x[1]))),
    "matmul": ("matmul", "matmul_kernel", lambda r: [_randn(r, 512, 256), _randn(r, 512, 1024)],
               lambda x, ref: (x[0].shape[0], np.abs(x[0]).T @ np.abs(x[1]))),
    "softmax": ("softmax", "softmax_kernel", lambda r: [_randn(r, 300, 1024) * 4],
                lambda x, ref: (x[0].shape[1] + 32, np.abs(ref))),
}


def check(case, dtype_name, inputs, out):
    module_name, _, _, tol = CASES[case]
    x = [np.asarray(a).astype(np.float64) for a in inputs]
    ref = np.asarray(example(module_name).reference(*x), dtype=np.float64)
    out = np.asarray(out)
    assert out.dtype == DTYPES[dtype_name] and out.shape == ref.shape
    assert np.all(np.isfinite(out.astype(np.float64)))
    n, mag = tol(x, ref)
    bound = n * U32 * mag + (EPS_BF16 if dtype_name == "bfloat16" else U32) * np.abs(ref)
    err = np.abs(out.astype(np.float64) - ref)
    worst = np.unravel_index(np.argmax(err / bound), err.shape)
    assert np.all(err <= bound), f"{case}/{dtype_name}: error {err[worst]:.3g} > bound {bound[worst]:.3g} at {worst}"


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("case", list(CASES))
def test_legacy_example(case, dtype_name):
    module_name, kernel_name, make, _ = CASES[case]
    kernel = getattr(example(module_name), kernel_name)
    inputs = [a.astype(DTYPES[dtype_name]) for a in make(np.random.default_rng(0))]
    originals = [a.copy() for a in inputs]
    out = kernel(*inputs)
    assert isinstance(out, np.ndarray)
    check(case, dtype_name, inputs, out)
    for a, b in zip(inputs, originals):  # inputs are only read
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


def test_legacy_example_simulate_kernel():
    mod = example("tensor_add")
    rng = np.random.default_rng(1)
    a, b = _randn(rng, 200, 128), _randn(rng, 200, 128)
    np.testing.assert_array_equal(nki.simulate_kernel(mod.tensor_add_kernel, a, b), a + b)


@pytest.mark.slow
def test_legacy_examples_run_as_scripts():
    """Each script's __main__ runs its kernel on seed-0 fp32 inputs (CASES' shapes) and prints the
    max abs error against its float64 reference: within the fp32 bound above, and for tensor_add
    exactly NumPy's error (one correctly rounded fp32 add, the same on both)."""
    import re
    import subprocess

    env = dict(os.environ, PYTHONPATH=os.path.join(_REPO, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for name in ("tensor_add", "matmul", "softmax"):
        r = subprocess.run([sys.executable, os.path.join(_EXAMPLES, f"{name}.py")], capture_output=True, text=True,
                           env=env, timeout=300)
        assert r.returncode == 0, r.stderr
        printed = re.fullmatch(rf"legacy {name}: max abs error (\S+)", r.stdout.strip())
        assert printed, r.stdout
        _, _, make, tol = CASES[name]
        inputs = make(np.random.default_rng(0))
        x = [a.astype(np.float64) for a in inputs]
        ref = np.asarray(example(name).reference(*x), dtype=np.float64)
        err = float(printed.group(1))
        if name == "tensor_add":
            assert err == np.max(np.abs((inputs[0] + inputs[1]).astype(np.float64) - ref)), r.stdout
        else:
            n, mag = tol(x, ref)
            assert 0.0 <= err <= np.max(n * U32 * mag + U32 * np.abs(ref)), r.stdout


# ---- knit.compat --------------------------------------------------------------------------------------
_ALIASES = ["nki", "nki.language", "nki.isa", "nki.typing", "nki.lnc", "nki.collectives", "neuronxcc", "neuronxcc.nki",
            "neuronxcc.nki.language", "neuronxcc.nki.isa", "neuronxcc.nki.typing", "neuronxcc.nki.compiler"]


@pytest.fixture
def clean_compat(monkeypatch):
    """No aliases before the test; whatever the test installs is removed after it."""
    knit.compat.uninstall()
    for name in _ALIASES:
        monkeypatch.delitem(sys.modules, name, raising=False)
    yield knit.compat
    knit.compat.uninstall()


G1_SOURCE = '''
import numpy as np
from neuronxcc import nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.typing as nt


@nki.jit(mode="simulation")
def scaled_add(a_input: nt.tensor, b_input: nt.tensor):
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    tiles = nl.ndarray((2, nl.par_dim(128), 256), dtype=a_input.dtype,
                       buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
    i_p, i_f = nl.mgrid[0:128, 0:256]
    for i in nl.affine_range(2):
        tiles[i, i_p, i_f] = nl.load(a_input[i * 128 + i_p, i_f])
        b = nl.load(b_input[i * 128 + i_p, i_f])
        s = nisa.tensor_scalar(tiles[i], np.multiply, 2.0, op1=np.add, operand1=1.0)
        nl.store(c_output[i * 128 + i_p, i_f], value=nisa.tensor_tensor(s, b, np.add))
    return c_output
'''


def test_compat_install_neuronxcc_kernel_runs_unmodified(clean_compat, tmp_path, monkeypatch):
    added = clean_compat.install()
    assert added == _ALIASES
    assert clean_compat.install() == []  # idempotent
    assert clean_compat.installed() == sorted(_ALIASES)
    path = tmp_path / "g1_kernel.py"
    path.write_text(G1_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "g1_kernel", raising=False)
    import g1_kernel

    assert g1_kernel.nki is nki and g1_kernel.nl is nl and g1_kernel.nisa is nisa
    rng = np.random.default_rng(0)
    a, b = _randn(rng, 256, 256), _randn(rng, 256, 256)
    out = g1_kernel.scaled_add(a, b)
    np.testing.assert_array_equal(out, (a * np.float32(2) + np.float32(1)) + b)
    np.testing.assert_array_equal(g1_kernel.nki.simulate_kernel(g1_kernel.scaled_add, a, b), out)


def test_compat_import_nki_is_current_api(clean_compat):
    clean_compat.install()
    import nki as nki_mod
    import nki.isa
    import nki.language
    import nki.lnc
    import nki.typing

    assert nki_mod is knit and nki.language is knit.language and nki.isa is knit.isa and nki.typing is knit.typing
    assert nki.lnc.sendrecv is knit.isa.sendrecv
    import nki.collectives
    assert nki.collectives.all_reduce is knit.collectives.all_reduce
    import neuronxcc

    assert neuronxcc.nki is sys.modules["knit.legacy"]
    assert sys.modules["neuronxcc.nki.compiler"] is sys.modules["knit.legacy.compiler"]


def test_compat_leaves_real_packages_alone(clean_compat, tmp_path, monkeypatch):
    # A real (importable) `nki` package: its family is left alone; neuronxcc is still aliased.
    pkg = tmp_path / "nki"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("REAL = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    added = clean_compat.install()
    assert not any(n == "nki" or n.startswith("nki.") for n in added)
    assert "neuronxcc.nki" in added
    import nki as real

    assert getattr(real, "REAL", False)
    sys.modules.pop("nki", None)  # forget the fake "real" package


def test_compat_uninstall(clean_compat):
    clean_compat.install()
    removed = clean_compat.uninstall()
    assert sorted(removed) == sorted(_ALIASES)
    assert not any(n in sys.modules for n in _ALIASES)
    assert clean_compat.install() == _ALIASES  # installs again


# ---- runners ------------------------------------------------------------------------------------------
def _double(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(a) * 2)
    return out


@pytest.mark.parametrize("runner", ["jit", "jit_simulation", "jit_baremetal_mode", "simulate_kernel", "baremetal",
                                    "benchmark", "platform_target"])
def test_runners(runner):
    a = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    if runner == "jit":
        out = nki.jit(_double)(a)
    elif runner == "jit_simulation":
        out = nki.jit(mode="simulation")(_double)(a)
    elif runner == "jit_baremetal_mode":
        out = nki.jit(_double, mode="baremetal", additional_compile_opt="--foo")(a)
    elif runner == "simulate_kernel":
        out = nki.simulate_kernel(_double, a)
    elif runner == "baremetal":
        out = nki.baremetal(save_neff_name="file.neff")(_double)(a)
    elif runner == "benchmark":
        k = nki.benchmark(warmup=2, iters=3)(_double)
        out = k(a)
        # Simulated timing: 2 DMAs + 1 ScalarE op on trn2, plus the fixed launch cost.
        latency = k.benchmark_result.nc_latency.get_latency_percentile(50)
        assert 15 < latency < 30 and latency == k.benchmark_result.nc_latency.get_latency_percentile(99)
    else:
        k = nki.jit(_double, platform_target="trn1")
        out = k(a)
        assert "target=trn1" in k.compile(a).ir
    np.testing.assert_array_equal(out, a * 2)


def test_sub_kernel_inlined():
    @nki.jit(mode="trace")
    def helper(t):
        return nl.exp(t)

    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, helper(nl.load(a)))
        return out

    a = np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32)
    np.testing.assert_allclose(kernel(a), np.exp(a), rtol=1e-6)


# ---- PSUM accumulation -----------------------------------------------------------------------------------
def _mm_inputs(K=384, M=128, N=512, seed=0):
    rng = np.random.default_rng(seed)
    return _randn(rng, K, M), _randn(rng, K, N)


def _close_mm(out, lhsT, rhs):
    ref = lhsT.astype(np.float64).T @ rhs.astype(np.float64)
    bound = lhsT.shape[0] * U32 * (np.abs(lhsT).T @ np.abs(rhs)) + U32 * np.abs(ref)
    assert np.all(np.abs(out - ref) <= bound)


@pytest.mark.parametrize("style", ["psum_iadd_nc_matmul", "psum_view_iadd", "psum_iadd_nl_matmul",
                                   "ndarray_psum", "assign_then_iadd", "halves", "block_psum"])
def test_psum_accumulation(style, capfd):
    @nki.jit
    def kernel(lhsT, rhs):
        K, M = lhsT.shape
        N = rhs.shape[1]
        out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
        if style == "ndarray_psum":
            acc = nl.ndarray((M, N), nl.float32, buffer=nl.psum)
        elif style == "block_psum":
            blocks = nl.zeros((2, nl.par_dim(M), N), nl.float32, buffer=nl.psum)
            acc = blocks[1]
        else:
            acc = nl.zeros((M, N), nl.float32, buffer=nl.psum)
        for k in nl.affine_range(K // 128):
            a = nl.load(lhsT[k * 128:(k + 1) * 128, :])
            b = nl.load(rhs[k * 128:(k + 1) * 128, :])
            if style == "psum_view_iadd":
                acc[...] += nisa.nc_matmul(a, b)
            elif style == "psum_iadd_nl_matmul":
                acc += nl.matmul(a, b, transpose_x=True)
            elif style == "assign_then_iadd" and k == 0:
                acc[...] = nisa.nc_matmul(a, b)
            elif style == "halves":
                acc[:, 0:N // 2] += nisa.nc_matmul(a, b[:, 0:N // 2])
                acc[:, N // 2:N] += nisa.nc_matmul(a, b[:, N // 2:N])
            else:
                acc += nisa.nc_matmul(a, b)
        nl.store(out, nl.copy(acc))
        return out

    lhsT, rhs = _mm_inputs()
    out = kernel(lhsT, rhs)
    _close_mm(out, lhsT, rhs)
    ir = kernel.compile(lhsT, rhs).ir
    assert "memset" not in ir  # the zeros are never materialized: the first matmul overwrites
    assert ir.count("nc_matmul") == (6 if style == "halves" else 3)
    assert "warning" not in capfd.readouterr().out


def test_psum_zeros_read_before_and_after_partial_matmul(capfd):
    @nki.jit
    def kernel(lhsT, rhs):
        out = nl.ndarray((2, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        acc[:, 0:256] += nisa.nc_matmul(nl.load(lhsT), nl.load(rhs[:, 0:256]))
        nl.store(out[0], nl.copy(acc))  # the other half must read as zeros
        acc += nisa.nc_matmul(nl.load(lhsT), nl.load(rhs))  # accumulate=True from now on
        nl.store(out[1], nl.copy(acc))
        return out

    lhsT, rhs = _mm_inputs(K=128)
    out = kernel(lhsT, rhs)
    ref = lhsT.astype(np.float64).T @ rhs.astype(np.float64)
    np.testing.assert_allclose(out[0][:, 0:256], ref[:, 0:256], rtol=1e-5, atol=1e-4)
    assert np.all(out[0][:, 256:] == 0)
    expected = ref.copy()
    expected[:, 0:256] *= 2
    np.testing.assert_allclose(out[1], expected, rtol=1e-5, atol=1e-4)
    assert "warning" not in capfd.readouterr().out


def test_psum_plain_read_of_zeros_and_sbuf_iadd():
    @nki.jit
    def kernel(lhsT, rhs):
        out = nl.ndarray((3, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        z = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
        nl.store(out[0], z)  # PSUM -> HBM through an SBUF copy
        s = nl.zeros((128, 512), nl.float32)  # SBUF accumulator: += adds a matmul result
        s += nisa.nc_matmul(nl.load(lhsT), nl.load(rhs))
        s += 1.0
        nl.store(out[1], s)
        r = nisa.nc_matmul(nl.load(lhsT), nl.load(rhs))  # a fresh PSUM result
        r += nisa.nc_matmul(nl.load(lhsT), nl.load(rhs))
        nl.store(out[2], r)
        return out

    lhsT, rhs = _mm_inputs(K=128)
    out = kernel(lhsT, rhs)
    ref = lhsT.astype(np.float64).T @ rhs.astype(np.float64)
    assert np.all(out[0] == 0)
    np.testing.assert_allclose(out[1], ref + 1, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(out[2], 2 * ref, rtol=1e-5, atol=1e-4)


# ---- index expressions ------------------------------------------------------------------------------------
def test_index_expressions_affine_and_strided():
    @nki.jit
    def kernel(a):
        out = nl.ndarray((3, 64, 128), dtype=a.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(64)[:, None]
        i_f = nl.arange(128)[None, :]
        t0 = nl.load(a[i_p + 64, 2 * i_f + 1])  # rows 64.., odd columns
        nl.store(out[0, i_p, i_f], t0)
        g = nl.mgrid[0:64, 0:128]
        t1 = nl.load(a[g.p, 255 - g.x])  # reversed columns
        nl.store(out[1], t1)
        i_p2, i_f2 = nl.mgrid[0:64, 0:128]
        tile = nl.load(a[0:64, 0:256])
        nl.store(out[2][i_p2, i_f2], tile[i_p2, i_f2 + 128])  # on-chip view with an offset
        return out

    a = np.arange(128 * 256, dtype=np.float32).reshape(128, 256)
    out = kernel(a)
    np.testing.assert_array_equal(out[0], a[64:128, 1::2])
    np.testing.assert_array_equal(out[1], a[0:64, ::-1][:, 0:128])
    np.testing.assert_array_equal(out[2], a[0:64, 128:256])


def test_index_expression_objects():
    i = nl.arange(8)
    assert i.shape == (8,)
    assert (i[:, None]).shape == (8, 1) and (i[None, :]).shape == (1, 8)
    e = 3 * i[None, :] + 5 - i[None, :]
    assert e.coefs == (0, 2) and e.const == 5
    g = nl.mgrid[0:4, 2:10:2]
    p, x = g
    assert g.p is p and g.x is x and x.coefs == (0, 2) and x.const == 2 and x.shape == (4, 4)
    with pytest.raises(TypeError):
        int(i)
    with pytest.raises(TypeError):
        bool(i < 3)


def test_mixing_basic_and_advanced_indexing_is_an_error():
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        t = nl.load(a[i_p, 0:64])  # MIXED-INDEX
        nl.store(out, t)
        return out

    with pytest.raises(NkiValidationError) as e:
        kernel(np.zeros((128, 64), np.float32))
    assert e.value.line == _line("# MIXED-INDEX") and "cannot be mixed" in str(e.value)


def test_unlifted_arange_on_chip_is_an_error():
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        nl.store(out, nl.copy(t[nl.arange(128), 0]))  # ONE-D-ARANGE
        return out

    with pytest.raises(NkiValidationError) as e:
        kernel(np.zeros((128, 64), np.float32))
    assert e.value.line == _line("# ONE-D-ARANGE") and "[:, None]" in str(e.value)


def test_out_of_range_index_without_mask_is_an_error():
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(64)[None, :]
        nl.store(out, nl.load(a[i_p + 64, i_f]))  # OOB-LOAD
        return out

    with pytest.raises(KnitError) as e:
        kernel(np.zeros((128, 64), np.float32))
    assert e.value.line == _line("# OOB-LOAD") and "outside tensor" in str(e.value)


# ---- masks ------------------------------------------------------------------------------------------------
def test_rectangular_masks():
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(64)[None, :]
        nl.store(out, 0.0)
        t = nl.load(a[i_p, i_f], mask=(i_p < 100) & (i_f >= 8))
        e = nl.exp(t, mask=(i_p < 100) & (i_f >= 8) & (i_f < 60))
        nl.store(out[i_p, i_f], e, mask=(i_p < 100) & (i_f >= 8) & (59 >= i_f))
        return out

    a = np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32)
    out = kernel(a)
    expected = np.zeros_like(a)
    expected[:100, 8:60] = np.exp(a[:100, 8:60])
    np.testing.assert_allclose(out, expected, rtol=1e-6)


# ---- result-returning ISA ----------------------------------------------------------------------------------
def test_isa_result_returning_ops():
    @nki.jit
    def kernel(a, b):
        out = nl.ndarray((10, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        x, y = nl.load(a), nl.load(b)
        nl.store(out[0], nisa.activation(np.exp, x, scale=0.5, bias=nisa.memset((128, 1), 1.0, nl.float32)))
        nl.store(out[1], nisa.tensor_tensor(x, y, np.maximum))
        nl.store(out[2], nisa.tensor_scalar(x, np.subtract, 1.0, reverse0=True))
        r = nisa.tensor_reduce(np.amax, x, axis=[1], keepdims=True)
        nl.store(out[3], nisa.tensor_scalar(x, nl.subtract, r))
        nl.store(out[4], nisa.reciprocal(y))
        nl.store(out[5], nisa.tensor_copy(x, dtype=nl.bfloat16))
        nl.store(out[6], nisa.memset((128, 64), 3.0, nl.float32))
        nl.store(out[7], nisa.iota(nl.arange(128)[:, None] * 64 + nl.arange(64)[None, :], dtype=nl.float32))
        i_p, i_f = nl.mgrid[0:128, 0:64]
        nl.store(out[8], nisa.affine_select(i_p >= i_f, x, -1.0))
        nl.store(out[9], nisa.scalar_tensor_tensor(data=x, op0=np.multiply, operand0=2.0, op1=np.add, operand1=y))
        return out

    rng = np.random.default_rng(0)
    a, b = _randn(rng, 128, 64), _randn(rng, 128, 64) + 3
    out = kernel(a, b)
    np.testing.assert_allclose(out[0], np.exp(a * 0.5 + 1), rtol=1e-6)
    np.testing.assert_array_equal(out[1], np.maximum(a, b))
    np.testing.assert_array_equal(out[2], 1 - a)
    np.testing.assert_array_equal(out[3], a - a.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out[4], 1 / b, rtol=1e-6)
    np.testing.assert_array_equal(out[5], a.astype(BF16).astype(np.float32))
    assert np.all(out[6] == 3)
    np.testing.assert_array_equal(out[7], np.arange(128 * 64, dtype=np.float32).reshape(128, 64))
    ii, jj = np.mgrid[0:128, 0:64]
    np.testing.assert_array_equal(out[8], np.where(ii >= jj, a, -1))
    np.testing.assert_array_equal(out[9], (a * 2) + b)


def test_isa_transpose_and_matmul_result_tiles():
    @nki.jit
    def kernel(a, b):
        out_t = nl.ndarray((64, 128), dtype=a.dtype, buffer=nl.shared_hbm)
        out_m = nl.ndarray((64, 256), dtype=nl.float32, buffer=nl.shared_hbm)
        x = nl.load(a)  # [128, 64]
        t = nisa.nc_transpose(x)  # TensorE: a PSUM tile [64, 128]
        nl.store(out_t, nl.copy(t))
        m = nisa.nc_matmul(x, nl.load(b))  # x.T @ b: [64, 256] fp32 PSUM
        nl.store(out_m, m)
        return out_t, out_m

    rng = np.random.default_rng(0)
    a, b = _randn(rng, 128, 64), _randn(rng, 128, 256)
    out_t, out_m = kernel(a, b)
    np.testing.assert_array_equal(out_t, a.T)
    _close_mm(out_m, a, b)
    ir = kernel.compile(a, b).ir
    assert "nc_transpose" in ir and "engine=tensor" in ir


def test_language_transposes_and_matmul_without_transpose_x():
    @nki.jit
    def kernel(a, b):
        out = nl.ndarray((3, 64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        x = nl.load(a)  # [128, 64]
        nl.store(out[0], nl.transpose(x))
        nl.store(out[1], nl.load_transpose2d(a))
        y = nl.load(b)  # [128, 128]
        nl.store(out[2], nl.matmul(nl.transpose(x), y))  # x.T @ y, transposing x on the Tensor Engine
        return out

    rng = np.random.default_rng(0)
    a, b = _randn(rng, 128, 64), _randn(rng, 128, 128)
    out = kernel(a, b)
    np.testing.assert_array_equal(out[0], a.T)
    np.testing.assert_array_equal(out[1], a.T)
    _close_mm(out[2], a, b)


def test_legacy_calls_outside_a_kernel():
    with pytest.raises(NkiValidationError) as e:
        nl.load(np.zeros((4, 4), np.float32))  # OUTSIDE-KERNEL
    assert e.value.rule == "no-kernel" and e.value.line == _line("# OUTSIDE-KERNEL")
    assert nl.arange(4).shape == (4,)  # index helpers need no kernel


def test_result_assigned_into_predeclared_tile_writes_directly():
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a)
        y = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        y[...] = nisa.activation(op=nl.exp, data=x)
        nl.store(out, y)
        return out

    a = np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32)
    np.testing.assert_allclose(kernel(a), np.exp(a), rtol=1e-6)
    ir = kernel.compile(a).ir
    assert "tensor_copy" not in ir and ir.count("activation") == 1


def test_dge_mode_g1_numbering_and_dma_copy():
    assert (nisa.dge_mode.none, nisa.dge_mode.swdge, nisa.dge_mode.hwdge, nisa.dge_mode.unknown) == (0, 1, 2, 3)
    assert knit.isa.dge_mode.unknown == 0 and knit.isa.dge_mode.none == 3

    @nki.jit
    def kernel(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a, dge_mode=nisa.dge_mode.hwdge)
        nisa.dma_copy(dst=t, src=b, dst_rmw_op=np.add)  # t += b
        nisa.dma_copy(t, out)  # the first G1 releases: (src, dst)
        return out

    rng = np.random.default_rng(0)
    a, b = _randn(rng, 128, 64), _randn(rng, 128, 64)
    np.testing.assert_array_equal(kernel(a, b), a + b)
    assert "dge_mode=hwdge" in kernel.compile(a, b).ir


# ---- language -------------------------------------------------------------------------------------------
def test_language_elementwise_reductions_and_promotion():
    @nki.jit
    def kernel(a, b):
        out = nl.ndarray((8, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        x, y = nl.load(a), nl.load(b)
        nl.store(out[0], (x - y) * 0.5 + 1.0)
        nl.store(out[1], nl.maximum(x, y) / y)
        nl.store(out[2], x - nl.max(x, axis=1))  # [P, 1] column broadcast along the free dim
        nl.store(out[3], nl.where(x > y, x, y))
        nl.store(out[4], nl.broadcast_to(nl.mean(x, axis=1, keepdims=True), shape=(128, 64)))
        nl.store(out[5], nl.softmax(x, axis=1))
        nl.store(out[6], -x + nl.sum(y, axis=[1], keepdims=True))
        t = nl.zeros((128, 64), nl.float32)
        t += x
        t *= 3.0
        t -= y
        nl.store(out[7], t)
        return out

    rng = np.random.default_rng(0)
    a, b = _randn(rng, 128, 64), _randn(rng, 128, 64) + 3
    out = kernel(a, b)
    np.testing.assert_allclose(out[0], (a - b) * 0.5 + 1, rtol=1e-6)
    np.testing.assert_allclose(out[1], np.maximum(a, b) / b, rtol=1e-6)
    np.testing.assert_array_equal(out[2], a - a.max(axis=1, keepdims=True))
    np.testing.assert_array_equal(out[3], np.where(a > b, a, b))
    np.testing.assert_allclose(out[4], np.broadcast_to(a.mean(axis=1, keepdims=True), (128, 64)), rtol=1e-5,
                               atol=1e-6)
    e = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(out[5], e / e.sum(1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(out[6], -a + b.sum(axis=1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(out[7], (a * 3) - b, rtol=1e-6)


@pytest.mark.parametrize("x_dtype,y,expected", [
    ("bfloat16", "float32", "float32"), ("float16", "bfloat16", "float32"), ("bfloat16", "bfloat16", "bfloat16"),
    ("int8", "uint8", "int16"), ("int8", 2, "int32"), ("bfloat16", 0.5, "float32"), ("int32", "float16", "float16"),
    ("float8_e4m3", "float8_e5m2", "bfloat16"), ("int32", "uint32", "float32"),
])
def test_dtype_promotion(x_dtype, y, expected):
    from knit.legacy import _ops

    other = knit.language.__dict__[y] if isinstance(y, str) else _ops.scalar_dtype(y)  # weak Python scalars
    assert _ops.promote(x_dtype, other) == expected
    assert _ops.promote(other, x_dtype) == expected


def test_comparisons_default_to_bool_and_load_dtype():
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=nl.bool_, buffer=nl.shared_hbm)
        out2 = nl.ndarray(a.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
        x = nl.load(a)
        c = x > 0.0
        assert c.dtype == nl.bool_
        nl.store(out, c)
        xb = nl.load(a, dtype=nl.bfloat16)
        assert xb.dtype == nl.bfloat16
        nl.store(out2, xb)
        return out, out2

    a = np.random.default_rng(0).standard_normal((128, 32)).astype(np.float32)
    out, out2 = kernel(a)
    np.testing.assert_array_equal(out, a > 0)
    np.testing.assert_array_equal(out2, a.astype(BF16))


def test_par_dim_and_block_tensors():
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        blocks = nl.ndarray((3, nl.par_dim(128), 32), dtype=a.dtype, buffer=nl.sbuf)
        assert blocks.shape == (3, 128, 32)
        plain = nl.zeros((nl.par_dim(128), 32), dtype=a.dtype)
        assert plain.shape == (128, 32)
        for i in nl.affine_range(3):
            blocks[i] = nl.load(a[i * 128:(i + 1) * 128, :])
        for i in nl.affine_range(3):
            nl.store(out[i * 128:(i + 1) * 128, :], blocks[i] + plain)
        return out

    a = np.random.default_rng(0).standard_normal((384, 32)).astype(np.float32)
    np.testing.assert_array_equal(kernel(a), a)


def test_spmd_grid_program_ids_and_shared_output():
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        assert nl.program_ndim() == 2 and nl.num_programs() == 4 and nl.num_programs(1) == 2
        i, j = nl.program_id(0), nl.program_id(1)
        rows = a[i * 128:(i + 1) * 128, j * 64:(j + 1) * 64]
        nl.store(out[i * 128:(i + 1) * 128, j * 64:(j + 1) * 64], nl.load(rows) + float(10 * i + j))
        return out

    a = np.zeros((256, 128), np.float32)
    out = kernel[2, 2](a)
    expected = np.zeros_like(a)
    for i in range(2):
        for j in range(2):
            expected[i * 128:(i + 1) * 128, j * 64:(j + 1) * 64] = 10 * i + j
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(kernel[nl.spmd_dim(nl.nc(2), 1), 2](a), expected)


def test_legacy_tensor_methods_and_constants():
    assert nl.fp32.min == np.finfo(np.float32).min
    assert nl.tile_size.pmax == 128 and nl.tile_size.psum_fmax == 512
    assert nl.float32 == np.float32 and nl.bfloat16 == BF16
    assert nki.tensor is nl.tensor

    @nki.jit
    def kernel(a):
        out = nl.ndarray((64, 256), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        flat = a.reshape((64, 256))
        t = nl.load(flat).astype(nl.bfloat16)
        t.assert_shape((64, 256))
        nl.store(out, t)
        return out

    a = np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32)
    np.testing.assert_array_equal(kernel(a), a.reshape(64, 256).astype(BF16))


# ---- errors at the user's line ------------------------------------------------------------------------------
def test_error_points_at_user_line_for_deferred_result():
    @nki.jit
    def kernel(a, b):
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        x = nl.load(a)
        y = nl.load(b)
        r = nisa.nc_matmul(x, y)  # BAD-MATMUL (K 128 vs 64)
        nl.store(out, r)
        return out

    with pytest.raises(NkiValidationError) as e:
        kernel(np.zeros((128, 128), np.float32), np.zeros((64, 128), np.float32))
    assert e.value.line == _line("# BAD-MATMUL") and e.value.rule == "matmul-shape"
    assert e.value.file == __file__


def test_partition_broadcast_and_unsupported_names():
    # A one-partition tile broadcasts over the partitions (bit-exact, through an HBM scratch row).
    @nki.jit
    def kernel(a, b, c):
        out = nl.ndarray((3, 128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        x, row, col = nl.load(a), nl.load(b), nl.load(c)
        nl.store(out[0], x + row)
        nl.store(out[1], col * row)  # [128, 1] and [1, 64] both broadcast
        nl.store(out[2], nl.broadcast_to(row, shape=(128, 64)))
        return out

    rng = np.random.default_rng(0)
    a, b, c = _randn(rng, 128, 64), _randn(rng, 1, 64), _randn(rng, 128, 1)
    out = kernel(a, b, c)
    np.testing.assert_array_equal(out[0], a + b)
    np.testing.assert_array_equal(out[1], c * b)
    np.testing.assert_array_equal(out[2], np.broadcast_to(b, (128, 64)))

    @nki.jit
    def kernel2(a):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.dropout(nl.load(a), 0.5, mask=nl.arange(128)[:, None] < 64))  # UNSUPPORTED-DROPOUT
        return out

    with pytest.raises(NkiValidationError) as e:
        kernel2(np.zeros((128, 64), np.float32))
    assert e.value.line == _line("# UNSUPPORTED-DROPOUT") and "not supported" in str(e.value)


def test_ragged_tile_computed_whole_after_masked_load():
    # G1 kernels load the last tile with a mask, compute on the whole tile, store with the mask:
    # the masked-off rows of the loaded tile are defined (zero-filled), so nothing reads
    # uninitialized memory.
    @nki.jit
    def kernel(a, g):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        rows, cols = a.shape
        ix = nl.arange(128)[:, None]
        iy = nl.arange(cols)[None, :]
        g_tile = nl.load(g.reshape((1, cols))[nl.arange(1)[:, None], iy]).broadcast_to((128, cols))
        for i in nl.affine_range((rows + 127) // 128):
            valid = i * 128 + ix < rows
            t = nl.load(a[i * 128 + ix, iy], mask=valid)
            rms = nl.rsqrt(nl.sum(nl.square(t), axis=[1]) / cols)  # unmasked, whole tile
            y = nl.ndarray((128, cols), dtype=a.dtype)
            y[...] = nl.multiply(t * rms, g_tile, mask=valid)
            nl.store(out[i * 128 + ix, iy], value=y, mask=valid)
        return out

    rng = np.random.default_rng(0)
    a, g = _randn(rng, 300, 96), _randn(rng, 96)
    ref = a / np.sqrt((a.astype(np.float64) ** 2).mean(axis=1, keepdims=True)) * g
    np.testing.assert_allclose(kernel(a, g), ref, rtol=1e-5, atol=1e-6)


def test_masked_bn_stats_and_strided_reduction_axes():
    @nki.jit
    def kernel(a):
        rows, cols = a.shape
        mean_var = nl.ndarray((rows, 2), dtype=nl.float32, buffer=nl.shared_hbm)
        pooled = nl.ndarray((rows, 4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p = nl.arange(rows)[:, None]
        i_f = nl.arange(512)[None, :]
        i_s = nl.arange(6)[None, :]
        x = nl.load(a)
        n = (cols + 511) // 512
        stats = nl.ndarray((rows, 6 * n), dtype=nl.float32)
        for j in nl.affine_range(n):
            stats[i_p, j * 6 + i_s] = nisa.bn_stats(x[i_p, j * 512 + i_f], mask=(j * 512 + i_f < cols),
                                                    dtype=nl.float32)
        nl.store(mean_var, nisa.bn_aggr(stats))
        # 2x2 average pooling of a [rows, 8, 16] view: reduce the inner window axes 2 and 4.
        i0 = nl.arange(rows)[:, None, None, None, None]
        i1 = nl.arange(4)[None, :, None, None, None]
        i2 = nl.arange(2)[None, None, :, None, None]
        i3 = nl.arange(8)[None, None, None, :, None]
        i4 = nl.arange(2)[None, None, None, None, :]
        window = x[i0, (2 * i1 + i2) * 16 + 2 * i3 + i4]
        nl.store(pooled, nl.sum(window, axis=[2, 4]) * 0.25)
        return mean_var, pooled

    a = np.random.default_rng(0).standard_normal((64, 700)).astype(np.float32)
    mean_var, pooled = kernel(a)
    np.testing.assert_allclose(mean_var[:, 0], a.mean(axis=1), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(mean_var[:, 1], a.var(axis=1), rtol=1e-4)
    win = a[:, :128].reshape(64, 4, 2, 8, 2).astype(np.float64)
    np.testing.assert_allclose(pooled, win.mean(axis=(2, 4)), rtol=1e-5, atol=1e-6)


def test_hbm_par_dim_and_output_arguments():
    # nki.trace / baremetal kernels that write output arguments in place (no return value).
    @nki.trace
    def kernel(a, out):
        B, N, M = a.shape
        tiles = nl.ndarray((B, nl.par_dim(N), M), dtype=a.dtype, buffer=nl.sbuf)
        scratch = nl.ndarray((B, nl.par_dim(N), M), dtype=a.dtype, buffer=nl.hbm)  # HBM: par_dim ignored
        assert scratch.shape == (B, N, M)
        for b in nl.affine_range(B):
            tiles[b] = nl.load(a[b])
            nl.store(scratch[b], nl.exp(tiles[b]))
            nl.store(out[b], nl.load(scratch[b]))

    a = np.random.default_rng(0).standard_normal((3, 128, 32)).astype(np.float32)
    out = np.zeros_like(a)
    assert nki.simulate_kernel(kernel, a, out) is None
    np.testing.assert_allclose(out, np.exp(a), rtol=1e-6)


def test_functions_computed_by_the_current_api():
    # cos/tan/floor/ceil/trunc/rms_norm are built from other instructions by knit.language.
    @nki.jit
    def kernel(a, w):
        out = nl.ndarray((5, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        x = nl.load(a)
        nl.store(out[0], nl.cos(x))
        nl.store(out[1], nl.floor(x * 3.0))
        nl.store(out[2], nl.ceil(x * 3.0))
        nl.store(out[3], nl.trunc(x * 3.0))
        nl.store(out[4], nl.rms_norm(x, w, axis=1, n=64))
        return out

    rng = np.random.default_rng(0)
    a, w = _randn(rng, 128, 64), _randn(rng, 1, 64)
    out = kernel(a, w)
    np.testing.assert_allclose(out[0], np.cos(a), atol=1e-5)
    x3 = a * np.float32(3)
    np.testing.assert_array_equal(out[1], np.floor(x3))
    np.testing.assert_array_equal(out[2], np.ceil(x3))
    np.testing.assert_array_equal(out[3], np.trunc(x3))
    ref = a / np.sqrt((a.astype(np.float64) ** 2).mean(axis=1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(out[4], ref, rtol=1e-5, atol=1e-6)


def test_load_from_sbuf_and_store_to_sbuf_are_errors():
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        nl.store(nl.ndarray((128, 64), nl.float32), t)  # STORE-SBUF
        return out

    with pytest.raises(NkiValidationError) as e:
        kernel(np.zeros((128, 64), np.float32))
    assert e.value.line == _line("# STORE-SBUF") and e.value.rule == "buffer"


def test_ops_usable_as_isa_operators():
    # Legacy nl.* objects and NumPy ufuncs both work as op= of the current ISA too.
    assert knit.isa._op_name(nl.add, "alu", "op", None) == "add"
    assert knit.isa._op_name(nl.max, "alu", "op", None) == "maximum"
    assert knit.isa._op_name(nl.exp, "act", "op", None) == "exp"
    assert knit.isa._op_name(nl.copy, "act", "op", None) == "copy"
    assert knit.isa._op_name(np.amax, "alu", "op", None) == "maximum"


def test_legacy_source_text_runs_via_compat_in_a_fresh_interpreter(tmp_path):
    # End to end in a clean process: install() then the original G1 imports.
    import subprocess

    script = tmp_path / "run_g1.py"
    script.write_text("import knit.compat\nknit.compat.install()\n" + textwrap.dedent(G1_SOURCE) + textwrap.dedent('''
        a = np.ones((256, 256), np.float32)
        b = np.full((256, 256), 2.0, np.float32)
        out = nki.simulate_kernel(scaled_add, a, b)
        assert (out == 5.0).all(), out
        print("ok")
    '''))
    env = dict(os.environ, PYTHONPATH=os.path.join(_REPO, "python"))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_legacy_nc_stream_shuffle_in_place():
    mask = [31 - i for i in range(32)]

    @nki.jit
    def reverse_quadrant(a):
        src = nl.load(a)
        dst = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.nc_stream_shuffle(src, dst, mask)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, dst)
        return out

    a = np.arange(32 * 4, dtype=np.float32).reshape(32, 4)
    np.testing.assert_array_equal(reverse_quadrant(a), a[::-1])
