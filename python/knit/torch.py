"""knit.torch: Knit kernels as PyTorch operators (``torch.library`` custom ops).

    import knit.torch

    @knit.torch.op("my_lib::rmsnorm")
    @knit.jit
    def rmsnorm_kernel(x, w): ...

    y = rmsnorm_kernel(x, w)            # torch tensors in, torch tensors out (CPU, simulated)
    torch.ops.my_lib.rmsnorm(x, w)      # the same op, as PyTorch sees it

The op's schema comes from the kernel's signature (tensors, ints, floats, bools; defaults kept)
and from the ``return`` statements (how many tensors it returns). The CPU implementation runs the
kernel on Knit's simulator; the fake implementation traces the kernel with shape placeholders
only (no simulation), so ``torch.compile`` and ``opcheck`` see real output shapes and dtypes.
See docs/torch.md.
"""
import ast
import inspect
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

import torch

from . import _kernel
from ._dtypes import to_dtype
from ._kernel import Kernel, jit
from .errors import user_error
from .profile import profile as _simulate
from .typing import TensorType

__all__ = ["op", "KnitOp", "torch_dtype", "knit_dtype"]

# ---- dtypes --------------------------------------------------------------------------------------

# Knit dtype <-> torch dtype, for the element types both have with the same encoding.
_TORCH_OF_KNIT = {
    "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
    "int8": torch.int8, "int16": torch.int16, "int32": torch.int32, "uint8": torch.uint8,
    "uint16": torch.uint16, "uint32": torch.uint32, "bool": torch.bool,
    "float8_e5m2": torch.float8_e5m2, "float8_e4m3fn": torch.float8_e4m3fn,
}
_KNIT_OF_TORCH = {t: k for k, t in _TORCH_OF_KNIT.items()}


def torch_dtype(dtype: Any, where: tuple | None = None) -> torch.dtype:
    """The torch dtype of a Knit dtype; a clear error for the Knit types torch lacks."""
    name = str(to_dtype(dtype))
    if name not in _TORCH_OF_KNIT:
        raise user_error("torch-dtype", f"Knit dtype {name} has no torch counterpart (torch's float8_e4m3fn is "
                                        f"Knit's float8_e4m3fn; the MX and tfloat32 types are internal); return a "
                                        f"supported dtype from the op", where)
    return _TORCH_OF_KNIT[name]


def knit_dtype(dtype: torch.dtype, where: tuple | None = None) -> Any:
    """The Knit dtype of a torch dtype."""
    if dtype not in _KNIT_OF_TORCH:
        raise user_error("torch-dtype", f"torch dtype {dtype} has no Knit counterpart; Knit kernels take "
                                        f"{', '.join(str(t) for t in _KNIT_OF_TORCH)}", where)
    return to_dtype(_KNIT_OF_TORCH[dtype])


# ---- the schema ----------------------------------------------------------------------------------

_SCALARS = {int: "int", float: "float", bool: "bool"}


def _param_type(p, where):
    """The schema type of one kernel parameter: from its annotation, else from its default, else
    Tensor ("Tensor?" for a parameter defaulting to None)."""
    ann = p.annotation
    if ann is not inspect.Parameter.empty:
        if ann in _SCALARS:
            return _SCALARS[ann]
        if ann is torch.Tensor or isinstance(ann, TensorType) or ann == "Tensor":
            return "Tensor"
        raise user_error("torch-schema", f"parameter '{p.name}' is annotated {ann!r}; a Knit op takes tensors "
                                         f"(torch.Tensor / nt.tensor[...]), int, float or bool", where)
    d = p.default
    if d is inspect.Parameter.empty:
        return "Tensor"
    if d is None:
        return "Tensor?"
    for py_type in (bool, int, float):  # bool first: it is an int too
        if isinstance(d, py_type):
            return _SCALARS[py_type]
    raise user_error("torch-schema", f"parameter '{p.name}' defaults to {d!r}; a Knit op's non-tensor parameters "
                                     f"are int, float or bool (annotate it, or drop the default)", where)


def _default_text(value):
    return repr(value) if not isinstance(value, bool) else ("True" if value else "False")


