"""knit.jit / knit.simulate / knit.compile: trace a Python kernel into Knit's IR (cached per
argument shapes, dtypes and constants) and run it on the reference interpreter."""
from __future__ import annotations

import functools
import inspect
import os
import time
import types
import warnings
from collections.abc import Callable, Sequence
from typing import Any, overload

import numpy as np

from . import _memory_map, _program_cache, _rolled, _schedule, _trace
from ._dtypes import ALL, storage_dtype, to_dtype
from ._keywords import ArgumentTypeError
from ._memory_map import MemoryMap
from ._source import user_location
from ._tensor import NkiTensor
from .errors import JitFallbackWarning, user_error
from .isa import _TARGETS, target_from_env
from .typing import TensorType

# ---- host arrays ------------------------------------------------------------------------------


def _is_torch(x):
    return type(x).__module__.startswith("torch")


# torch dtypes NumPy has no type for, by the Knit dtype with the same encoding; they cross as raw
# integer words of their size. (Knit's float8_e4m3, with infinities, has no torch counterpart:
# torch's float8_e4m3fn is Knit's float8_e4m3fn.)
_TORCH_RAW = {"bfloat16": "bfloat16", "float8_e5m2": "float8_e5m2", "float8_e4m3fn": "float8_e4m3fn"}
_INT_OF_SIZE = {1: np.uint8, 2: np.int16}


def _to_numpy(x):
    """(array, was_torch) for a NumPy array, a torch tensor or anything np.asarray accepts."""
    if _is_torch(x):
        import torch

        t = x.detach().cpu().contiguous()
        name = str(t.dtype).removeprefix("torch.")
        if name in _TORCH_RAW:
            raw = t.view(torch.uint8 if t.element_size() == 1 else torch.int16).numpy()
            return raw.view(ALL[_TORCH_RAW[name]].numpy), True
        return t.numpy(), True
    return np.asarray(x), False


def _to_torch(a, like):
    """A torch tensor sharing `a`'s memory (results are fresh arrays), on `like`'s device."""
    import torch

    for knit_name, torch_name in _TORCH_RAW.items():
        if a.dtype == ALL[knit_name].numpy:
            raw = torch.from_numpy(a.view(_INT_OF_SIZE[a.dtype.itemsize]))
            return raw.view(getattr(torch, torch_name)).to(like.device)
    return torch.from_numpy(a).to(like.device)


def _is_array(x):
    return isinstance(x, np.ndarray) or _is_torch(x)


def _precise_fp():
    return os.environ.get("NKI_PRECISE_FP", "1") != "0"


# ---- tracing ----------------------------------------------------------------------------------


def _arg_key(x):
    if _is_array(x):
        a, _ = _to_numpy(x)
        return ("tensor", tuple(a.shape), str(to_dtype(a.dtype)))
    if isinstance(x, TensorType):
        return ("tensor", x.shape, str(x.dtype))
    try:
        hash(x)
        return ("const", type(x).__name__, x)
    except TypeError:
        return ("const", type(x).__name__, repr(x))


def call_key(args, kwargs):
    """The part of a compile's cache key the call's arguments decide (shapes, dtypes, values)."""
    return (tuple(_arg_key(a) for a in args), tuple(sorted((k, _arg_key(v)) for k, v in kwargs.items())))


def add_params(trace, fn, args, loc, suffix="", base=0):
    """Declares each tensor among `args` as a kernel parameter of `trace`, named after `fn`'s
    parameter and `suffix`; returns the arguments to call `fn` with (tensors as NkiTensors) and
    the positions (base + index) of the tensor arguments."""
    names = list(inspect.signature(fn).parameters)
    call_args, positions = [], []
    for i, a in enumerate(args):
        spec = tensor_spec(a, loc)
        if spec is None:
            call_args.append(a)
            continue
        shape, dt = spec
        name = (names[i] if i < len(names) else f"arg{i}") + suffix
        tid = _trace.core_call(trace.builder.add_param, name, str(storage_dtype(dt)), list(shape), loc)
        call_args.append(NkiTensor(trace.builder.full_view(tid)))
        positions.append(base + i)
    return call_args, positions


def tensor_spec(x, loc):
    """(shape, dtype) of a tensor argument (an array, a torch tensor or an nt.tensor placeholder),
    or None for anything else; a placeholder without a dtype is a user error at `loc`."""
    if isinstance(x, TensorType):
        if x.dtype is None:
            raise user_error("kernel-args", f"placeholder {x!r} has no dtype; write nt.tensor[[shape], dtype]", loc)
        return x.shape, x.dtype
    if _is_array(x):
        a = _to_numpy(x)[0]
        return a.shape, a.dtype
    return None


