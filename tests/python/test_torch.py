"""knit.torch: Knit kernels as torch.library custom ops, checked against torch itself.

Schema inference, the CPU implementation (the simulator) against torch's own ops, the fake
implementation (shapes only, no simulation), torch.library.opcheck on every op of
examples/torch/ops.py, autograd against torch autograd, torch.compile(fullgraph=True) against
eager, mutation rules, dtypes, and the transformer-block example's training against pure torch.
"""
import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import knit  # noqa: E402
import knit.isa as nisa  # noqa: E402
import knit.language as nl  # noqa: E402
import knit.torch as ktorch  # noqa: E402
from kernel_test_util import load_tile, store_tile  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "torch"))
import ops  # noqa: E402
import transformer_block  # noqa: E402

_COUNTER = iter(range(10 ** 6))


def unique(name):
    """A fresh op name: torch.library names are process-wide and cannot be registered twice."""
    return f"knit_test::{name}_{next(_COUNTER)}"


_load, _store = load_tile, store_tile  # (kernel_test_util)


@knit.jit
def scale_shift(x, scale: float, shift=0.5, twice=False):
    t = _load(x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=scale, op1=nl.add, operand1=shift)
    if twice:
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    return _store(t)


@knit.jit
def sum_and_diff(a, b):
    ta, tb = _load(a), _load(b)
    s = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    d = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=s, data1=ta, data2=tb, op=nl.add)
    nisa.tensor_tensor(dst=d, data1=ta, data2=tb, op=nl.subtract)
    return _store(s), _store(d)


@knit.jit
def double_in_place(x):
    t = _load(x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=x, src=t)


# ---- schema ---------------------------------------------------------------------------------------


def test_schema_from_signature_defaults_annotations_and_returns():
    op = ktorch.op(unique("scale_shift"), scale_shift)
    assert op.schema == "(Tensor x, float scale, float shift=0.5, bool twice=False) -> Tensor"
    two = ktorch.op(unique("sum_and_diff"), sum_and_diff)
    assert two.schema == "(Tensor a, Tensor b) -> (Tensor, Tensor)"
    inplace = ktorch.op(unique("double"), double_in_place, mutates_args=("x",))
    assert inplace.schema == "(Tensor(a0!) x) -> ()"
    assert str(inplace.op._schema).endswith("(Tensor(a0!) x) -> ()")


@pytest.mark.slow
def test_scalars_and_defaults_reach_the_kernel():
    op = ktorch.op(unique("scale_shift"), scale_shift)
    x = torch.randn(64, 32)
    torch.testing.assert_close(op(x, 3.0), x * 3.0 + 0.5, rtol=0, atol=1e-6)
    torch.testing.assert_close(op(x, 3.0, shift=-1.0, twice=True), (x * 3.0 - 1.0) * 2.0, rtol=0, atol=1e-5)


@pytest.mark.slow
def test_several_outputs_and_bf16():
    op = ktorch.op(unique("sum_and_diff"), sum_and_diff)
    a, b = torch.randn(128, 64).bfloat16(), torch.randn(128, 64).bfloat16()
    s, d = op(a, b)
    assert s.dtype == d.dtype == torch.bfloat16
    # fp32 arithmetic rounded once to bf16: torch's bf16 add rounds the same exact sum the same way
    assert torch.equal(s, a + b) and torch.equal(d, a - b)


def test_bad_declarations_are_clear_errors():
    with pytest.raises(knit.KnitError, match="not parameters of the kernel"):
        ktorch.op(unique("bad"), double_in_place, mutates_args=("y",))
    with pytest.raises(knit.KnitError, match="defaults to"):
        ktorch.op(unique("bad"), knit.jit(lambda x, opts={}: x))
    op = ktorch.op(unique("wrong_count"), sum_and_diff, num_outputs=1)
    with pytest.raises(knit.KnitError, match="returned 2 tensor"):
        op(torch.randn(8, 8), torch.randn(8, 8))


def test_a_result_dtype_torch_lacks_is_a_clear_error():
    @knit.jit
    def to_e4m3(x):
        return _store(_load(x), nl.float8_e4m3)

    op = ktorch.op(unique("to_e4m3"), to_e4m3)
    with pytest.raises(knit.KnitError, match="float8_e4m3 has no torch counterpart"):
        op(torch.randn(16, 16))


