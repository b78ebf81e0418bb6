"""The Python example kernels (examples/kernels/python/*.py) against their NumPy references.

Each example is run on random inputs in float32 and in bfloat16 (ml_dtypes), from NumPy arrays
and, when torch is installed, from torch tensors (torch in -> torch out). The reference is each
example's ``reference(*inputs)``, evaluated in float64 on exactly the values the kernel receives
(bf16 inputs are converted exactly), so the tolerances below only cover the kernel's own rounding.

Tolerances (per element; u32 = 2^-24 and EPS_BF16 = 2^-8 are the unit roundoffs of fp32 and
bf16, i.e. the largest relative error of one round-to-nearest into a 24- / 8-bit significand):

  |out - ref| <= n * u32 * mag  +  r * |ref|          r = u32 (fp32 out) or EPS_BF16 (bf16 out)

where ``mag`` is the magnitude of the terms an output element accumulates and ``n`` the number
of fp32 roundings on the way (the usual gamma_n bound of a length-n fp32 sum):

  tensor_add  n = 1,            mag = |a| + |b|              (one rounding: exact-rounded in fp32)
  transpose   exact (bit for bit, the data is only moved)
  matmul      n = K,            mag = |lhsT|.T @ |rhs|       (K-dependent: fp32 sum over K in PSUM)
  softmax     n = cols + 32,    mag = |ref|                  (row sum over cols, exp, reciprocal)
  rmsnorm     n = cols + 32,    mag = |ref|                  (sum of squares over cols, rsqrt)
  layernorm   n = cols + 32,    mag = ((|x| + mean|x|) * rstd) * |gamma| + |beta|
  attention   n = 2 * d * max_row(|q| @ |k|.T / sqrt(d)) + seq + 32,  mag = softmax @ |v|
              (a score's fp32 error d * u32 * sum|q k| becomes a relative error of its
              probability); bf16 also rounds the probabilities to bf16 before the second
              matmul: + EPS_BF16 * mag.

So an fp32 result must be within ~1e-5 relative to ``mag`` for n up to ~170 and within
n * u32 (6e-5 at n = 1024) beyond: the bound grows with K / cols. A bf16 result must be within
2^-8 relative plus that accumulation term: in bf16 the matmul products are exact in fp32 and
every accumulation stays fp32, so bf16 adds only the output rounding (and, for attention, the
bf16 probabilities). Both terms are rigorous bounds, not fitted margins: measured fp32 errors
are 0.3-10% of the bound (50% for tensor_add's single rounding) and bf16 errors use up to ~100%
of the output-rounding term, as round-to-nearest does.

Attention runs at seq = 512, 1024 and 2048 (about 0.3, 0.8 and 3 s each on the reference
interpreter, so no size is left out of the default run).
"""
import math
import os
import re
import runpy

import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes")

import knit  # noqa: E402  (tests/python/conftest.py puts python/ on sys.path)
from kernel_test_util import load_example  # noqa: E402

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_EXAMPLES = os.path.join(_REPO, "examples", "kernels", "python")

U32 = 2.0 ** -24
EPS_BF16 = 2.0 ** -8
DTYPES = {"float32": np.dtype(np.float32), "bfloat16": np.dtype(ml_dtypes.bfloat16)}


def example(name):
    return load_example(f"{name}.py")


# ---- per-example inputs and tolerances -------------------------------------------------------
# inputs(rng) -> float32 arrays; tol(x, ref) -> (n, mag) of the bound above, x the float64 inputs.


def _add_tol(x, ref):
    a, b = x
    return 1, np.abs(a) + np.abs(b)


def _matmul_tol(x, ref):
    lhsT, rhs = x
    return lhsT.shape[0], np.abs(lhsT).T @ np.abs(rhs)


def _softmax_tol(x, ref):
    return x[0].shape[1] + 32, np.abs(ref)


def _rmsnorm_tol(x, ref):
    return x[0].shape[1] + 32, np.abs(ref)


def _layernorm_tol(x, ref):
    xx, gamma, beta = x
    rstd = 1.0 / np.sqrt(xx.var(axis=1, keepdims=True) + 1e-5)
    mag = (np.abs(xx) + np.abs(xx).mean(axis=1, keepdims=True)) * rstd * np.abs(gamma) + np.abs(beta)
    return xx.shape[1] + 32, mag