# What loading a program from the disk cache costs per instruction (parsing its text form, about
# 180 bytes an instruction; measured on the 2-core development machine: 2.8 us parse + 1 us read).
# A program is written only when rebuilding it (trace + lower) took longer than loading it would:
# a kernel whose loops rolled (knit/_rolled.py) rebuilds faster than it loads.
CACHE_LOAD_SECONDS_PER_INSTRUCTION = 4e-6


class Compiled:
    """A traced, verified kernel for one set of argument shapes/dtypes/constants and a target.
    ``.ir`` is its IR text, ``.asm`` the engine program's disassembly and ``.stats`` its
    statistics (docs/codegen.md). Calling it runs the engine program on the simulator;
    ``.run(..., schedule=, seed=)`` picks the queue interleaving and ``.reference(...)`` runs the
    IR on the reference interpreter instead."""

    # After a trace (not a disk-cache load): {"rolled_loops": affine loops traced once,
    # "unrolled_loops": [(file, line)] of affine_range calls that had to unroll, "traces": count}.
    trace_info: dict[str, Any] | None = None
    trace_seconds = 0.0  # how long tracing took (all retraces included)

    def __init__(self, kernel, core_kernel, trace, param_positions, target, num_outputs, single, output_shapes=None):
        self.kernel = kernel
        self.core = core_kernel
        self.target = target
        self._constants = trace.constants
        self._prints = trace.prints
        self._param_positions = param_positions
        self.last_run = None  # the last run's backend and native / interpreted instruction counts
        self.last_written = []  # argument positions the last run's kernel writes
        self._reported_fallbacks = set()  # fallback lines already warned about (_warn_fallbacks)
        self._num_outputs = num_outputs  # the kernel's results; device_print outputs follow them
        self._single = single  # the kernel returned one tensor (not a tuple)
        # Per result, the shape of the reshape of its tensor that the kernel returned (None: the
        # tensor's own shape).
        self._output_shapes = output_shapes or [None] * num_outputs
        self._program = None
        self._disk_name = None  # the disk cache entry this is stored under (None: not cached)
        self.from_disk_cache = False  # loaded from the disk cache instead of traced and lowered

    @property
    def ir(self) -> str:
        return self.core.text

    @property
    def program(self) -> Any:
        """The engine program (codegen pipeline output), built on first use (and then written to
        the disk cache, so another process loads it instead of tracing and lowering)."""
        if self._program is None:
            # The program takes the traced kernel over (one copy in memory, not two); from here
            # on .core is the program's kernel, with any spill copies lowering added.
            start = time.perf_counter()
            self._program = _trace.core_call(self.core.lower_consuming)
            self.core = self._program.kernel
            rebuild = self.trace_seconds + time.perf_counter() - start
            if rebuild <= self.core.num_instructions * CACHE_LOAD_SECONDS_PER_INSTRUCTION:
                return self._program
            _program_cache.store(self._disk_name, self._program, {
                "positions": self._param_positions, "num_outputs": self._num_outputs, "single": self._single,
                "prints": self._prints, "output_shapes": self._output_shapes}, self._constants)
        return self._program

    @classmethod
    def _from_cache(cls, kernel, target, entry):
        """A Compiled rebuilt from a disk cache entry (program, metadata, constants)."""
        program, meta, constants = entry
        trace = types.SimpleNamespace(constants=constants, prints=[tuple(p) for p in meta["prints"]])
        compiled = cls(kernel, program.kernel, trace, meta["positions"], target, meta["num_outputs"], meta["single"],
                       meta.get("output_shapes"))
        compiled._program = program
        compiled.from_disk_cache = True
        return compiled

    @property
    def asm(self) -> str:
        return self.program.asm

    @property
    def stats(self) -> dict[str, Any]:
        """dict: instructions per queue (pe/act/dve/pool/dma0..3, sync), semaphore_waits,
        dependences, dma_bytes, sbuf_high_water / psum_high_water (bytes per partition), summary."""
        return self.program.stats()

    def memory_map(self) -> MemoryMap:
        """Where the allocator put each SBUF / PSUM tensor over its live range: a MemoryMap
        (.tensors, .high_water, .at(i), .text(), .save_svg(), .save_png(); docs/profiling.md)."""
        return _memory_map.from_program(self.program, self.target)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.kernel._run(self, args, kwargs)

    def run(self, *args: Any, schedule: str = "round_robin", seed: int = 0, check_races: bool = True,
            backend: str | None = None, **kwargs: Any) -> Any:
        """Run the engine program with a chosen queue interleaving: "program_order",
        "round_robin" or "random" (with `seed`), on `backend` ("jit", "jit-strict", "jit-fallback"
        or "reference"; default $KNIT_BACKEND, else "jit"). ``last_run`` then tells how many
        instructions ran natively and, under "jit-fallback", lists (``fallbacks``) those the native
        path could not run, with why."""
        return self.kernel._run(self, args, kwargs, runner=lambda hosts, uninit: self.program.run(
            hosts, uninit, schedule, seed, check_races, backend or default_backend()))

    def reference(self, *args: Any, **kwargs: Any) -> Any:
        """Run the IR on the reference interpreter (program order, no engine program)."""
        return self.kernel._run(self, args, kwargs, runner=self.core.run)


