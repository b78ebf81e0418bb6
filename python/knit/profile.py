"""knit.profile and knit.benchmark: simulated NeuronCore timing of a kernel (docs/simulator.md).

``knit.profile(kernel, *args, target="trn2")`` compiles the kernel to its engine program, runs it
(real arrays: functional and timing; ``nt.tensor[...]`` placeholders: timing only) and returns a
:class:`Profile`. ``knit.benchmark`` wraps the same simulation in ``nki.benchmark``'s interface.
The simulator is deterministic: the same kernel, shapes and target always give the same times.
"""
from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Sequence
from typing import Any

from . import _kernel, _lines, _ranks, _trace
from ._kernel import Kernel
from ._lines import LineProfile
from ._pyplot import pyplot
from .typing import TensorType

PathLike = str | os.PathLike


class EngineStats:
    """One queue's share of the run: busy time, utilization (busy / total) and instructions."""

    def __init__(self, name, busy_ns, total_ns, instructions):
        self.name = name
        self.busy_ns = busy_ns
        self.utilization = busy_ns / total_ns if total_ns else 0.0
        self.instructions = instructions

    def __repr__(self):
        return f"EngineStats({self.name}: {self.busy_ns / 1e3:.2f} us busy, {100 * self.utilization:.1f}%, " \
               f"{self.instructions} instructions)"


COLLECTIVE_TRACK = 100  # the trace track (tid) of a rank's collectives, after its queues'

_ENGINE_NAMES = {"pe": "Tensor", "act": "Scalar", "dve": "Vector", "pool": "GpSimd"}  # as the trace names them


