"""Where a sweep's chunks run: in this process, on a local process pool, or on Ray (docs/sweep.md).

Every executor runs the same function (_sweep_run.run_chunk) on the same chunks, and the simulator
is deterministic, so the points are the same whichever runs them; only wall times differ. A chunk
whose worker process dies is run once more; if it dies again its points become error rows.
"""
from __future__ import annotations

import ast
import concurrent.futures
import contextlib
import multiprocessing
import os
import pickle
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from . import _sweep_run
from ._kernel import Kernel

EXECUTORS = ("inline", "process", "ray")
# Fewer points than this run in this process when no executor is named: a pool's start-up (a
# fresh interpreter importing Knit per worker, about 0.3 s) would cost more than it saves.
INLINE_BELOW = 4
# Chunks per worker: enough for the last ones to balance the load, few enough that scheduling
# (about a millisecond per chunk on a pool, more on Ray) stays small next to a point's cost.
CHUNKS_PER_WORKER = 4
MAX_CHUNK = 32

Unit = tuple[int, dict, tuple, dict]
Deliver = Callable[[list[dict[str, Any]]], None]


def choose(executor: Any, num_points: int) -> Any:
    """The executor to use: the one named, else Ray when KNIT_RAY_ADDRESS is set, else inline for
    a tiny space and the process pool otherwise."""
    if executor is None:
        if os.environ.get("KNIT_RAY_ADDRESS"):
            return "ray"
        return "inline" if num_points < INLINE_BELOW else "process"
    if isinstance(executor, str) and executor not in EXECUTORS:
        raise ValueError(f"executor={executor!r}: use one of {', '.join(EXECUTORS)}, a "
                         f"concurrent.futures.Executor, or None (inline for tiny sweeps, else a process pool)")
    return executor


def workers_of(executor: Any) -> int:
    if executor == "ray":
        return max(1, int(ensure_ray().cluster_resources().get("CPU", 1)))
    if isinstance(executor, concurrent.futures.Executor):
        return getattr(executor, "_max_workers", None) or os.cpu_count() or 1
    return 1 if executor == "inline" else os.cpu_count() or 1