def _attention_tol(x, ref):
    q, k, v = x
    seq, d = q.shape
    s = q @ k.T / math.sqrt(d)
    causal = np.tril(np.ones((seq, seq), dtype=bool))
    s = np.where(causal, s, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    s_abs = np.where(causal, np.abs(q) @ np.abs(k).T / math.sqrt(d), 0.0)
    n = 2 * d * s_abs.max(axis=1, keepdims=True) + seq + 32
    return n, p @ np.abs(v)


def _randn(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


CASES = {
    # name: (example module, inputs(rng), tolerance or None for exact)
    "tensor_add": ("tensor_add", lambda r: [_randn(r, 300, 512), _randn(r, 300, 512)], _add_tol),
    "matmul": ("matmul", lambda r: [_randn(r, 512, 256), _randn(r, 512, 1024)], _matmul_tol),
    "matmul_small_n": ("matmul", lambda r: [_randn(r, 256, 128), _randn(r, 256, 384)], _matmul_tol),
    "transpose": ("transpose", lambda r: [_randn(r, 256, 384)], None),
    "softmax": ("softmax", lambda r: [_randn(r, 300, 1024) * 4], _softmax_tol),
    "rmsnorm": ("rmsnorm", lambda r: [_randn(r, 300, 1024), _randn(r, 1024)], _rmsnorm_tol),
    "layernorm": ("layernorm", lambda r: [_randn(r, 300, 1000) * 3 + 1, _randn(r, 1000), _randn(r, 1000)],
                  _layernorm_tol),
    "attention_512": ("attention", lambda r: [_randn(r, 512, 128) for _ in range(3)], _attention_tol),
    "attention_1024": ("attention", lambda r: [_randn(r, 1024, 128) for _ in range(3)], _attention_tol),
    "attention_2048": ("attention", lambda r: [_randn(r, 2048, 128) for _ in range(3)], _attention_tol),
    # Realistic sizes (test_example_at_realistic_size only): bench/jit_speed.py's shapes, and
    # attention over a 4096-token sequence.
    "matmul_2048": ("matmul", lambda r: [_randn(r, 2048, 2048), _randn(r, 2048, 2048)], _matmul_tol),
    "tensor_add_2048": ("tensor_add", lambda r: [_randn(r, 2048, 2048), _randn(r, 2048, 2048)], _add_tol),
    "softmax_2048": ("softmax", lambda r: [_randn(r, 2048, 2048) * 4], _softmax_tol),
    "rmsnorm_2048": ("rmsnorm", lambda r: [_randn(r, 2048, 2048), _randn(r, 2048)], _rmsnorm_tol),
    "layernorm_2048": ("layernorm", lambda r: [_randn(r, 2048, 2048) * 3 + 1, _randn(r, 2048), _randn(r, 2048)],
                       _layernorm_tol),
    "attention_4096": ("attention", lambda r: [_randn(r, 4096, 128) for _ in range(3)], _attention_tol),
}
# The realistic-size cases, each in one dtype: the matmuls in bf16 (bf16 inputs, fp32 PSUM, as
# on the hardware), the row kernels in fp32.
REALISTIC = {"matmul_2048": "bfloat16", "attention_4096": "bfloat16", "tensor_add_2048": "float32",
             "softmax_2048": "float32", "rmsnorm_2048": "float32", "layernorm_2048": "float32"}
SMALL_CASES = [case for case in CASES if case not in REALISTIC]
KERNELS = {
    "tensor_add": "tensor_add_kernel",
    "matmul": "matmul_kernel",
    "transpose": "transpose_kernel",
    "softmax": "softmax_kernel",
    "rmsnorm": "rmsnorm_kernel",
    "layernorm": "layernorm_kernel",
    "attention": "attention_kernel",
    "rmsnorm_backward": "rmsnorm_backward_kernel",
}


def make_inputs(case, dtype_name, seed=0):
    _, make, _ = CASES[case]
    rng = np.random.default_rng(seed)
    return [a.astype(DTYPES[dtype_name]) for a in make(rng)]


def check_output(case, dtype_name, inputs, out):
    """Compares a kernel's output (NumPy) with the example's reference under the bound above."""
    module_name, _, tol = CASES[case]
    module = example(module_name)
    x = [np.asarray(a).astype(np.float64) for a in inputs]
    ref = np.asarray(module.reference(*x), dtype=np.float64)
    out = np.asarray(out)
    assert out.dtype == DTYPES[dtype_name], f"output dtype {out.dtype}, expected {dtype_name}"
    assert out.shape == ref.shape, f"output shape {out.shape}, expected {ref.shape}"
    if tol is None:
        expected = np.asarray(module.reference(*inputs))
        np.testing.assert_array_equal(out.view(np.uint8), np.ascontiguousarray(expected).view(np.uint8))
        return
    n, mag = tol(x, ref)
    rel = EPS_BF16 if dtype_name == "bfloat16" else U32
    bound = n * U32 * mag + rel * np.abs(ref)
    if dtype_name == "bfloat16" and module_name == "attention":
        bound = bound + EPS_BF16 * mag
    err = np.abs(out.astype(np.float64) - ref)
    assert np.all(np.isfinite(out)), "non-finite values in the output"
    worst = np.unravel_index(np.argmax(err / bound), err.shape)
    assert np.all(err <= bound), (
        f"{case}/{dtype_name}: error {err[worst]:.3g} at {worst} exceeds the bound {bound[worst]:.3g} "
        f"(out {out[worst]}, ref {ref[worst]:.8g})"
    )


# ---- NumPy in, NumPy out --------------------------------------------------------------------


def run_and_check(case, dtype_name):
    """Runs the example of `case` on NumPy inputs (on the session's backend) and checks its output
    against the reference, and that its inputs were only read. Returns the run's last_run."""
    module_name = CASES[case][0]
    kernel = getattr(example(module_name), KERNELS[module_name])
    inputs = make_inputs(case, dtype_name)
    originals = [a.copy() for a in inputs]
    compiled = knit.compile(kernel, *inputs)
    out = compiled(*inputs)
    assert isinstance(out, np.ndarray)
    check_output(case, dtype_name, inputs, out)
    for a, b in zip(inputs, originals):
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))
    return compiled.last_run


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("case", SMALL_CASES)
def test_example_numpy(case, dtype_name):
    run_and_check(case, dtype_name)