class Profile:
    """Simulated timing of one kernel run on a NeuronCore model.

    total_ns / latency_us: end-to-end time including the fixed launch overhead;
    engines: {queue: EngineStats} for pe (TensorE), act (ScalarE), dve (VectorE), pool (GpSimd)
    and the DMA queues dma0..dma3; dma_bytes, dma_bandwidth_gbps (bytes over the whole run),
    dma_utilization (time the DMA bandwidth was in use); hbm_read_bytes / hbm_write_bytes; mfu
    (model matmul FLOPs over the bf16 peak), hfu (TensorE streaming time over the run) and mbu
    (HBM bytes over the core's HBM bandwidth, hbm_peak_gbps, times the run);
    instructions (executed, loops count every trip); stalls (time each queue waited for each other queue's semaphores);
    outputs: the kernel's results (None for a timing-only run; a list per rank for a multi-rank
    kernel). Multi-rank kernels (knit.simulate(kernel, ranks=N)): ranks, rank_latency_ns (each
    rank's end, launch included; total_ns is the slowest) and collectives (one dict per rank and
    collective: rank, line, arrive_ns, start_ns, end_ns, steps, step_bytes, path)."""

    def __init__(self, compiled, data, outputs):
        self.kernel_name = compiled.core.name
        self.target = compiled.program.target
        self.core_name = data["core_name"]
        self.total_ns = data["total_ns"]
        self.launch_ns = data["launch_ns"]
        total = self.total_ns
        queues = data["queues"]
        self.engines = {q: EngineStats(q, data["busy_ns"][i], total, data["instructions"][i])
                        for i, q in enumerate(queues)}
        self.instructions = {q: data["instructions"][i] for i, q in enumerate(queues)}
        self.instructions["sync"] = data["barriers"]
        self.dma_bytes = data["dma_bytes"]
        self.hbm_read_bytes = data["hbm_read_bytes"]
        self.hbm_write_bytes = data["hbm_write_bytes"]
        self.dma_bandwidth_gbps = self.dma_bytes / total if total else 0.0  # bytes/ns = GB/s
        self.dma_utilization = data["dma_active_ns"] / total if total else 0.0
        self.flops = data["flops"]
        self.mfu = self.flops / (data["peak_bf16_tflops"] * 1e3 * total) if total else 0.0  # TFLOPS -> FLOP/ns
        self.hfu = data["pe_array_ns"] / total if total else 0.0
        # MBU: HBM traffic over what the core's share of the HBM bandwidth could move in the run.
        self.hbm_peak_gbps = data["hbm_bytes_per_ns"]  # bytes/ns = GB/s
        hbm_bytes = self.hbm_read_bytes + self.hbm_write_bytes
        self.mbu = hbm_bytes / (self.hbm_peak_gbps * total) if total else 0.0
        self.peak_flops_per_byte = data["peak_bf16_tflops"] * 1e3 / self.hbm_peak_gbps
        self.stalls = {(queues[w], queues[p]): ns for w, row in enumerate(data["stall_ns"])
                       for p, ns in enumerate(row) if ns > 0}
        self._queues = queues
        self._timeline_array = data["timeline"]
        self._program = compiled.program
        self.outputs = outputs
        # Multi-rank kernels (docs/collectives.md): each rank's latency, launch included, and each
        # rank's part in each collective (rank, line, arrive/start/end ns, ring steps, path).
        self.ranks = getattr(compiled, "ranks", 1)
        self.rank_latency_ns = [end + self.launch_ns for end in data.get("core_end_ns", [])][:self.ranks] \
            if self.ranks > 1 else [self.total_ns]
        source = compiled.program.source if data.get("collectives") else []
        self.collectives = [dict(row, line=f"{source[row['ir']][1]}:{source[row['ir']][2]}")
                            for row in data.get("collectives", [])]

    @functools.cached_property
    def _timeline(self):
        """(core, ir, queue, start_ns, end_ns, issue_ns, stall_ns, stalled_on, waited_row, dma_bytes)
        per executed instruction, as Python tuples, built only when a report or trace needs them."""
        return self._timeline_array.tolist()

    @functools.cached_property
    def _source(self):
        """(opcode, file, line) per body instruction, built only when a report names one."""
        return self._program.source

    def by_line(self) -> LineProfile:
        """The run folded onto the kernel's source lines: busy time per engine, waits, DMA bytes
        and the critical path per line (docs/profiling.md)."""
        return _lines.build(self.kernel_name, self.target, self.total_ns, self.launch_ns, self._queues,
                            self._timeline, self._source)

    @property
    def latency_us(self) -> float:
        return self.total_ns / 1e3

    def top_stalls(self, n: int = 5) -> list[tuple[str, str, float]]:
        """The n longest waits: (waiting queue, queue waited for, total ns), longest first."""
        return sorted(((w, p, ns) for (w, p), ns in self.stalls.items()), key=lambda x: -x[2])[:n]

    def top_stalled_instructions(self, n: int = 5) -> list[tuple[str, str, str, float, str | None]]:
        """The n instructions that waited longest: (queue, opcode, file:line, stall ns, waited-for queue)."""
        rows = sorted(self._timeline, key=lambda t: -t[6])[:n]
        out = []
        for core, ir, q, start, end, issue, stall, on, *_ in rows:
            if stall <= 0:
                break
            op, file, line = self._source[ir]
            out.append((self._queues[q], op, f"{file}:{line}", stall, self._queues[on] if on >= 0 else None))
        return out

    def summary(self) -> str:
        lines = [f"kernel {self.kernel_name} on {self.target} ({self.core_name}): "
                 f"{self.latency_us:.2f} us (includes {self.launch_ns / 1e3:.1f} us launch overhead)",
                 f"  {'engine':<8}{'busy us':>12}{'util':>8}{'instrs':>10}"]
        for q, e in self.engines.items():
            if e.instructions:
                lines.append(f"  {q:<8}{e.busy_ns / 1e3:>12.2f}{100 * e.utilization:>7.1f}%{e.instructions:>10}")
        lines.append(f"  DMA: {self.dma_bytes / 1e6:.2f} MB, {self.dma_bandwidth_gbps:.1f} GB/s average, "
                     f"bandwidth in use {100 * self.dma_utilization:.1f}% of the time")
        lines.append(f"  MFU {100 * self.mfu:.2f}%  HFU {100 * self.hfu:.2f}%  "
                     f"sync instructions {self.instructions['sync']}")
        stalls = self.top_stalls()
        if stalls:
            lines.append("  top stalls: " + ", ".join(f"{w} waited {ns / 1e3:.2f} us on {p}" for w, p, ns in stalls))
        for q, op, where, ns, on in self.top_stalled_instructions(3):
            lines.append(f"    {q} {op} at {where} waited {ns / 1e3:.2f} us for {on}")
        return "\n".join(lines)

    def __repr__(self):
        return self.summary()

    def summary_json(self) -> dict[str, float]:
        """The headline metrics under neuron-profile's summary-json names (docs/cli.md lists each
        key and how Knit computes it)."""
        def active(queues):
            return 100 * sum(self.engines[q].utilization for q in queues)
        return {
            "total_time": self.total_ns / 1e9,
            "hbm_read_bytes": self.hbm_read_bytes,
            "hbm_write_bytes": self.hbm_write_bytes,
            "hardware_flops": self.flops,
            "hfu_estimated_percent": 100 * self.hfu,
            "mfu_estimated_percent": 100 * self.mfu,
            "tensor_engine_active_time_percent": active(["pe"]),
            "vector_engine_active_time_percent": active(["dve"]),
            "scalar_engine_active_time_percent": active(["act"]),
            "gpsimd_engine_active_time_percent": active(["pool"]),
            "dma_active_time_percent": 100 * self.dma_utilization,
            "dma_transfer_total_bytes": self.dma_bytes,
            "mbu_estimated_percent": 100 * self.mbu,
            "hbm_mbu_estimated_percent": 100 * self.mbu,  # Neuron 2.34's name for the same figure
            "peak_flops_bandwidth_ratio": self.peak_flops_per_byte,
        }

    def trace_json(self) -> str:
        """The timeline as Chrome / Perfetto trace JSON text: one complete event per executed
        instruction on its queue's track (per core), times in microseconds. Written by the core's
        one trace writer (knit/sim/trace.h), which knit/testing.h's C++ profiles share. A
        multi-rank kernel's collectives are added on a "collectives" track of each rank: the
        wait for the group's last rank, then the transfer."""
        text = self._program.chrome_trace(self._timeline_array)
        if not self.collectives:
            return text
        trace = json.loads(text)
        for c in self.collectives:
            phases = (("wait", c["arrive_ns"], c["start_ns"]), (c["kind"], c["start_ns"], c["end_ns"]))
            for name, start, end in phases:
                trace["traceEvents"].append({
                    "name": name, "cat": "collective", "ph": "X", "pid": c["rank"], "tid": COLLECTIVE_TRACK,
                    "ts": start / 1e3, "dur": (end - start) / 1e3,
                    "args": {"source": c["line"], "path": c["path"], "steps": c["steps"],
                             "step_bytes": c["step_bytes"]}})
        return json.dumps(trace)

    def trace_events(self) -> list[dict[str, Any]]:
        """The trace's events as Python dicts (see trace_json)."""
        return json.loads(self.trace_json())["traceEvents"]

    def save_trace(self, path: PathLike) -> PathLike:
        """Write the timeline as Chrome trace JSON (open in ui.perfetto.dev or chrome://tracing)."""
        with open(path, "w") as f:
            f.write(self.trace_json())
        return path

    def save_html(self, path: PathLike) -> PathLike:
        """Write a self-contained HTML report (no network needed to view it): the summary, an
        interactive engine timeline, SBUF / PSUM occupancy over time, DMA bandwidth over time and
        the annotated source (docs/profiling.md)."""
        from . import _report
        return _report.save_html(self, path)

    def plot(self, path: PathLike) -> PathLike:
        """Save a PNG engine timeline (needs matplotlib: pip install matplotlib)."""
        plt = pyplot("Profile.plot", "Profile.save_trace works")
        used = sorted({q for _, _, q, *_ in self._timeline})
        row = {q: i for i, q in enumerate(used)}
        fig, ax = plt.subplots(figsize=(12, 0.5 + 0.5 * len(used)))
        for core, ir, q, start, end, *_ in self._timeline:
            ax.broken_barh([(start / 1e3, max(end - start, 1) / 1e3)], (row[q] - 0.4, 0.8), color=f"C{q % 10}")
        ax.set_yticks(range(len(used)))
        ax.set_yticklabels([_ENGINE_NAMES.get(self._queues[q], self._queues[q]) for q in used])
        ax.set_xlabel("time (us)")
        ax.set_title(f"{self.kernel_name} on {self.target}: {self.latency_us:.1f} us")
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return path