def _returned_count(fn, where):
    """How many tensors the kernel returns, read from its return statements: `return a, b` is 2,
    `return t` is 1, no return (or `return None`) is 0. None when they disagree or are unclear."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return None
    counts = set()

    def visit(node, top):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)) and not top:
                continue  # a nested function's returns are not the kernel's
            if isinstance(child, ast.Return):
                v = child.value
                if v is None or (isinstance(v, ast.Constant) and v.value is None):
                    counts.add(0)
                elif isinstance(v, ast.Tuple):
                    counts.add(-1 if any(isinstance(e, ast.Starred) for e in v.elts) else len(v.elts))
                else:
                    counts.add(1)
            visit(child, False)

    visit(tree.body[0], True)
    if not counts:
        return 0
    return counts.pop() if len(counts) == 1 and -1 not in counts else None


def _schema(name, fn, mutates_args, num_outputs, where):
    params = list(inspect.signature(fn).parameters.values())
    parts, kinds = [], []
    for i, p in enumerate(params):
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise user_error("torch-schema", f"a Knit op needs named parameters; '{p.name}' is *args/**kwargs", where)
        t = _param_type(p, where)
        if p.name in mutates_args:
            if t != "Tensor":
                raise user_error("torch-schema", f"mutates_args names '{p.name}', which is not a tensor", where)
            t = f"Tensor(a{i}!)"
        text = f"{t} {p.name}"
        if p.default is not inspect.Parameter.empty:
            text += "=None" if p.default is None else f"={_default_text(p.default)}"
        parts.append(text)
        kinds.append(t.split("(")[0])
    unknown = set(mutates_args) - {p.name for p in params}
    if unknown:
        raise user_error("torch-schema", f"mutates_args names {sorted(unknown)}, not parameters of the kernel", where)
    if num_outputs == 1:
        returns = "Tensor"
    else:
        returns = "(" + ", ".join(["Tensor"] * num_outputs) + ")"  # "()" for none
    return f"({', '.join(parts)}) -> {returns}", [p.name for p in params], kinds


# ---- the op --------------------------------------------------------------------------------------


class KnitOp:
    """A Knit kernel registered as the torch op `name` ("namespace::op_name"). Call it like the
    kernel (torch tensors in, torch tensors out); ``.op`` is the registered OpOverload (for
    ``torch.library.opcheck``), ``.register_backward`` adds autograd, ``.latency_us`` gives the
    simulated Trainium latency for some inputs' shapes."""

    def __init__(self, name: str, kernel: Callable[..., Any], mutates_args: Sequence[str] = (),
                 num_outputs: int | None = None, target: str | None = None, backend: str | None = None) -> None:
        self.kernel = kernel if isinstance(kernel, Kernel) else jit(kernel)
        fn = self.kernel.fn
        code = fn.__code__
        self._where = (code.co_filename, code.co_firstlineno, 0)
        self.name = name
        self.target = target
        self.backend = backend
        self.mutates_args = tuple(mutates_args)
        if num_outputs is None:  # a C++ kernel states it; a Python one's return statements say
            num_outputs = getattr(self.kernel, "default_num_outputs", None) or _returned_count(fn, self._where)
            if num_outputs is None:
                raise user_error("torch-schema", f"cannot tell how many tensors {fn.__name__} returns from its return "
                                                 f"statements; pass num_outputs= to knit.torch.op", self._where)
        self.num_outputs = num_outputs
        self.schema, self._names, self._kinds = _schema(name, fn, self.mutates_args, num_outputs, self._where)
        self._op = torch.library.custom_op(name, self._run, mutates_args=self.mutates_args, device_types="cpu",
                                           schema=self.schema)
        self._op.register_fake(self._fake)
        namespace, op_name = name.split("::")
        self.op = getattr(getattr(torch.ops, namespace), op_name).default
        self.__name__ = op_name
        self.__doc__ = fn.__doc__
        self.backward_op: KnitOp | None = None  # the KnitOp computing the gradients, if register_backward gave one

    def __repr__(self):
        return f"<knit.torch op {self.name}{self.schema}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._op(*args, **kwargs)

    # -- implementations --

    def _compile(self, args):
        """The kernel traced for these arguments (placeholders for tensors: only shapes and dtypes
        matter), cached by Knit per shapes, dtypes and constants."""
        specs = [TensorType(tuple(_concrete(a.shape, self)), knit_dtype(a.dtype, self._where))
                 if isinstance(a, torch.Tensor) else a for a in args]
        return self.kernel.compile(*specs, target=self.target)

    def _outputs_of(self, compiled):
        """(dtype, shape) of the kernel's results, checked against the schema and torch's dtypes."""
        specs = compiled.core.output_specs()[: compiled._num_outputs]
        for dt, _ in specs:
            torch_dtype(dt, self._where)
        if len(specs) != self.num_outputs:
            raise user_error("torch-schema", f"{self.kernel.fn.__name__} returned {len(specs)} tensor(s) but the op "
                                             f"{self.name} was declared with {self.num_outputs}; pass num_outputs="
                                             f"{len(specs)} to knit.torch.op", self._where)
        return specs

    def _fake(self, *args):
        compiled = self._compile(args)
        device = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
        outs = [torch.empty(shape, dtype=torch_dtype(dt, self._where), device=device)
                for dt, shape in self._outputs_of(compiled)]
        return None if not outs else outs[0] if len(outs) == 1 else tuple(outs)

    def _run(self, *args):
        compiled = self._compile(args)
        self._outputs_of(compiled)
        result = compiled.run(*args, backend=self.backend or _kernel.default_backend())
        written = {self._names[i] for i in compiled.last_written}
        undeclared = sorted(written - set(self.mutates_args))
        if undeclared:
            raise user_error("torch-mutation",
                             f"{self.kernel.fn.__name__} writes its argument(s) {undeclared}, which the op "
                             f"{self.name} does not declare: add them to mutates_args", self._where)
        if self.num_outputs == 0:
            return None
        return result

    # -- autograd --

    def register_backward(self, backward: Callable[..., Any],
                          setup_context: Callable[..., Any] | None = None) -> "KnitOp":
        """Make the op differentiable. `backward` is either

        * a Knit kernel or KnitOp, called as ``backward(*inputs, *grad_outputs)`` and returning one
          gradient per tensor input, in order (a kernel becomes the op "<name>_backward"); the
          inputs are saved for it automatically; or
        * a function ``backward(ctx, *grad_outputs)`` as for ``torch.library.register_autograd``,
          with your own ``setup_context(ctx, inputs, output)``.
        """
        if isinstance(backward, Kernel):
            backward = KnitOp(self.name + "_backward", backward, target=self.target, backend=self.backend)
        if isinstance(backward, KnitOp):
            self.backward_op = backward
            if setup_context is not None:
                raise user_error("torch-autograd", "a Knit backward kernel gets the inputs saved for it; pass "
                                                   "setup_context only with a backward function", self._where)
            setup_context, backward = self._kernel_backward(backward)
        self._op.register_autograd(backward, setup_context=setup_context)
        return self

    def _kernel_backward(self, backward_op):
        kinds = self._kinds
        tensors = [i for i, k in enumerate(kinds) if k.startswith("Tensor")]

        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*[inputs[i] for i in tensors])
            ctx.scalars = {i: v for i, v in enumerate(inputs) if i not in tensors}

        def backward(ctx, *grads):
            saved = iter(ctx.saved_tensors)
            inputs = [ctx.scalars[i] if i in ctx.scalars else next(saved) for i in range(len(kinds))]
            result = backward_op(*inputs, *[g.contiguous() for g in grads])
            result = result if isinstance(result, tuple) else (result,)
            if len(result) != len(tensors):
                raise user_error("torch-autograd", f"{backward_op.name} returned {len(result)} gradient(s); "
                                                   f"{self.name} has {len(tensors)} tensor input(s)", self._where)
            it = iter(result)
            return tuple(next(it) if i in tensors else None for i in range(len(kinds)))

        return setup_context, backward

    # -- timing --

    def latency_us(self, *args: Any) -> float:
        """Simulated latency (µs) of the kernel on the op's target for these arguments' shapes
        and dtypes (a timing-only simulation: values are not read)."""
        specs = [TensorType(tuple(a.shape), knit_dtype(a.dtype, self._where)) if isinstance(a, torch.Tensor) else a
                 for a in args]
        return _simulate(self.kernel, *specs, target=self.target).latency_us