def _warn_fallbacks(compiled):
    """Says so, once per instruction and compiled kernel, when the native path handed
    instructions to the reference executors (KNIT_BACKEND=jit-fallback): never silently."""
    reported = compiled._reported_fallbacks
    new = [f for f in compiled.last_run.get("fallbacks", ()) if f not in reported]
    if not new:
        return
    reported.update(new)
    warnings.warn(JitFallbackWarning(
        "these instructions ran on the reference executors, not natively (same results, slower):\n  " +
        "\n  ".join(new) + "\nthe default backend (jit) makes this an error; Compiled.last_run[\"fallbacks\"] "
        "lists them"), stacklevel=3)


# Called as observe(seconds, last_run) after every kernel run (the wall time of the run itself,
# JIT compiling included; not tracing or lowering): the pytest plugin's --knit-durations.
run_observers: list[Callable[[float, dict], None]] = []


def default_backend():
    """The execution backend of engine programs: $KNIT_BACKEND ("jit", "jit-strict", "jit-fallback"
    or "reference"), else "jit" (docs/jit.md)."""
    return os.environ.get("KNIT_BACKEND", "jit")


def _reshapes_whole_tensor(t):
    """Whether tensor view `t` reads its whole tensor in row-major order (a reshape of it)."""
    v = t._view
    shape = t._info[3]
    if v.offset != 0 or v.is_indirect or v.dynamic or v.dtype != t._info[2]:
        return False
    size = 1
    for step, num in reversed(v.pattern):
        if num != 1 and step != size:
            return False
        size *= num
    return size == int(np.prod(shape)) and list(t.shape) != list(shape)


def _as_positional(fn, args, kwargs):
    """The call's arguments with every one that has a position moved there, defaults filled in
    between, so that a tensor passed by keyword (``kernel(a=x, b=y)``, as NKI's own test harness
    calls kernels) becomes a kernel parameter like one passed by position. Keyword-only arguments
    stay keywords."""
    if not kwargs:
        return args, kwargs
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return args, kwargs
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(f"{fn.__name__}(): {e}") from None
    bound.apply_defaults()
    positional, keywords = [], {}
    for name, p in sig.parameters.items():
        value = bound.arguments[name]
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            positional.append(value)
        elif p.kind is p.VAR_POSITIONAL:
            positional.extend(value)
        elif p.kind is p.KEYWORD_ONLY:
            keywords[name] = value
        else:
            keywords.update(value)
    return tuple(positional), keywords


