"""SweepResult.plot: latency per configuration, and latency against SBUF use with the Pareto front
(the configurations no other one beats on both)."""
from __future__ import annotations

import os
from typing import Any

from ._pyplot import pyplot


def pareto_front(points: list[Any]) -> list[Any]:
    """The points that ran and that no other point beats on both SBUF high-water and latency,
    by increasing SBUF use (so by decreasing latency)."""
    front: list[Any] = []
    for p in sorted((p for p in points if p.ok), key=lambda p: (p.sbuf_high_water, p.latency_us)):
        if not front or p.latency_us < front[-1].latency_us:
            front.append(p)
    return front


def _label(config: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in config.items())


def plot(result: Any, path: str | os.PathLike) -> str | os.PathLike:
    plt = pyplot("SweepResult.plot", "to_csv, to_json and table work")
    ok = [p for p in result.points if p.ok]
    fig, (bars, scatter) = plt.subplots(1, 2, figsize=(max(8.0, 4 + 0.3 * len(result.points)), 5))
    labels = [_label(p.config) for p in result.points]
    bars.bar(range(len(result.points)), [p.latency_us if p.ok else 0 for p in result.points],
             color=["C0" if p.ok else "C3" for p in result.points])
    bars.set_xticks(range(len(result.points)))
    bars.set_xticklabels(labels, rotation=90, fontsize=7)
    bars.set_ylabel("simulated latency (us)")
    failed = len(result.points) - len(ok)
    bars.set_title(f"{result.kernel_name} on {result.target}" + (f" ({failed} failed, red)" if failed else ""))
    scatter.scatter([p.sbuf_high_water / 1024 for p in ok], [p.latency_us for p in ok], color="C0", label="config")
    front = pareto_front(result.points)
    scatter.plot([p.sbuf_high_water / 1024 for p in front], [p.latency_us for p in front], "o-", color="C1",
                 label="Pareto front")
    for p in front:
        scatter.annotate(_label(p.config), (p.sbuf_high_water / 1024, p.latency_us), fontsize=7)
    scatter.set_xlabel("SBUF high-water (KiB per partition)")
    scatter.set_ylabel("simulated latency (us)")
    scatter.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