def _concrete(shape, op):
    """A tensor shape as ints. Knit traces a kernel per concrete shape, so under torch.compile
    with dynamic shapes each dim is specialized (guarded) here; a dim with no value to guard on
    (data-dependent) is an error that says what to do."""
    out = []
    for s in shape:
        try:
            out.append(int(s))
        except Exception as e:  # torch raises several types for unbacked symbols
            raise user_error("torch-dynamic-shape", f"{op.name}: Knit traces kernels for concrete shapes and dim {s} "
                                                    f"has no value to specialize on ({type(e).__name__}); give the op "
                                                    f"inputs whose shapes do not depend on data, or call it outside "
                                                    f"the compiled region", op._where) from None
    return out


def op(name: str, kernel: Callable[..., Any] | None = None, *, mutates_args: Sequence[str] = (),
       num_outputs: int | None = None, target: str | None = None,
       backend: str | None = None) -> KnitOp | Callable[[Callable[..., Any]], KnitOp]:
    """Register a Knit kernel as the torch op `name` ("namespace::op_name"); a decorator, or
    ``knit.torch.op(name, kernel)``.

    mutates_args: names of tensor parameters the kernel writes in place (must be exact: writing
    an undeclared one is an error at run time). num_outputs: how many tensors it returns, when
    its return statements do not say. target: "trn1" / "trn2" / "trn3" (default: Knit's).
    backend: the simulator backend ("jit", "jit-strict", "jit-fallback", "reference"; default $KNIT_BACKEND)."""

    def wrap(k):
        return KnitOp(name, k, mutates_args=mutates_args, num_outputs=num_outputs, target=target, backend=backend)

    return wrap if kernel is None else wrap(kernel)