class Kernel:
    """An NKI kernel (what @knit.jit returns). Calling it runs it on the simulator; calling it while
    another kernel is being traced inlines it (a sub-kernel). ``kernel[lnc]`` selects a launch grid."""

    # NKI 0.3 made shared_hbm the rule for outputs; G1 kernels (knit.legacy) return private HBM.
    _outputs_may_be_private_hbm = False
    # Whether affine loops may be traced once (knit/_rolled.py).
    _rolls_loops = True

    def __init__(self, fn: Callable[..., Any], grid: tuple[int, ...] = (), cache: dict | None = None,
                 **options: Any) -> None:
        self.fn = fn
        self.grid = tuple(grid)
        self.options = options
        self._cache = {} if cache is None else cache  # shared by kernel and kernel[grid]
        functools.update_wrapper(self, fn)

    def __getitem__(self, grid: int | tuple[int, ...]) -> Kernel:
        grid = grid if isinstance(grid, tuple) else (grid,)
        return Kernel(self.fn, tuple(int(g) for g in grid), cache=self._cache, **self.options)

    def with_schedule(self, edges: Sequence[tuple[str, str | Sequence[str]]]) -> Kernel:
        """A copy of this kernel whose instructions named in `edges` ((consumer, producer or
        [producers]) pairs of name= labels) run consumer after producers (knit/_schedule.py);
        this kernel is unchanged. The names are checked when the copy is traced."""
        schedule = self.options.get("schedule", ()) + _schedule.normalize(edges)
        options = {**self.options, "schedule": schedule, "schedule_loc": user_location()}
        return type(self)(self.fn, self.grid, **options)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _trace.active():
            return self.fn(*args, **kwargs)
        return self.compile(*args, **kwargs)(*args, **kwargs)  # each binds keyword tensors (_as_positional)

    def resolve_target(self, target: str | None) -> str:
        """The target a compile uses: `target`, else jit's platform_target, else the environment's."""
        target = target or self.options.get("platform_target") or target_from_env()
        return _TARGETS.get(str(target).lower(), target)

    def compile(self, *args: Any, target: str | None = None, **kwargs: Any) -> Compiled:
        args, kwargs = _as_positional(self.fn, args, kwargs)
        target = self.resolve_target(target)
        key: tuple[Any, ...] = (target, self.grid, _precise_fp(), *call_key(args, kwargs))
        if self.options.get("schedule"):
            key += (self.options["schedule"],)
        if key not in self._cache:
            name = self._disk_name(key)
            entry = _program_cache.load(name)
            if entry is not None:
                self._cache[key] = Compiled._from_cache(self, target, entry)
            else:
                self._cache[key] = self._trace(args, kwargs, target)
                self._cache[key]._disk_name = name
        return self._cache[key]

    def _disk_name(self, key):
        """The program disk cache's entry name for this compile key (None: not cached)."""
        return _program_cache.key(self.fn, key)

    # Traces every launch-grid instance into one kernel: instances run in program order, and
    # shared_hbm tensors with the same name are one tensor across instances (NKI's LNC rule).
    def _trace(self, args, kwargs, target):
        """Traces the kernel, again with more loops unrolled while a rolled loop cannot stay
        rolled (knit/_rolled.py): each retrace unrolls at least one more loop call site."""
        start = time.perf_counter()
        unroll: set = set()
        rolls = self._rolls_loops
        traces = 0
        while True:
            traces += 1
            before = len(unroll)
            trace = None
            try:
                trace = self._new_trace(target, rolls, unroll)
                compiled = self._trace_once(trace, args, kwargs, target)
                # A loop left by break / return was never expanded: unroll it.
                unroll.update(trace.rolled_sites[s] for s in trace.rolled_open)
                if len(unroll) == before:
                    if trace.rolled_sites and _rolled.checking():
                        _rolled.check_same(compiled.core, self._trace_once(self._new_trace(target, False, set()), args,
                                                                           kwargs, target).core)
                    compiled.trace_info = _rolled.summary(trace, traces)
                    compiled.trace_seconds = time.perf_counter() - start
                    return compiled
            except _trace.RetraceUnrolled:
                pass
            except Exception:
                if trace is None or not trace.rolled_open:
                    raise
                unroll.add(trace.rolled_sites[trace.rolled_open[-1]])  # the unrolled trace tells
            if len(unroll) == before:
                rolls = False  # no loop to blame: trace with none rolled

    def _new_trace(self, target, rolls, unroll):
        count = 1
        for g in self.grid:
            count *= g
        trace = _trace.Trace(self.fn.__name__, target, num_programs=count, grid_ndim=len(self.grid), grid=self.grid)
        trace.rolls = rolls and _rolled.enabled()
        trace.unroll = unroll
        return trace

    def _trace_once(self, trace, args, kwargs, target):
        count = trace.num_programs
        code = self.fn.__code__
        loc = (code.co_filename, code.co_firstlineno, 0)
        with _trace.tracing(trace):
            call_args, positions = add_params(trace, self.fn, args, loc)
            results = None
            for pid in range(count):
                trace.program_id = pid
                trace.shared_created = 0
                if count > 1:  # each instance is a core of its own (LNC2 sendrecv / core_barrier)
                    _trace.core_call(trace.builder.append, "program", {"id": pid}, loc, "")
                try:
                    out = self.fn(*call_args, **kwargs)
                except AttributeError as e:
                    names = list(inspect.signature(self.fn).parameters)
                    error = _not_a_tensor(e, self.fn.__name__, names, args, kwargs)
                    if error is None:
                        raise
                    raise error from e
                if pid == 0:
                    results = out
            _schedule.apply(trace, self.options.get("schedule", ()), self.options.get("schedule_loc", loc))
            outputs = self._output_ids(results, loc)
            shapes = self._returned_shapes(results)
            _trace.core_call(trace.builder.set_outputs, outputs + [tid for _, tid in trace.prints],
                             self._outputs_may_be_private_hbm)
            core_kernel = _trace.core_call(trace.builder.finish)
        return Compiled(self, core_kernel, trace, positions, target, len(outputs), isinstance(results, NkiTensor),
                        shapes)

    @staticmethod
    def _output_ids(results, loc):
        """Tensor ids of the kernel's results (a tensor, a tuple/list of tensors or None). Their
        buffer (shared_hbm) is checked by the C++ verifier at each tensor's declaration line."""
        if results is None:
            return []
        items = [results] if isinstance(results, NkiTensor) else results
        if not isinstance(items, (tuple, list)) or not all(isinstance(r, NkiTensor) for r in items):
            raise user_error("kernel-output", f"a kernel returns a tensor, a tuple of tensors or None; got "
                             f"{type(results).__name__}", loc)
        return [r._view.tensor for r in items]

    @staticmethod
    def _returned_shapes(results):
        """Per result, its shape when it is a reshape of its whole tensor (``return
        out.reshape(...)``: the caller gets that shape, as from NKI), else None."""
        if results is None:
            return []
        items = [results] if isinstance(results, NkiTensor) else results
        return [list(r.shape) if _reshapes_whole_tensor(r) else None for r in items]

    def _run(self, compiled, args, kwargs, runner=None):
        args, kwargs = _as_positional(self.fn, args, kwargs)
        hosts, originals, any_torch = self._hosts(compiled, args)
        uninitialized = os.environ.get("KNIT_UNINITIALIZED", "")  # read at each run
        if runner is None:
            runner = lambda h, u: compiled.program.run(h, u, backend=default_backend())  # noqa: E731
        start = time.perf_counter()
        outs, after, warnings, *counts = _trace.core_call(runner, hosts, uninitialized)
        compiled.last_run = counts[0] if counts else {"backend": "interpreter"}
        for observe in run_observers:
            observe(time.perf_counter() - start, compiled.last_run)
        _warn_fallbacks(compiled)
        # Positions (in the call's arguments) of the inputs some instruction writes.
        params = compiled._param_positions
        compiled.last_written = [params[n] for n, w in enumerate(after) if w is not None and n < len(params)]
        return self._results(compiled, outs, after, warnings, originals, any_torch)

    @staticmethod
    def _hosts(compiled, args, shapes_only=False):
        """The kernel's inputs as (dtype, shape, bytes) for the C++ core; with shapes_only,
        nt.tensor placeholders are allowed and every input goes without its bytes."""
        hosts: list[tuple[str, list[int], bytes | np.ndarray]] = []
        originals, any_torch = [], None
        specs = compiled.core.param_specs()
        for n, i in enumerate(compiled._param_positions):
            a = args[i]
            if shapes_only:
                hosts.append((specs[n][0], list(specs[n][1]), b""))
                continue
            if isinstance(a, TensorType):
                raise user_error("kernel-args", "shape/dtype placeholders only trace or time (knit.compile, "
                                 "knit.benchmark, knit.profile); running needs real arrays", None)
            arr, was_torch = _to_numpy(a)
            if was_torch and any_torch is None:
                any_torch = a
            want = np.dtype(ALL[specs[n][0]].numpy)
            arr = np.ascontiguousarray(arr.astype(want, copy=False))
            hosts.append((specs[n][0], list(arr.shape), arr))  # the core copies it once, as a buffer
            originals.append((a, arr))
        for tid, const in compiled._constants:
            hosts.append((str(to_dtype(const.dtype)), list(const.shape), b"" if shapes_only else const.tobytes()))
        return hosts, originals, any_torch

    @staticmethod
    def _results(compiled, outs, after, warnings, originals, any_torch):
        for w in warnings:
            print(w)
        # Inputs the kernel wrote to are written back in place (None: no instruction writes it).
        for (a, arr), written in zip(originals, after):
            if written is None:
                continue
            dt, shape, raw = written
            if not np.array_equal(np.frombuffer(raw, dtype=np.uint8), arr.reshape(-1).view(np.uint8)):
                new = np.frombuffer(raw, dtype=ALL[dt].numpy).reshape(shape)
                if _is_torch(a):
                    a.copy_(_to_torch(new, a))
                else:
                    np.copyto(a, new.astype(a.dtype, copy=False))
        # Each raw buffer is the core's own (writable, owned by the array): no copy needed.
        arrays = [np.frombuffer(raw, dtype=ALL[dt].numpy).reshape(shape) for dt, shape, raw in outs]
        for (prefix, _), values in zip(compiled._prints, arrays[compiled._num_outputs:]):
            print(f"{prefix}: {values}")
        arrays = [a if shape is None else a.reshape(shape)
                  for a, shape in zip(arrays[:compiled._num_outputs], compiled._output_shapes)]
        if any_torch is not None:
            arrays = [_to_torch(a, any_torch) for a in arrays]
        if not arrays:
            return None
        return arrays[0] if compiled._single else tuple(arrays)


