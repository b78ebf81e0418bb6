"""Profile.save_html: one self-contained HTML file with a profile's four views (docs/profiling.md).

The page needs no network: its data is one JSON object in a <script> element and its drawing code
(_report_page.py) is inline. The views: the summary (latency, MFU/HFU, engine utilizations, DMA
bandwidth), the engine timeline (wheel to zoom, drag to pan, double-click to reset; hovering an
instruction shows its opcode, source line and wait), SBUF and PSUM occupancy over time with the
tensors alive at each one's peak, the memory map's placements (a static SVG), DMA bandwidth over
time, and the annotated source of by_line().
"""
from __future__ import annotations

import html
import json
import os
from typing import Any

import numpy as np

from ._memory_map import MemoryMap, Placement, from_program
from ._report_page import PAGE

# `prof` below is a knit.profile.Profile (not imported: profile.py imports this module).
Profile = Any

# At most this many timeline rows go into the page (the earliest ones): a browser draws that many
# rectangles interactively; the page says when rows were left out.
MAX_TIMELINE_ROWS = 20000
BANDWIDTH_BINS = 200
# At most this many tensors are drawn in the placements view (each is an SVG rectangle with text).
MAX_PLACEMENTS = 5000


def save_html(prof: Profile, path: str | os.PathLike[str]) -> str | os.PathLike[str]:
    memory = from_program(prof._program, prof.target)  # one map for both memory views
    data = report_data(prof, memory)
    page = PAGE.replace("@TITLE@", html.escape(f"{prof.kernel_name} on {prof.target}"))
    # "</" cannot end the script element early once escaped (JSON allows "<\/").
    page = page.replace("@DATA@", json.dumps(data).replace("</", "<\\/"))
    page = page.replace("@PLACEMENTS@", placements(memory))
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)
    return path


def report_data(prof: Profile, memory: MemoryMap | None = None) -> dict[str, Any]:
    """Everything the page draws, as plain JSON-able values (memory: the program's memory map,
    built here when not given)."""
    if memory is None:
        memory = from_program(prof._program, prof.target)
    rows = prof._timeline_array
    shown = np.sort(rows, order="start_ns")[:MAX_TIMELINE_ROWS]
    source = prof._source
    sites = sorted({int(i) for i in shown["ir"]})
    return {
        "summary": summary(prof),
        "queues": prof._queues,
        "timeline": {"core": shown["core"].tolist(), "queue": shown["queue"].tolist(), "ir": shown["ir"].tolist(),
                     "start": shown["start_ns"].tolist(), "end": shown["end_ns"].tolist(),
                     "stall": shown["stall_ns"].tolist(), "rows": len(rows)},
        "sites": {str(i): [source[i][0], os.path.basename(source[i][1]), source[i][2]] for i in sites},
        "memory": occupancy(memory, rows, len(source)),
        "bandwidth": bandwidth(rows, float(rows["end_ns"].max()) if len(rows) else 0.0),
        "source": prof.by_line().annotate(),
    }


def placements(memory: MemoryMap) -> str:
    """The memory map's picture (static SVG markup), or a note when it has too many tensors to draw."""
    if len(memory.tensors) > MAX_PLACEMENTS:
        return f'<p class="note">{len(memory.tensors)} tensors: too many to draw here; use knit memory.</p>'
    return memory.svg()


def summary(prof: Profile) -> dict[str, Any]:
    return {"kernel": prof.kernel_name, "target": prof.target, "latency_us": prof.latency_us,
            "launch_us": prof.launch_ns / 1e3, "mfu": prof.mfu, "hfu": prof.hfu,
            "dma_bytes": prof.dma_bytes, "dma_gbps": prof.dma_bandwidth_gbps, "dma_utilization": prof.dma_utilization,
            "engines": {q: e.utilization for q, e in prof.engines.items()}}


def live_times(rows: np.ndarray, n_body: int) -> tuple[np.ndarray, np.ndarray]:
    """Per body instruction: the earliest start and the latest end of its executions (NaN when it
    never ran)."""
    first = np.full(n_body, np.inf)
    last = np.full(n_body, -np.inf)
    np.minimum.at(first, rows["ir"], rows["start_ns"])
    np.maximum.at(last, rows["ir"], rows["end_ns"])
    first[np.isinf(first)] = np.nan
    last[np.isinf(last)] = np.nan
    return first, last


def occupancy(memory: MemoryMap, rows: np.ndarray, n_body: int) -> dict[str, Any]:
    """SBUF and PSUM bytes per partition in use over time (every core's summed when the kernel
    runs on several), each tensor counted from the start of its first use to the end of its last;
    with the tensors alive at each buffer's peak."""
    first, last = live_times(rows, n_body)
    out: dict[str, Any] = {}
    for buffer in ("sbuf", "psum"):
        spans = []
        for t in memory.tensors:
            if t.buffer != buffer:
                continue
            start, end = first[t.first], last[t.last]
            if not (np.isnan(start) or np.isnan(end)):
                spans.append((float(start), float(end), t))
        out[buffer] = steps(spans)
    return out


def steps(spans: list[tuple[float, float, Placement]]) -> dict[str, Any]:
    """The step function of bytes per partition in use, and the tensors alive at its peak."""
    events = sorted([(s, t.bytes) for s, _, t in spans] + [(e, -t.bytes) for _, e, t in spans])
    times: list[float] = []
    used: list[int] = []
    level = 0
    for time, delta in events:
        level += delta
        if times and times[-1] == time:
            used[-1] = level
        else:
            times.append(time)
            used.append(level)
    peak_at = times[int(np.argmax(used))] if used else 0.0
    alive = [t for s, e, t in spans if s <= peak_at < e]
    alive.sort(key=lambda t: -t.bytes)
    return {"time": times, "bytes": used, "peak": max(used, default=0), "peak_at": peak_at,
            "alive": [{"name": t.name, "bytes": t.bytes, "offset": t.offset, "where": t.where} for t in alive[:12]],
            "alive_count": len(alive)}


def bandwidth(rows: np.ndarray, end_ns: float) -> dict[str, Any]:
    """DMA bytes per ns in BANDWIDTH_BINS equal time bins up to end_ns (the last instruction's end,
    as the other views), each transfer's bytes spread evenly over its data-moving time."""
    width = end_ns / BANDWIDTH_BINS if end_ns else 1.0
    moved = np.zeros(BANDWIDTH_BINS)
    dma = rows[rows["dma_bytes"] > 0]
    edges = np.arange(BANDWIDTH_BINS + 1) * width
    for start, end, nbytes in zip(dma["start_ns"], dma["end_ns"], dma["dma_bytes"]):
        span = max(end - start, 1e-9)
        overlap = np.clip(np.minimum(edges[1:], end) - np.maximum(edges[:-1], start), 0, None)
        moved += overlap / span * nbytes
    return {"bin_ns": width, "bytes_per_ns": (moved / width).tolist()}