def chunks(units: list[Unit], workers: int) -> list[list[Unit]]:
    """About CHUNKS_PER_WORKER chunks per worker of at most MAX_CHUNK points, each taking every
    n-th point: neighbours in a grid share their outer keys, and so often their cost (large
    shapes, small blocks), so strided chunks balance better than runs of neighbours."""
    count = min(len(units), max(workers * CHUNKS_PER_WORKER, -(-len(units) // MAX_CHUNK)))
    return [units[i::count] for i in range(count)]


def shippable(kernel: Kernel, check: Any) -> tuple[_sweep_run.KernelRef | None, str]:
    """(the kernel's reference, "") when other processes can run this sweep, else (None, why)."""
    ref = _sweep_run.kernel_ref(kernel)
    if ref is None:
        return None, (f"kernel {kernel.fn.__qualname__} is not a Python kernel defined at a module's top level, "
                      f"so another process cannot import it")
    if ref.module == "__main__" and not _has_main_guard(ref.file):
        return None, (f"kernel {kernel.fn.__qualname__} is defined in a script without an `if __name__ == "
                      f"'__main__':` block, which each worker would run again when it imports the kernel; put the "
                      f"script's sweep under one to use a process pool")
    try:
        pickle.dumps(check)
    except Exception as e:
        return None, f"check={check!r} cannot be pickled ({e}); make it a module-level function"
    return ref, ""


def _has_main_guard(path: str) -> bool:
    """Whether the script has a top-level `if __name__ == "__main__":` block."""
    try:
        with open(path) as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return False
    tests = [ast.unparse(node.test) for node in tree.body if isinstance(node, ast.If)]
    return any("__name__" in test and "__main__" in test for test in tests)


def run(executor: Any, kernel: Kernel, target: str, check: Any, work: list[list[Unit]], deliver: Deliver,
        named: bool = True) -> str:
    """Run every chunk, handing each chunk's records to `deliver` as it finishes; returns the name
    of the executor that ran them. An executor the user did not name (`named` False) that cannot
    ship the kernel to other processes gives way to this process, with a warning."""
    if executor == "inline" or not work:
        for chunk in work:
            deliver(_sweep_run.run_chunk(kernel, target, check, chunk))
        return "inline"
    ref, why = shippable(kernel, check)
    if ref is None:
        if named:
            raise ValueError(f"executor={executor!r}: {why} (or use executor='inline')")
        warnings.warn(f"knit.sweep runs in this process: {why}", stacklevel=3)
        return run("inline", kernel, target, check, work, deliver)
    if executor == "ray":
        _run_ray(ref, target, check, work, deliver)
        return "ray"
    if executor == "process":
        _refuse_nested_start()
        _run_pool(None, ref, target, check, work, deliver)
        return "process"
    _run_pool(executor, ref, target, check, work, deliver)
    return type(executor).__name__


def _refuse_nested_start() -> None:
    """A spawned worker re-imports the main script; a sweep at the script's top level would start
    a pool of its own there, which Python forbids. Say how to fix it."""
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise RuntimeError("knit.sweep was started while a worker process imported your script: put the script's "
                           "sweep under `if __name__ == '__main__':` (each worker of a process pool imports the "
                           "main script again), or pass executor='inline'")


def _new_pool() -> concurrent.futures.ProcessPoolExecutor:
    # spawn: each worker is a fresh interpreter with this process's sys.path and environment
    # (KNIT_CACHE_DIR, KNIT_BACKEND, ...) as they are now; fork would copy the C++ core's threads
    # and locks mid-state.
    return concurrent.futures.ProcessPoolExecutor(os.cpu_count() or 1, mp_context=multiprocessing.get_context("spawn"))


def _run_pool(given: concurrent.futures.Executor | None, ref: _sweep_run.KernelRef, target: str, check: Any,
              work: list[list[Unit]], deliver: Deliver) -> None:
    """On a process pool (`given`, else a new spawn pool per attempt): chunks lost to a dead
    worker (the pool then breaks) run once more on a new pool."""
    pending, attempt = list(work), 0
    while pending:
        attempt += 1
        pool = given if given is not None and attempt == 1 else _new_pool()
        lost = []
        try:
            with _main_not_reimported():  # the workers start as the chunks are submitted
                futures = {pool.submit(_sweep_run.run_chunk, ref, target, check, chunk, True): chunk
                           for chunk in pending}
            for future in concurrent.futures.as_completed(futures):
                try:
                    records = future.result()
                except BrokenProcessPool:
                    lost.append(futures[future])
                    continue
                except Exception as e:  # the chunk could not start (its kernel did not import, say)
                    records = _failed(futures[future], e)
                deliver(records)
        finally:
            if pool is not given:
                pool.shutdown(wait=True, cancel_futures=True)
        if lost and attempt >= 2:
            for chunk in lost:
                deliver(_died(chunk, attempt, "the process pool broke"))
            lost = []
        pending = lost


@contextlib.contextmanager
def _main_not_reimported() -> Iterator[None]:
    """While workers start, the main module does not name its file: a spawned worker then does
    not run the main script again (Python's multiprocessing would, so that objects of __main__
    unpickle). Nothing of __main__ travels in a sweep: a kernel defined there is found by its
    file (_sweep_run.resolve). So a script that sweeps at its top level, unguarded, works."""
    main = sys.modules.get("__main__")
    saved: dict[str, Any] = {k: main.__dict__[k] for k in ("__file__", "__spec__")
                             if main is not None and k in main.__dict__}
    if main is not None:
        main.__dict__.pop("__file__", None)
        main.__spec__ = None
    try:
        yield
    finally:
        if main is not None:
            main.__dict__.update(saved)


def _failed(chunk: Iterable[Unit], e: BaseException) -> list[dict[str, Any]]:
    return [{"index": i, "config": config, "compile_s": 0.0, "simulate_s": 0.0, **_sweep_run.error_fields(e)}
            for i, config, _, _ in chunk]


def _died(chunk: Iterable[Unit], attempts: int, detail: str) -> list[dict[str, Any]]:
    return [{"index": i, "config": config, **_sweep_run.worker_died_fields(attempts, detail)}
            for i, config, _, _ in chunk]


def _run_ray(ref: _sweep_run.KernelRef, target: str, check: Any, work: list[list[Unit]], deliver: Deliver) -> None:
    """As Ray tasks (Ray retries a task whose worker died once: max_retries=1)."""
    ray = ensure_ray()
    task = ray.remote(max_retries=1)(_sweep_run.run_chunk)
    pending = {task.remote(ref, target, check, chunk, True): chunk for chunk in work}
    while pending:
        # Up to RAY_BATCH finished chunks at a time, or those done within a second: a wait costs
        # time in the number of pending tasks, so one wait per chunk would be quadratic.
        done, _ = ray.wait(list(pending), num_returns=min(len(pending), RAY_BATCH), timeout=1.0)
        for finished in done:
            deliver(_ray_records(ray, finished, pending.pop(finished)))


# How many finished chunks one ray.wait may return.
RAY_BATCH = 16


def _ray_records(ray: Any, finished: Any, chunk: list[Unit]) -> list[dict[str, Any]]:
    try:
        return ray.get(finished)
    except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
            ray.exceptions.LocalRayletDiedError) as e:
        return _died(chunk, 2, type(e).__name__)
    except ray.exceptions.RayTaskError as e:  # the chunk could not start (its kernel did not import, say)
        return _failed(chunk, e.cause if isinstance(e.cause, BaseException) else e)


def ensure_ray() -> Any:
    """The ray module, connected: to KNIT_RAY_ADDRESS when set, else to the cluster ray.init
    finds (RAY_ADDRESS), else to a local cluster Ray starts, whose workers can import Knit."""
    try:
        import ray
    except ImportError:
        raise ImportError("executor='ray' needs Ray: pip install 'knit[ray]' (or pip install ray)") from None
    if not ray.is_initialized():
        address = os.environ.get("KNIT_RAY_ADDRESS") or None
        env = {} if address else {"env_vars": {"PYTHONPATH": os.pathsep.join(_local_paths())}}
        ray.init(address=address, runtime_env=env or None, include_dashboard=False, log_to_driver=False)
    return ray


def _local_paths() -> list[str]:
    """Knit's own folder and $PYTHONPATH, for the workers of a local cluster (a kernel's module
    that they cannot import is imported from its file)."""
    knit_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return [knit_parent] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