@overload
def jit(fn: Callable[..., Any], mode: str | None = None, **kwargs: Any) -> Kernel: ...
@overload
def jit(fn: None = None, mode: str | None = None, **kwargs: Any) -> Callable[[Callable[..., Any]], Kernel]: ...


def jit(fn: Callable[..., Any] | None = None, mode: str | None = None,
        **kwargs: Any) -> Kernel | Callable[[Callable[..., Any]], Kernel]:
    """@knit.jit / @knit.jit(...): unknown compiler options (mode, additional_compile_opt,
    compile_config, ...) are accepted and ignored; platform_target= picks the target."""
    if fn is None:
        return lambda f: jit(f, mode=mode, **kwargs)
    if isinstance(fn, Kernel):
        return fn
    return Kernel(fn, **{k: v for k, v in kwargs.items() if k == "platform_target"})


def simulate(kernel: Callable[..., Any]) -> Kernel:
    """knit.simulate(kernel)(*args): run on the CPU simulator (a plain function is wrapped). The
    result is the kernel itself, so ``knit.simulate(kernel)[2](...)`` launches an LNC2 grid as
    ``knit.simulate(kernel[2])(...)`` does. (knit.simulate with ``ranks=`` is _ranks.simulate.)"""
    return kernel if isinstance(kernel, Kernel) else Kernel(kernel)


