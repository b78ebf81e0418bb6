"""knit.benchmark: nki.benchmark's interface on Knit's simulator.

    bench = knit.benchmark(warmup=10, iters=100)(kernel)
    bench(a, b)                       # arrays or nt.tensor[[shape], dtype] placeholders
    bench.benchmark_result.nc_latency.get_latency_percentile(50)   # microseconds

or in one call, ``knit.benchmark(kernel, a, b)`` returning the same object. As with
nki.benchmark, input values are ignored: the run is timing-only (a kernel whose control flow
reads tensor data falls back to a functional run on the arrays given). The simulator is
deterministic, so every percentile is the same number; warmup and iters are accepted for
compatibility and do not repeat the simulation.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._kernel import Kernel
from .errors import KnitRuntimeError
from .profile import Profile, has_placeholders, profile

_PERCENTILES = (0, 1, 10, 25, 50, 90, 99, 100)


class LatencyStats:
    """Latency percentiles in microseconds (nki.benchmark's nc_latency)."""

    def __init__(self, latency_us: float) -> None:
        self._us = latency_us

    def get_latency_percentile(self, p: float) -> float:
        if not 0 <= p <= 100:
            raise ValueError(f"percentile must be in [0, 100], got {p}")
        return self._us

    def __repr__(self):
        return "NCLatency:\n" + "\n".join(f"p{p} = {self._us:.0f}us" for p in _PERCENTILES)


class BenchmarkResult:
    """nc_latency: the run's latency (a multi-rank kernel: its slowest rank); rank_latency_us:
    each rank's latency (one entry for a single-rank kernel)."""

    def __init__(self, latency_us: float, rank_latency_us: list[float] | None = None) -> None:
        self.nc_latency = LatencyStats(latency_us)
        self.rank_latency_us = rank_latency_us or [latency_us]


class Benchmark:
    """A kernel wrapped for benchmarking; calling it simulates one run and sets
    ``benchmark_result`` (and ``profile``, the full knit.profile.Profile)."""

    def __init__(self, kernel: Any, warmup: int = 10, iters: int = 100, target: str | None = None,
                 save_trace_name: str | None = None) -> None:
        from ._ranks import RankedKernel
        self.kernel = kernel if isinstance(kernel, (Kernel, RankedKernel)) else Kernel(kernel)
        self.warmup, self.iters, self.target = warmup, iters, target
        self.save_trace_name = save_trace_name
        self.benchmark_result: BenchmarkResult | None = None
        self.profile: Profile | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Benchmark:
        try:
            prof = profile(self.kernel, *args, target=self.target, timing_only=True, **kwargs)
        except KnitRuntimeError as e:
            if getattr(e, "rule", None) != "timing-only-data" or has_placeholders(args):
                raise  # placeholders cannot run functionally: the timing-only error says why
            prof = profile(self.kernel, *args, target=self.target, timing_only=False, **kwargs)
        if self.save_trace_name:
            prof.save_trace(self.save_trace_name)
        self.profile = prof
        self.benchmark_result = BenchmarkResult(prof.latency_us, [ns / 1e3 for ns in prof.rank_latency_ns])
        return self


def benchmark(kernel: Callable[..., Any] | None = None, *args: Any, warmup: int = 10, iters: int = 100,
              target: str | None = None, save_trace_name: str | None = None, save_neff_name: str | None = None,
              **kwargs: Any) -> Benchmark | Callable[[Callable[..., Any]], Benchmark]:
    """``knit.benchmark(warmup=, iters=)(kernel)`` -> Benchmark; ``knit.benchmark(kernel, *args)``
    -> the Benchmark after one simulated run. Other nki.benchmark options are accepted and ignored."""
    if kernel is None:
        return lambda k: Benchmark(k, warmup, iters, target, save_trace_name)
    bench = Benchmark(kernel, warmup, iters, target, save_trace_name)
    return bench(*args, **kwargs) if args else bench
