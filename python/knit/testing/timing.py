"""Latency and utilization assertions backed by the simulator (knit.profile).

The timing model is deterministic: the same kernel, argument shapes and target give the same
nanoseconds in every run and process (docs/simulator.md), so a bound checked here is not flaky.
A failure carries the profile summary and the path of a saved Perfetto trace of the run.
"""
import os
import re
import tempfile
from collections.abc import Callable
from typing import Any

from ..profile import Profile, profile as knit_profile

# Where failing runs save their traces. The pytest plugin points it into pytest's temporary
# folder (--knit-trace-dir overrides); plain scripts use the system temporary folder.
trace_dir: str | None = None
# Names the trace file after the running test when the pytest plugin sets it.
current_test: str | None = None


class KnitTimingError(AssertionError):
    """A latency or utilization bound failed. `profile` is the run's knit.Profile, `trace_path`
    the Perfetto / Chrome trace saved for it."""

    def __init__(self, message: str, profile: Profile, trace_path: str) -> None:
        super().__init__(message)
        self.profile = profile
        self.trace_path = trace_path


def _save_trace(profile):
    folder = trace_dir or os.path.join(tempfile.gettempdir(), "knit-traces")
    os.makedirs(folder, exist_ok=True)
    stem = re.sub(r"[^\w.-]+", "_", current_test or profile.kernel_name).strip("_")[:120]
    path = os.path.join(folder, f"{stem}-{profile.target}.json")
    return os.path.abspath(profile.save_trace(path))


def _fail(message, profile):
    __tracebackhide__ = True
    path = _save_trace(profile)
    raise KnitTimingError(f"{message}\n{profile.summary()}\nPerfetto trace: {path} (open in ui.perfetto.dev)",
                          profile, path)


def _bound_for(bound, target):
    """A bound given as one number, or as {target: number} (None where the target has none)."""
    if isinstance(bound, dict):
        return bound.get(target)
    return bound


Bound = float | dict[str, float]


def assert_latency(kernel: Callable[..., Any], *inputs: Any, max_us: Bound, min_us: Bound | None = None,
                   target: str | None = None, **kwargs: Any) -> Profile:
    """Profile `kernel` on `inputs` (arrays, or nt.tensor placeholders for a timing-only run) and
    assert its simulated latency is at most `max_us` microseconds (and at least `min_us`: a kernel
    that suddenly got much faster may have stopped doing its work). Bounds may be dicts keyed by
    target. Returns the knit.Profile."""
    __tracebackhide__ = True  # pytest shows the caller's line, not this helper's
    profile = knit_profile(kernel, *inputs, target=target, **kwargs)
    upper, lower = _bound_for(max_us, profile.target), _bound_for(min_us, profile.target)
    if upper is None and isinstance(max_us, dict):
        raise KeyError(f"max_us has no bound for target {profile.target} (it has {sorted(max_us)})")
    if profile.latency_us > upper:
        _fail(f"kernel {profile.kernel_name} on {profile.target} took {profile.latency_us:.3f} us, "
              f"over the {upper} us bound", profile)
    if lower is not None and profile.latency_us < lower:
        _fail(f"kernel {profile.kernel_name} on {profile.target} took {profile.latency_us:.3f} us, "
              f"under the {lower} us lower bound", profile)
    return profile


# Engine names a user may write, to the profile's queue names ("dma" is all DMA queues together).
_ENGINES = {"pe": "pe", "tensor": "pe", "tensore": "pe", "act": "act", "scalar": "act", "scalare": "act",
            "dve": "dve", "vector": "dve", "vectore": "dve", "pool": "pool", "gpsimd": "pool", "dma": "dma"}


def assert_engine_utilization(kernel: Callable[..., Any], *inputs: Any, engine: str, min_util: float | None = None,
                              max_util: float | None = None, target: str | None = None, **kwargs: Any) -> Profile:
    """Assert the fraction of the run `engine` was busy ("pe"/"tensor", "act"/"scalar",
    "dve"/"vector", "pool"/"gpsimd", or "dma": the DMA bandwidth) is within [min_util, max_util]
    (fractions of the total, launch overhead included, as Profile.engines reports). Returns the
    knit.Profile."""
    __tracebackhide__ = True  # pytest shows the caller's line, not this helper's
    queue = _ENGINES.get(str(engine).lower())
    if queue is None:
        raise ValueError(f"unknown engine {engine!r}; use one of {', '.join(sorted(set(_ENGINES)))}")
    if min_util is None and max_util is None:
        raise ValueError("give min_util and/or max_util (fractions of the run, 0..1)")
    profile = knit_profile(kernel, *inputs, target=target, **kwargs)
    util = profile.dma_utilization if queue == "dma" else profile.engines[queue].utilization
    where = f"kernel {profile.kernel_name} on {profile.target}: {queue} busy {100 * util:.2f}% of the run"
    if min_util is not None and util < min_util:
        _fail(f"{where}, below the {100 * min_util:.2f}% minimum", profile)
    if max_util is not None and util > max_util:
        _fail(f"{where}, above the {100 * max_util:.2f}% maximum", profile)
    return profile
