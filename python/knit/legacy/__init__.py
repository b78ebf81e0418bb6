"""The legacy ``neuronxcc.nki`` API (G1, "NKI Beta 1") on Knit's core.

``import knit.legacy as nki``, ``import knit.legacy.language as nl``, ``import knit.legacy.isa as
nisa`` — or, after ``knit.compat.install()``, the original ``import neuronxcc.nki as nki`` /
``import neuronxcc.nki.language as nl`` — and a G1 kernel runs unmodified on Knit's simulator:
``nl.load`` / ``nl.store``, result-returning ISA calls, ``nl.arange`` / ``nl.mgrid`` index
expressions, ``nl.par_dim``, ``psum += nisa.nc_matmul(...)``. Both facades (this one and
``knit`` itself) trace into the same IR and are verified by the same rules (nki-api.md §6.2).

Runners: ``jit`` (any ``mode=``), ``simulate_kernel``, and ``baremetal`` / ``benchmark`` /
``profile`` all run the kernel on the CPU simulator (``benchmark`` also reports its simulated
latency).
"""

from .. import _trace, isa as _kisa
from .._kernel import Kernel as _Kernel
from ..errors import KnitError, KnitRuntimeError, NkiValidationError  # noqa: F401
from . import compiler, isa, language, typing  # noqa: F401
from ._tensor import LegacyTensor as tensor, wrap as _wrap  # noqa: F401

__all__ = ["jit", "trace", "simulate_kernel", "baremetal", "benchmark", "profile", "tensor", "language", "isa",
           "typing", "compiler", "NkiValidationError"]


class _LegacyFn:
    """The kernel body as Knit's Kernel calls it: arguments become G1 tensors, the launch grid is
    published for nl.program_id(axis), and per-instance state is reset."""

    def __init__(self, fn, grid=()):
        self._legacy_fn = fn
        self._legacy_grid = tuple(grid)
        self.__wrapped__ = fn
        self.__code__ = fn.__code__
        self.__name__ = getattr(fn, "__name__", "kernel")
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__module__ = getattr(fn, "__module__", None)

    def __call__(self, *args, **kwargs):
        trace = _trace.current()
        depth = trace.__dict__.get("_legacy_depth", 0)
        if depth == 0:  # a new launch-grid instance (not a sub-kernel call)
            trace._legacy_grid = self._legacy_grid
            trace._legacy_pending = []
            trace._legacy_shared_i = 0
        trace._legacy_depth = depth + 1
        try:
            return self._legacy_fn(*[_wrap(a) for a in args], **{k: _wrap(v) for k, v in kwargs.items()})
        finally:
            trace._legacy_depth = depth


class LegacyKernel(_Kernel):
    """A G1 kernel: callable with NumPy arrays (or torch tensors) -> results from the simulator;
    ``kernel[d0, d1, ...]`` launches an SPMD grid (instances run in order)."""

    _outputs_may_be_private_hbm = True  # G1 outputs were HBM (nl.hbm) tensors

    def __init__(self, fn, grid=(), **options):
        inner = fn._legacy_fn if isinstance(fn, _LegacyFn) else fn
        super().__init__(_LegacyFn(inner, grid), grid, **options)

    def __getitem__(self, grid):
        grid = grid if isinstance(grid, tuple) else (grid,)
        return type(self)(self.fn._legacy_fn, tuple(int(g) for g in grid), **self.options)


def _target_name(key, target):
    name = _kisa._TARGETS.get(str(getattr(target, "value", target)).lower())
    if name is None:
        raise ValueError(f"{key}={target!r}: expected trn1, inf2, trn2 or trn3")
    return name


def _options(kwargs):
    """The runner options Knit acts on: the target, as G1's platform_target= or as Knit's own
    target= (both accepted so that neither is silently ignored; they must agree)."""
    given = {key: _target_name(key, kwargs[key]) for key in ("platform_target", "target")
             if kwargs.get(key) is not None}
    if len(set(given.values())) > 1:
        raise ValueError(f"platform_target={kwargs['platform_target']!r} and target={kwargs['target']!r} "
                         "name different targets: pass one of them")
    return {"platform_target": next(iter(given.values()))} if given else {}


def jit(func=None, mode="auto", **kwargs):
    """``@nki.jit`` / ``@nki.jit(mode=..., platform_target=...)``: every mode ("auto", "simulation",
    "baremetal", "benchmark", "trace", "jax", "torchxla") runs on Knit's simulator; other compiler
    options are accepted and ignored. A jitted kernel called inside another kernel is inlined."""
    if func is None:
        return lambda f: jit(f, mode=mode, **kwargs)
    if isinstance(func, LegacyKernel):
        return func
    if isinstance(func, _Kernel):
        return LegacyKernel(func.fn, func.grid, **{**func.options, **_options(kwargs)})
    return LegacyKernel(func, **_options(kwargs))


trace = jit  # G1 spelling for kernels called from other kernels (and run standalone here)


def simulate_kernel(kernel, *args, **kwargs):
    """Runs `kernel` (jitted or a plain function) on the CPU simulator with NumPy arguments and
    returns its outputs as NumPy arrays."""
    k = kernel if isinstance(kernel, _Kernel) else LegacyKernel(kernel)
    return k(*args, **kwargs)


def baremetal(kernel=None, **kwargs):
    """``nki.baremetal``: no device here, so the kernel runs on the simulator."""
    if kernel is None:
        return lambda f: baremetal(f, **kwargs)
    return jit(kernel, **kwargs)


profile = baremetal


class BenchmarkKernel(LegacyKernel):
    """``nki.benchmark``: the call runs the kernel on the simulator and returns its outputs;
    ``benchmark_result.nc_latency.get_latency_percentile(p)`` is the simulated latency in µs
    (deterministic, so every percentile is the same; knit.benchmark)."""

    def __call__(self, *args, **kwargs):
        from ..benchmark import Benchmark
        from ..typing import TensorType
        # Shape placeholders (nt.tensor[...]) time the kernel without running it, as knit.benchmark.
        timing_only = any(isinstance(a, TensorType) for a in (*args, *kwargs.values()))
        out = None if timing_only else super().__call__(*args, **kwargs)
        self.benchmark_result = Benchmark(self)(*args, **kwargs).benchmark_result
        return out


def benchmark(kernel=None, **kwargs):
    if kernel is None:
        return lambda f: benchmark(f, **kwargs)
    inner = kernel.fn if isinstance(kernel, _Kernel) else kernel
    return BenchmarkKernel(inner, **_options(kwargs))