def test_an_undeclared_mutation_is_an_error_naming_the_argument():
    op = ktorch.op(unique("double_undeclared"), double_in_place)
    with pytest.raises(knit.KnitError, match=r"writes its argument\(s\) \['x'\].*mutates_args"):
        op(torch.randn(16, 8))


@pytest.mark.slow
def test_declared_mutation_writes_in_place_and_passes_opcheck():
    op = ktorch.op(unique("double"), double_in_place, mutates_args=("x",))
    x = torch.randn(64, 16)
    before = x.clone()
    assert op(x) is None
    assert torch.equal(x, before * 2)
    torch.library.opcheck(op.op, (torch.randn(64, 16),))


# ---- fake implementation ----------------------------------------------------------------------------


def test_fake_impl_traces_shapes_without_simulating(monkeypatch):
    from torch._subclasses.fake_tensor import FakeTensorMode

    def no_simulation(*args, **kwargs):
        raise AssertionError("the fake implementation must not run the simulator")

    monkeypatch.setattr(knit._kernel.Compiled, "run", no_simulation)
    with FakeTensorMode():
        a, b = torch.empty(300, 96, dtype=torch.bfloat16), torch.empty(300, 96, dtype=torch.bfloat16)
        out = ops.tensor_add(a, b)
        lhsT, rhs = torch.empty(256, 128), torch.empty(256, 512)
        mm = ops.matmul(lhsT, rhs)
    assert (tuple(out.shape), out.dtype) == ((300, 96), torch.bfloat16)
    assert (tuple(mm.shape), mm.dtype) == ((128, 512), torch.float32)


def test_a_kernel_error_at_trace_time_points_at_the_kernel():
    """The kernel's own shape assertion fails while tracing (eagerly, and in the fake impl under
    torch.compile), with the kernel's line in the traceback."""
    with pytest.raises(AssertionError) as info:
        ops.matmul(torch.randn(100, 128), torch.randn(100, 128))
    assert any(entry.path.name == "matmul.py" for entry in info.traceback)


# ---- opcheck --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ops.OPS))
@pytest.mark.slow
def test_opcheck_every_example_op(name):
    op, make = ops.OPS[name]
    torch.manual_seed(0)
    torch.library.opcheck(op.op, make())


@pytest.mark.parametrize("name", ["rmsnorm", "matmul", "softmax"])
@pytest.mark.slow
def test_opcheck_with_gradients(name):
    op, make = ops.OPS[name]
    torch.manual_seed(1)
    args = tuple(a.requires_grad_() for a in make())
    torch.library.opcheck(op.op, args)


# ---- eager results against torch ---------------------------------------------------------------------


def test_example_ops_match_torch():
    torch.manual_seed(2)
    x, w = torch.randn(200, 256), torch.randn(256)
    torch.testing.assert_close(ops.softmax(x), torch.softmax(x, -1), rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(ops.rmsnorm(x, w), x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w,
                               rtol=1e-5, atol=1e-5)
    b = torch.randn(256)
    torch.testing.assert_close(ops.layernorm(x, w, b), torch.nn.functional.layer_norm(x, (256,), w, b),
                               rtol=1e-4, atol=1e-4)
    lhsT, rhs = torch.randn(256, 128), torch.randn(256, 512)
    torch.testing.assert_close(ops.matmul(lhsT, rhs), lhsT.t() @ rhs, rtol=1e-5, atol=1e-4)
    t = torch.randn(256, 128)
    assert torch.equal(ops.transpose(t), t.t())


# ---- autograd -------------------------------------------------------------------------------------


def _grads(fn, *inputs, grad_out):
    leaves = [a.detach().clone().requires_grad_() for a in inputs]
    fn(*leaves).backward(grad_out)
    return [a.grad for a in leaves]


def _torch_rmsnorm(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-5), (torch.bfloat16, 2e-2)])
def test_rmsnorm_backward_kernel_matches_torch_autograd(dtype, tol):
    """The backward is a Knit kernel (examples/kernels/python/rmsnorm_backward.py): its dx and dw
    against torch autograd of the same formula in fp32 (bf16: rounded inputs/outputs)."""
    torch.manual_seed(3)
    x, w = torch.randn(200, 256).to(dtype), torch.randn(256).to(dtype)
    g = torch.randn(200, 256).to(dtype)
    got = _grads(ops.rmsnorm, x, w, grad_out=g)
    want = _grads(lambda a, b: _torch_rmsnorm(a.float(), b.float()), x.float(), w.float(), grad_out=g.float())
    for k, (a, b) in enumerate(zip(got, want)):
        assert a.dtype == dtype
        scale = b.abs().max().item()
        assert (a.float() - b).abs().max().item() <= tol * scale, f"gradient {k}"