def baremetal(kernel: Callable[..., Any] | None = None, **options: Any) -> Any:
    """nki.baremetal(kernel) / @nki.baremetal(...): compile and run on a local device. There is no
    Neuron device on a CPU, so the kernel runs on Knit's simulator; the device options
    (save_neff_name, artifacts_dir, additional_compile_opt, ...) are accepted and ignored."""
    if kernel is None:
        return simulate
    return simulate(kernel)


def simulate_kernel(kernel: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Legacy (neuronxcc.nki) spelling: simulate_kernel(kernel, *args)."""
    return simulate(kernel)(*args, **kwargs)


def compile(kernel: Callable[..., Any], *args: Any, target: str | None = None, **kwargs: Any) -> Compiled:
    """Trace and verify `kernel` for these arguments (arrays or nt.tensor placeholders) on `target`
    ("trn1" | "trn2" | "trn3"; default: jit's platform_target, else NEURON_PLATFORM_TARGET_OVERRIDE,
    else trn2); the result's ``.ir`` is the IR text and calling it runs the kernel."""
    k = kernel if isinstance(kernel, Kernel) else Kernel(kernel)
    return k.compile(*args, target=target, **kwargs)


def _not_a_tensor(e, kernel, names, args, kwargs):
    """A TypeError at the kernel's line when AttributeError `e` comes from reading a tensor's
    attribute (x.shape) of an argument that is not an array; None when it comes from elsewhere."""
    obj = getattr(e, "obj", e)
    named = [(names[i] if i < len(names) else f"arg{i}", a) for i, a in enumerate(args)] + list(kwargs.items())
    param = next((n for n, a in named if a is obj), None)
    if param is None or _is_array(obj) or isinstance(obj, TensorType):
        return None
    tb = e.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    where = (tb.tb_frame.f_code.co_filename, tb.tb_lineno, 0)
    return user_error("argument-type", f"kernel {kernel}: argument '{param}' is a {type(obj).__name__}, but the "
                      f"kernel uses it as a tensor (.{e.name}); pass an array (a NumPy array or a torch tensor)",
                      where, ArgumentTypeError)
