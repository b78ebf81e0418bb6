"""Where each SBUF / PSUM tensor sits over its lifetime: ``Compiled.memory_map()``, and the same
picture at the failing point of a capacity error (``err.memory_map``). docs/profiling.md, "Memory
map".

Time is the body instruction index (the program's static order, not simulated time): a tensor
holds its bytes from its first use to its last (its live range, ir/liveness.h), in every
partition of its partition range, at its byte offset within each partition.
"""
from __future__ import annotations

import html
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ._pyplot import pyplot

PathLike = str | os.PathLike[str]

# Colours by source line (the same line, the same colour), cycled.
_PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7", "#9c755f", "#bab0ac",
            "#86bcb6", "#8cd17d", "#d4a6c8")
_FAILING_COLOUR = "#e15759"
_LEGEND_COLUMNS = 6
_ORDER = {"sbuf": 0, "psum": 1}  # buffers in the table and the picture
_PLOT_WIDTH, _PANEL_HEIGHT, _MARGIN_LEFT, _MARGIN_TOP = 900, 260, 80, 52


@dataclass(frozen=True)
class Placement:
    """One tensor's placement: `partitions` partitions from `partition`, bytes [offset, offset +
    bytes) of each, for body instructions first..last (both included). offset is -1 for the tensor
    of a capacity error that did not fit."""
    id: int
    name: str
    buffer: str  # "sbuf" | "psum"
    core: int
    partition: int
    partitions: int
    offset: int
    bytes: int
    first: int
    last: int
    file: str
    line: int

    @property
    def end(self) -> int:
        return self.offset + self.bytes

    @property
    def where(self) -> str:
        return f"{os.path.basename(self.file)}:{self.line}"

    def live_at(self, index: int) -> bool:
        return self.first <= index <= self.last

    def describe(self) -> str:
        """One line: name, partitions, bytes, live range, source line."""
        placed = "not placed" if self.offset < 0 else f"bytes [{self.offset}, {self.end})"
        return (f"'{self.name}' {self.buffer} partitions [{self.partition}, {self.partition + self.partitions}) "
                f"{placed} ({self.bytes} per partition), live {self.first}..{self.last}, {self.where}")


