"""One sweep point, evaluated where the work runs (this process, a pool worker or a Ray task).

A work unit is a chunk of points: (index, config, args, kwargs) each. The kernel travels to other
processes as a KernelRef (module, name and file), never pickled itself: a Kernel holds compiled
programs that do not pickle, and a worker rebuilds the kernel by importing its module (or, when
that module cannot be imported there, by importing its file, as ``knit run`` does).
"""
from __future__ import annotations

import dataclasses
import importlib
import linecache
import os
import sys
import sysconfig
import time
from collections.abc import Callable
from typing import Any

from . import _kernel_file, _source
from ._kernel import Kernel
from .errors import KnitRuntimeError
from .profile import has_placeholders, profile

# Rule of a point lost because its worker process died twice (resume runs it again).
WORKER_DIED = "worker-died"


@dataclasses.dataclass(frozen=True)
class KernelRef:
    """Where a kernel is defined: importable by module and name, or by file and name."""

    module: str
    qualname: str
    file: str
    grid: tuple[int, ...]
    options: tuple[tuple[str, Any], ...]


def kernel_ref(kernel: Kernel) -> KernelRef | None:
    """The kernel's reference, or None when a worker could not find it by name (a kernel defined
    inside a function, or a module-level name bound to something else)."""
    fn = kernel.fn
    ref = KernelRef(str(fn.__module__), fn.__qualname__, os.path.abspath(fn.__code__.co_filename), kernel.grid,
                    tuple(sorted(kernel.options.items())))
    if "<" in ref.qualname or type(kernel).__init__ is not Kernel.__init__:
        return None  # a local function, or a kernel not rebuilt from its function (a C++ file's)
    try:
        found = _lookup(sys.modules[ref.module], ref.qualname)
    except (KeyError, AttributeError):
        return None
    return ref if getattr(found, "fn", found) is fn else None


def _lookup(module: Any, qualname: str) -> Any:
    obj = module
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


_resolved: dict[KernelRef, Kernel] = {}


def resolve(ref: KernelRef) -> Kernel:
    """The kernel `ref` names, imported in this process (once per process)."""
    if ref not in _resolved:
        module = sys.modules.get(ref.module)
        if module is None and ref.module not in ("__main__", "__mp_main__"):
            try:
                module = importlib.import_module(ref.module)
            except ImportError:
                module = None
        if module is None or not hasattr(module, ref.qualname.split(".")[0]):
            module = _import_script(ref.file)
        found = _lookup(module, ref.qualname)
        found = getattr(found, "base", found)  # an @knit.autotune kernel: the kernel it tunes
        kernel = found if isinstance(found, Kernel) else Kernel(found)
        _resolved[ref] = type(kernel)(kernel.fn, ref.grid, **dict(ref.options))
    return _resolved[ref]


# Whether this process is importing a kernel's file for a sweep (see _import_script).
importing_script = False


def _import_script(path: str) -> Any:
    """Import the file of a kernel (a script, or a module not on this sys.path). A sweep the file
    starts at its top level (unguarded by `if __name__ == "__main__"`) would sweep again in every
    worker: knit.sweep raises instead (refuse_nested_sweep)."""
    global importing_script
    importing_script = True
    try:
        return _kernel_file._import_path(path)
    finally:
        importing_script = False


def refuse_nested_sweep() -> None:
    if importing_script:
        raise RuntimeError("knit.sweep was called while a sweep worker imported the kernel's file: put the file's "
                           "sweep under `if __name__ == '__main__':`, or pass executor='inline'")


def private_copy(kernel: Kernel) -> Kernel:
    """The kernel with a compile cache of its own: a sweep's compiled programs are dropped with
    its chunk instead of staying in the user's kernel for the life of the process. A kernel built
    another way (a C++ file's) is used as it is."""
    if type(kernel).__init__ is not Kernel.__init__:
        return kernel
    return type(kernel)(kernel.fn, kernel.grid, cache={}, **kernel.options)


def run_chunk(kernel: Kernel | KernelRef, target: str, check: Callable[..., Any] | None,
              units: list[tuple[int, dict, tuple, dict]], quiet: bool = False) -> list[dict[str, Any]]:
    """Evaluate every point of a chunk; a point that fails is a record with its error."""
    if quiet:
        os.environ["KNIT_PROGRESS"] = "0"  # a worker's progress lines would break the sweep's bar
    try:
        k = private_copy(resolve(kernel) if isinstance(kernel, KernelRef) else kernel)
    except Exception as e:  # the kernel's file did not import here: every point says why
        return [{"index": index, "config": config, "compile_s": 0.0, "simulate_s": 0.0, **error_fields(e)}
                for index, config, _, _ in units]
    return [{"index": index, "config": config, **evaluate(k, target, args, kwargs, check)}
            for index, config, args, kwargs in units]