def has_placeholders(args: Sequence[Any]) -> bool:
    """Whether any argument is a shape/dtype placeholder (a timing-only run)."""
    return any(isinstance(a, TensorType) for a in args)


def profile(kernel: Callable[..., Any], *args: Any, target: str | None = None, timing_only: bool | None = None,
            **kwargs: Any) -> Profile:
    """Simulate `kernel` on `args` for `target` and return its Profile. Placeholders
    (``nt.tensor[[shape], dtype]``) among the arguments make it timing-only; so does
    timing_only=True with real arrays (their values are then ignored)."""
    ranked = kernel if isinstance(kernel, _ranks.RankedKernel) else None
    k = ranked if ranked else kernel if isinstance(kernel, Kernel) else Kernel(kernel)
    compiled = k.compile(*args, target=target, **kwargs)
    shapes_only = has_placeholders(args) if timing_only is None else bool(timing_only)
    flat = _ranks.flat_args(ranked.per_rank(args, kwargs)) if ranked else args
    hosts, originals, any_torch = Kernel._hosts(compiled, flat, shapes_only=shapes_only)
    data = _trace.core_call(compiled.program.time, hosts, shapes_only, True, _kernel.default_backend(),
                            getattr(compiled, "lnc", 0))
    outputs = None
    if not shapes_only:
        outputs = Kernel._results(compiled, data["outputs"], data["args_after"], data["warnings"], originals,
                                  any_torch)
        if isinstance(compiled, _ranks.RankedCompiled):
            outputs = compiled.group_by_rank(outputs)
    return Profile(compiled, data, outputs)