def test_matmul_and_softmax_gradients_match_torch():
    torch.manual_seed(4)
    lhsT, rhs, g = torch.randn(128, 128), torch.randn(128, 256), torch.randn(128, 256)
    for a, b in zip(_grads(ops.matmul, lhsT, rhs, grad_out=g), _grads(lambda p, q: p.t() @ q, lhsT, rhs, grad_out=g)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-4)
    x, gx = torch.randn(128, 256), torch.randn(128, 256)
    torch.testing.assert_close(_grads(ops.softmax, x, grad_out=gx)[0],
                               _grads(lambda t: torch.softmax(t, -1), x, grad_out=gx)[0], rtol=1e-4, atol=1e-6)


def test_backward_kernel_becomes_its_own_op():
    assert isinstance(ops.rmsnorm.backward_op, ktorch.KnitOp)
    assert ops.rmsnorm.backward_op.schema == "(Tensor x, Tensor w, Tensor g) -> (Tensor, Tensor)"


# ---- torch.compile --------------------------------------------------------------------------------


class SmallModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(128))
        self.proj = torch.nn.Parameter(torch.randn(128, 256) * 0.1)

    def forward(self, x):
        h = ops.rmsnorm(x, self.w)
        h = ops.matmul(h.t().contiguous(), self.proj)
        return ops.softmax(torch.relu(h) * 2)


@pytest.mark.slow
def test_torch_compile_fullgraph_matches_eager():
    torch.manual_seed(5)
    model, x = SmallModel(), torch.randn(128, 128)
    eager = model(x)
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True)  # fullgraph: a graph break is an error
    torch.testing.assert_close(compiled(x), eager, rtol=1e-6, atol=1e-7)
    counts = torch._dynamo.utils.counters["stats"]
    assert counts["unique_graphs"] >= 1


@pytest.mark.slow
def test_torch_compile_training_step_matches_eager():
    """Backward through the ops' autograd under torch.compile (aot_eager: the graphs as
    captured, without Inductor's codegen time)."""
    torch.manual_seed(6)
    x = torch.randn(128, 128)

    def step(model):
        loss = model(x).pow(2).sum()
        loss.backward()
        return loss.detach(), model.w.grad.clone(), model.proj.grad.clone()

    eager_model = SmallModel()
    compiled_model = SmallModel()
    compiled_model.load_state_dict(eager_model.state_dict())
    torch._dynamo.reset()
    want = step(eager_model)
    got = step(torch.compile(compiled_model, fullgraph=True, backend="aot_eager"))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_dynamic_shapes_specialize_per_shape():
    torch._dynamo.reset()
    f = torch.compile(lambda t: ops.softmax(t) * 2, fullgraph=True, dynamic=True)
    for rows in (130, 200):
        t = torch.randn(rows, 64)
        torch.testing.assert_close(f(t), torch.softmax(t, -1) * 2, rtol=1e-5, atol=1e-7)


def test_data_dependent_shapes_are_a_clear_error(monkeypatch):
    monkeypatch.setattr(torch._dynamo.config, "capture_dynamic_output_shape_ops", True)
    torch._dynamo.reset()
    f = torch.compile(lambda t: ops.softmax(t[t[:, 0] > 0]), fullgraph=True)
    with pytest.raises(Exception, match=r"softmax\.py:\d+: error: \[torch-dynamic-shape\].*no value to specialize on"):
        f(torch.randn(200, 64))