class MemoryMap:
    """The placements of a kernel's on-chip tensors. ``tensors`` (Placement records, sorted by
    buffer, core and offset), ``high_water`` (bytes per partition per buffer), ``capacity`` (the
    target's bytes per partition per buffer), ``at(i)``, ``text()``, ``save_svg()``,
    ``save_png()``. From a capacity error, also ``failing`` (the tensor that did not fit) and
    ``alive`` (the tensors holding its buffer at that point)."""

    def __init__(self, tensors: list[dict[str, Any]], capacity: dict[str, int],
                 failing: dict[str, Any] | None = None, alive: Sequence[int] = ()) -> None:
        self.tensors = sorted((Placement(**t) for t in tensors),
                              key=lambda p: (_ORDER.get(p.buffer, 2), p.core, p.offset, p.first, p.id))
        self.capacity = dict(capacity)
        self.failing = Placement(**failing) if failing else None
        ids = set(alive)
        self.alive = [p for p in self.tensors if p.id in ids]
        lines = sorted({(p.file, p.line) for p in self.tensors})
        self._colours = {at: _PALETTE[n % len(_PALETTE)] for n, at in enumerate(lines)}

    def colour(self, p: Placement) -> str:
        """The fill of `p`'s rectangle: one per source line."""
        return self._colours[(p.file, p.line)]

    @property
    def high_water(self) -> dict[str, int]:
        """Per buffer, the highest byte in use in any partition (the largest over the cores)."""
        return {b: max((p.end for p in self.tensors if p.buffer == b), default=0) for b in ("sbuf", "psum")}

    def at(self, index: int) -> list[Placement]:
        """The tensors live at body instruction `index`, by buffer and offset."""
        return [p for p in self.tensors if p.live_at(index)]

    def text(self) -> str:
        """A table of every placement (buffer, core when several, name, partitions, bytes, live
        range, source line), sorted by offset; at a capacity error, then the failing tensor."""
        cores = len({p.core for p in self.tensors}) > 1
        head = ["buffer"] + (["core"] if cores else []) + ["tensor", "partitions", "bytes", "live", "source"]
        rows = [[p.buffer] + ([str(p.core)] if cores else []) +
                [p.name, f"{p.partition}:{p.partition + p.partitions}", f"{p.offset}:{p.end}",
                 f"{p.first}..{p.last}", p.where] for p in self.tensors]
        widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [head] + rows]
        lines.append("high water (bytes per partition): " +
                     ", ".join(f"{b} {v} of {self.capacity[b]}" if b in self.capacity else f"{b} {v}"
                               for b, v in self.high_water.items() if v or b in self.capacity))
        if self.failing:
            lines.append(f"did not fit at body instruction {self.failing.first}: {self.failing.describe()}")
            lines += ["  alive there: " + p.describe() for p in self.alive]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def to_json(self) -> dict[str, Any]:
        """The map as JSON-able values: tensors (placement dicts, as EngineProgram.memory_map
        gives them), high_water, capacity, and at a capacity error failing and alive (tensor ids);
        MemoryMap(**map.to_json() without high_water) rebuilds it."""
        out: dict[str, Any] = {"tensors": [asdict(p) for p in self.tensors], "high_water": self.high_water,
                               "capacity": self.capacity}
        if self.failing:
            out["failing"] = asdict(self.failing)
            out["alive"] = [p.id for p in self.alive]
        return out

    def _panels(self) -> list[tuple[str, int]]:
        """(buffer, core) of each picture panel: those holding a tensor, and the failing one's."""
        keys = {(p.buffer, p.core) for p in self.tensors}
        if self.failing:
            keys.add((self.failing.buffer, self.failing.core))
        return sorted(keys, key=lambda k: (_ORDER.get(k[0], 2), k[1]))

    def _extent(self) -> int:
        """The last body index any tensor is live at, plus one (the picture's time axis)."""
        spans = self.tensors + ([self.failing] if self.failing else [])
        return max((p.last + 1 for p in spans), default=1)

    def _panel_top(self, buffer: str) -> int:
        """The highest byte a panel shows: the high water, or at a capacity error in this buffer,
        the capacity plus the failing tensor (drawn above the capacity line: it did not fit)."""
        top = self.high_water[buffer]
        if self.failing and self.failing.buffer == buffer:
            top = max(top, self.capacity.get(buffer, top) + self.failing.bytes)
        return max(top, 1)

    def _title(self) -> str:
        if not self.failing:
            return "memory map"
        return (f"capacity error: '{self.failing.name}' ({self.failing.bytes} bytes per partition) does not fit "
                f"in {self.failing.buffer} at body instruction {self.failing.first}")

    def svg(self) -> str:
        """The picture as a self-contained SVG document: per buffer (and core), x = body
        instruction index, y = byte offset within a partition, one rectangle per tensor (hover:
        name, partitions, bytes, live range, source line); at a capacity error, the failing tensor
        in red above the capacity line and the tensors alive there outlined."""
        extent = self._extent()
        panels = self._panels()
        width = _MARGIN_LEFT + _PLOT_WIDTH + 20
        legend_at = _MARGIN_TOP + len(panels) * (_PANEL_HEIGHT + 50)
        height = legend_at + 18 * ((len(self._colours) + _LEGEND_COLUMNS - 1) // _LEGEND_COLUMNS)
        out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
               f'font-family="sans-serif" font-size="11">',
               '<rect x="0" y="0" width="100%" height="100%" fill="white"/>']
        out.append(f'<text x="{_MARGIN_LEFT}" y="20" font-size="14">{html.escape(self._title())}</text>')
        alive = {p.id for p in self.alive}
        for n, (buffer, core) in enumerate(panels):
            y0 = _MARGIN_TOP + n * (_PANEL_HEIGHT + 50)
            out += self._svg_panel(buffer, core, y0, extent, alive)
        out += self._svg_legend(legend_at)
        out.append("</svg>")
        return "\n".join(out) + "\n"

    def _svg_legend(self, y0: int) -> list[str]:
        """A swatch per source line: the colour of its tensors."""
        out = []
        step = _PLOT_WIDTH // _LEGEND_COLUMNS
        for n, ((file, line), colour) in enumerate(self._colours.items()):
            x, y = _MARGIN_LEFT + (n % _LEGEND_COLUMNS) * step, y0 + (n // _LEGEND_COLUMNS) * 18
            out.append(f'<rect class="legend" x="{x}" y="{y}" width="10" height="10" fill="{colour}"/>'
                       f'<text x="{x + 14}" y="{y + 9}">{html.escape(os.path.basename(file))}:{line}</text>')
        return out

    def _svg_panel(self, buffer: str, core: int, y0: int, extent: int, alive: set[int]) -> list[str]:
        top = self._panel_top(buffer)
        sx = _PLOT_WIDTH / extent
        sy = _PANEL_HEIGHT / top

        def box(p: Placement, offset: int) -> tuple[float, float, float, float]:
            return (_MARGIN_LEFT + p.first * sx, y0 + _PANEL_HEIGHT - (offset + p.bytes) * sy,
                    max((p.last + 1 - p.first) * sx, 1.0), max(p.bytes * sy, 1.0))

        cores = f" core {core}" if len({p.core for p in self.tensors}) > 1 else ""
        out = [f'<g class="panel" data-buffer="{buffer}" data-core="{core}">',
               f'<text x="{_MARGIN_LEFT}" y="{y0 - 4}">{buffer}{cores}: byte offset in a partition (0 at the '
               f'bottom, top {top}) over body instruction index 0..{extent - 1}</text>',
               f'<rect x="{_MARGIN_LEFT}" y="{y0}" width="{_PLOT_WIDTH}" height="{_PANEL_HEIGHT}" fill="none" '
               f'stroke="#999"/>',
               f'<text x="{_MARGIN_LEFT - 4}" y="{y0 + _PANEL_HEIGHT}" text-anchor="end">0</text>',
               f'<text x="{_MARGIN_LEFT - 4}" y="{y0 + 10}" text-anchor="end">{top}</text>',
               f'<text x="{_MARGIN_LEFT}" y="{y0 + _PANEL_HEIGHT + 14}">0</text>',
               f'<text x="{_MARGIN_LEFT + _PLOT_WIDTH}" y="{y0 + _PANEL_HEIGHT + 14}" text-anchor="end">{extent}'
               '</text>']
        capacity = self.capacity.get(buffer)
        if capacity is not None and capacity <= top:
            cy = y0 + _PANEL_HEIGHT - capacity * sy
            out.append(f'<line x1="{_MARGIN_LEFT}" x2="{_MARGIN_LEFT + _PLOT_WIDTH}" y1="{cy:.1f}" y2="{cy:.1f}" '
                       f'stroke="black" stroke-dasharray="4 3"/><text x="{_MARGIN_LEFT - 4}" y="{cy:.1f}" '
                       f'text-anchor="end">{capacity}</text>')
        for p in self.tensors:
            if (p.buffer, p.core) == (buffer, core):
                outline = ' stroke="black" stroke-width="2"' if p.id in alive else ' stroke="white"'
                out.append(_svg_rect(box(p, p.offset), self.colour(p), outline, p))
        f = self.failing
        if f and (f.buffer, f.core) == (buffer, core):
            x = _MARGIN_LEFT + f.first * sx
            out.append(f'<line class="failing-point" x1="{x:.1f}" x2="{x:.1f}" y1="{y0}" y2="{y0 + _PANEL_HEIGHT}" '
                       f'stroke="{_FAILING_COLOUR}"/>')
            out.append(_svg_rect(box(f, capacity or 0), _FAILING_COLOUR, ' stroke="black" stroke-dasharray="3 2"',
                                 f, "failing", f"{f.name} (does not fit)"))
        out.append("</g>")
        return out

    def save_svg(self, path: PathLike) -> PathLike:
        """Write svg() to `path` (no dependency); returns path."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.svg())
        return path

    def save_png(self, path: PathLike) -> PathLike:
        """The same picture as a PNG (needs matplotlib: pip install matplotlib); returns path."""
        plt = pyplot("MemoryMap.save_png", "MemoryMap.save_svg works")
        from matplotlib.collections import PatchCollection
        from matplotlib.patches import Rectangle
        panels = self._panels()
        fig, axes = plt.subplots(len(panels), 1, figsize=(12, 3.2 * len(panels)), squeeze=False)
        extent = self._extent()
        alive = {p.id for p in self.alive}
        for ax, (buffer, core) in zip(axes[:, 0], panels):
            mine = [p for p in self.tensors if (p.buffer, p.core) == (buffer, core)]
            top = self._panel_top(buffer)
            # One collection, not a patch per tensor: thousands of tensors draw in a second.
            ax.add_collection(PatchCollection(
                [Rectangle((p.first, p.offset), p.last + 1 - p.first, p.bytes) for p in mine],
                facecolors=[self.colour(p) for p in mine],
                edgecolors=["black" if p.id in alive else "white" for p in mine]))
            for p in mine:
                if p.bytes * 12 >= top and p.last + 1 - p.first >= extent / 12:
                    ax.text(p.first + (p.last + 1 - p.first) / 2, p.offset + p.bytes / 2, p.name, ha="center",
                            va="center", fontsize=7, clip_on=True)
            f = self.failing
            capacity = self.capacity.get(buffer)
            if f and (f.buffer, f.core) == (buffer, core):
                ax.add_patch(Rectangle((f.first, capacity or 0), f.last + 1 - f.first, f.bytes,
                                       facecolor=_FAILING_COLOUR, edgecolor="black", linestyle="--"))
                ax.axvline(f.first, color=_FAILING_COLOUR)
                ax.text(f.first + (f.last + 1 - f.first) / 2, (capacity or 0) + f.bytes / 2,
                        f"{f.name}: does not fit", ha="center", va="center", fontsize=8, clip_on=True)
                ax.set_title(self._title(), fontsize=9)
            if capacity is not None and capacity <= top:
                ax.axhline(capacity, color="black", linestyle="--", linewidth=0.8)
            ax.set_xlim(0, extent)
            ax.set_ylim(0, top)
            ax.set_ylabel(f"{buffer} byte offset")
            ax.set_xlabel("body instruction index")
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return path


def _svg_rect(box: tuple[float, float, float, float], fill: str, stroke: str, p: Placement,
              cls: str = "tensor", label: str = "") -> str:
    """One tensor's rectangle with its hover text, labelled (by default with its name) when there
    is room."""
    x, y, w, h = box
    label = label or p.name
    rect = (f'<rect class="{cls}" data-id="{p.id}" x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" '
            f'fill="{fill}" fill-opacity="0.85"{stroke}><title>{html.escape(p.describe())}</title></rect>')
    if w >= 7 * len(label) and h >= 13:
        rect += (f'<text x="{x + w / 2:.1f}" y="{y + h / 2 + 4:.1f}" text-anchor="middle" '
                 f'pointer-events="none">{html.escape(label)}</text>')
    return rect


def from_program(program: Any, target: str) -> MemoryMap:
    """The memory map of an engine program (EngineProgram.memory_map()) on `target`."""
    return MemoryMap(program.memory_map(), _capacity(target))


def from_capacity_error(e: Any) -> MemoryMap:
    """The memory map at a capacity error's failing point (the _core.KnitError's placements; the
    capacity known is the failing buffer's)."""
    return MemoryMap(e.placements, {e.failing["buffer"]: e.capacity}, e.failing, e.alive)


def _capacity(target: str) -> dict[str, int]:
    from . import _core
    info = _core.target_info(str(target))
    return {"sbuf": info["sbuf_partition_bytes"], "psum": info["psum_partition_bytes"]}