def evaluate(kernel: Kernel, target: str, args: tuple, kwargs: dict,
             check: Callable[..., Any] | None) -> dict[str, Any]:
    """The measurements of one point (see knit.sweep.SweepPoint), or its error."""
    started = time.perf_counter()
    record: dict[str, Any] = {"compile_s": 0.0, "simulate_s": 0.0}
    try:
        compiled = kernel.compile(*args, target=target, **kwargs)
        stats = compiled.stats  # lowers and allocates: allocation failures are this point's error
        compiled_at = time.perf_counter()
        record["compile_s"] = compiled_at - started
        prof = _simulate(kernel, target, args, kwargs, functional=check is not None)
        record["simulate_s"] = time.perf_counter() - compiled_at
        record.update(measurements(prof, stats))
        if check is not None:
            _run_check(check, prof.outputs, args)
            record["check"] = True
    except _CheckFailed as e:
        failed = error_fields(e.cause, "check failed") if e.cause else {
            "error": f"check failed: {e}", "error_rule": None, "error_file": None, "error_line": None}
        record = {**record, **failed, "check": False}
    except Exception as e:  # a failed point is a row with its error, never a failed sweep
        if not record["compile_s"]:
            record["compile_s"] = time.perf_counter() - started
        record = {**record, **error_fields(e)}
    return record


def _simulate(kernel, target, args, kwargs, functional):
    """Timing-only simulation (functional when a check needs the outputs, or when the kernel's
    control flow reads tensor data, as knit.benchmark does)."""
    if functional:
        if has_placeholders(args):
            raise ValueError("check= needs real arrays to run the kernel on; inputs has nt.tensor placeholders")
        return profile(kernel, *args, target=target, timing_only=False, **kwargs)
    try:
        return profile(kernel, *args, target=target, timing_only=True, **kwargs)
    except KnitRuntimeError as e:
        if getattr(e, "rule", None) != "timing-only-data" or has_placeholders(args):
            raise
        return profile(kernel, *args, target=target, timing_only=False, **kwargs)


def measurements(prof: Any, stats: dict[str, Any]) -> dict[str, Any]:
    return {
        "latency_us": prof.latency_us,
        "mfu": prof.mfu,
        "hfu": prof.hfu,
        "utilization": {q: e.utilization for q, e in prof.engines.items()},
        "dma_bytes": prof.dma_bytes,
        "sbuf_high_water": stats["sbuf_high_water"],
        "psum_high_water": stats["psum_high_water"],
        "instructions": sum(prof.instructions.values()),
    }


class _CheckFailed(Exception):
    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.cause = cause


def _run_check(check, outputs, args):
    try:
        ok = check(outputs, args)
    except Exception as e:
        raise _CheckFailed(str(e), e) from e
    if ok is False:
        raise _CheckFailed("check(outputs, inputs) returned False")


def error_fields(e: BaseException, prefix: str = "") -> dict[str, Any]:
    """error (one line: where, type, rule, message), error_rule, error_file, error_line of an
    exception: a Knit error's own location, else the innermost frame outside Knit (the kernel's
    assert, the user's check)."""
    rule = getattr(e, "rule", None)
    file, line = getattr(e, "file", None), getattr(e, "line", None)
    if file:
        file = os.path.abspath(file)
    else:
        file, line = _user_frame(e)
    # One line: the rest of a Knit error's message (the tensors alive, the fix) names files by
    # the paths each process imported them from, which differ between executors.
    lines = str(getattr(e, "message", None) or e).strip().splitlines()
    message = lines[0] if lines else ""
    if not message and file and line:  # a bare `assert`: its condition says what failed
        message = linecache.getline(file, line).strip()
    text = type(e).__name__ + (f" [{rule}]" if rule else "") + (f": {message}" if message else "")
    if prefix:
        text = f"{prefix}: {text}"
    if file:
        text = f"{os.path.basename(file)}:{line}: {text}"
    return {"error": text, "error_rule": rule, "error_file": file, "error_line": line}


# Python's own library and installed packages: an error raised inside NumPy is located at the
# user's line that called it.
_LIBRARY_DIRS = tuple({os.path.abspath(p) + os.sep for key in ("stdlib", "platstdlib", "purelib", "platlib")
                       if (p := sysconfig.get_paths().get(key))})


def _user_frame(e: BaseException) -> tuple[str | None, int | None]:
    where: tuple[str | None, int | None] = (None, None)
    tb = e.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if not _source._inside_knit(name) and not os.path.abspath(name).startswith(_LIBRARY_DIRS):
            where = (os.path.abspath(name), tb.tb_lineno)
        tb = tb.tb_next
    return where


def worker_died_fields(attempts: int, detail: str) -> dict[str, Any]:
    return {"error": f"the worker process running this point died {attempts} times ({detail})",
            "error_rule": WORKER_DIED, "error_file": None, "error_line": None, "compile_s": 0.0, "simulate_s": 0.0}