@pytest.mark.parametrize("case", list(REALISTIC))
@pytest.mark.slow
def test_example_at_realistic_size(case):
    """The examples at the sizes a model runs them (a 2048^3 bf16 matmul, 2048x2048 rows, 4096-token
    attention), with the same rigorous bounds: several loop iterations of every tile, PSUM
    accumulation over K = 2048. They run on the session's backend: on the default jit backend
    they are above the break-even (docs/jit.md), so it compiles them before running, which is
    asserted (every instruction native); under --knit-backend reference only the output is
    checked."""
    last_run = run_and_check(case, REALISTIC[case])
    if last_run["backend"].startswith("jit"):
        assert last_run["native"] > 0 and last_run["interpreted"] == 0, last_run


# ---- torch in, torch out ----------------------------------------------------------------------


def _torch():
    try:
        import torch
    except ImportError:
        pytest.skip("torch not installed")
    return torch


def _to_torch(torch, a):
    if a.dtype == DTYPES["bfloat16"]:
        return torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16)
    return torch.from_numpy(a.copy())


_TORCH_CASES = ["tensor_add", "matmul", "transpose", "softmax", "rmsnorm", "layernorm", "attention_512"]


@pytest.mark.parametrize("dtype_name", list(DTYPES))
@pytest.mark.parametrize("case", _TORCH_CASES)
def test_example_torch(case, dtype_name):
    torch = _torch()
    module_name = CASES[case][0]
    kernel = getattr(example(module_name), KERNELS[module_name])
    inputs = make_inputs(case, dtype_name)
    out = kernel(*[_to_torch(torch, a) for a in inputs])
    assert isinstance(out, torch.Tensor)
    want = torch.float32 if dtype_name == "float32" else torch.bfloat16
    assert out.dtype == want
    out_np = out.float().numpy().astype(DTYPES[dtype_name])
    check_output(case, dtype_name, inputs, out_np)


# ---- the examples' own __main__ blocks -------------------------------------------------------


@pytest.mark.parametrize("module_name", sorted(KERNELS))
@pytest.mark.slow
def test_example_main_block(module_name, capsys):
    """Every example defines its kernel and reference(), imports Knit only under NKI's names (so
    swapping the imports runs it on NKI), and its __main__ block runs and prints a small error."""
    path = os.path.join(_EXAMPLES, f"{module_name}.py")
    with open(path) as f:
        source = f.read()
    module = example(module_name)
    assert callable(module.reference)
    assert isinstance(getattr(module, KERNELS[module_name]), knit.Kernel)
    knit_imports = sorted(line.strip() for line in source.splitlines() if line.startswith(("import knit", "from knit")))
    assert knit_imports == ["import knit as nki", "import knit.isa as nisa", "import knit.language as nl"]
    runpy.run_path(path, run_name="__main__")
    printed = capsys.readouterr().out
    match = re.search(r"max abs error ([0-9.e+-]+)", printed)
    assert match, printed
    assert float(match.group(1)) < 1e-4, printed