# ---- the end-to-end example ----------------------------------------------------------------------------


@pytest.mark.slow
def test_transformer_block_trains_like_pure_torch(monkeypatch):
    """examples/torch/transformer_block.py: three SGD steps of the Knit block follow the pure
    torch block's losses (relative 1e-5), and the Knit ops really ran (counted)."""
    calls = {}
    real_run = knit._kernel.Compiled.run

    def counting(self, *args, **kwargs):
        name = self.kernel.fn.__name__
        calls[name] = calls.get(name, 0) + 1
        return real_run(self, *args, **kwargs)

    monkeypatch.setattr(knit._kernel.Compiled, "run", counting)
    data = transformer_block.make_data()
    want = transformer_block.train(transformer_block.Block(use_knit=False), data, 3)
    got = transformer_block.train(transformer_block.Block(use_knit=True), data, 3)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert want[-1] < want[0]  # it learns
    # per step: 2 rmsnorms and their 2 backward kernels; 8 matmuls (q, k, v, o, q k^T, p v, the
    # 2 MLP layers) and 2 backward matmuls each; 1 softmax
    assert calls == {"rmsnorm_kernel": 6, "matmul_kernel": 72, "softmax_kernel": 3, "rmsnorm_backward_kernel": 6}


def test_transformer_block_reports_simulated_latencies():
    lat = transformer_block.op_latencies()
    assert len(lat) == 6 and all(0 < us < 1000 for us in lat.values())


# ---- C++ kernels registered with TORCH_LIBRARY (<knit/torch.h>) -------------------------------------

CPP_OPS_LIBRARY = os.path.join(ROOT, "build", "examples", "torch", "cpp", "libknit_torch_ops.so")


@pytest.fixture(scope="module")
def knit_cpp():
    if not os.path.exists(CPP_OPS_LIBRARY):
        pytest.skip("build/examples/torch/cpp/libknit_torch_ops.so not built (CMake found no torch to build against)")
    torch.ops.load_library(CPP_OPS_LIBRARY)
    return torch.ops.knit_cpp


CPP_CASES = {
    "tensor_add": (lambda: (torch.randn(200, 64), torch.randn(200, 64)), lambda a, b: a + b),
    "softmax": (lambda: (torch.randn(200, 256),), lambda x: torch.softmax(x, -1)),
    "rmsnorm": (lambda: (torch.randn(200, 256), torch.randn(256)),
                lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w),
    "matmul": (lambda: (torch.randn(128, 128), torch.randn(128, 512)), lambda a, b: a.t() @ b),
}


@pytest.mark.parametrize("name", sorted(CPP_CASES))
@pytest.mark.slow
def test_cpp_op_passes_opcheck_and_matches_torch(knit_cpp, name):
    make, reference = CPP_CASES[name]
    torch.manual_seed(7)
    args = make()
    op = getattr(knit_cpp, name)
    torch.library.opcheck(op.default, args)
    torch.testing.assert_close(op(*args), reference(*args), rtol=1e-5, atol=1e-4)
    bf16 = tuple(a.bfloat16() for a in args)
    got = op(*bf16)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), reference(*(a.float() for a in bf16)), rtol=2e-2, atol=2e-2)


@pytest.mark.slow
def test_cpp_op_under_torch_compile(knit_cpp):
    torch._dynamo.reset()
    x, w = torch.randn(128, 256), torch.randn(256)
    f = torch.compile(lambda a, b: knit_cpp.softmax(knit_cpp.rmsnorm(a, b)) * 3, fullgraph=True)
    torch.testing.assert_close(f(x, w), knit_cpp.softmax(knit_cpp.rmsnorm(x, w)) * 3, rtol=1e-6, atol=1e-7)


def test_cpp_op_error_names_the_kernel_source_line(knit_cpp):
    with pytest.raises(RuntimeError, match=r"examples/kernels/cpp/matmul\.cpp:\d+:\d+: error: \[view-out-of-range\]"):
        knit_cpp.matmul(torch.randn(100, 128), torch.randn(100, 512))
    with pytest.raises(RuntimeError, match="has no Knit counterpart"):
        knit_cpp.softmax(torch.randn(128, 64, dtype=torch.float64))
