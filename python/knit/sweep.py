"""knit.sweep: a kernel's simulated performance over a space of compile-time parameters and shapes.

    result = knit.sweep(blocked_mn, {"tiles_m": [1, 2, 4], "tiles_n": [1, 2]},
                        (nt.tensor[[1024, 1024], nl.bfloat16], nt.tensor[[1024, 2048], nl.bfloat16]),
                        target="trn1")
    print(result.table())          # ranked by simulated latency; failed configs last, with their error
    result.best().config           # {"tiles_m": 4, "tiles_n": 2}

Each configuration is traced, lowered and simulated (timing only, or functionally when `check`
needs the outputs); one that fails to trace, verify or allocate is a point with its error. The
points run in this process, on a local process pool or on Ray (knit/_sweep_exec.py) and are the
same whichever runs them. docs/sweep.md has it all.
"""
from __future__ import annotations

import ast
import contextlib
import csv
import dataclasses
import inspect
import io
import itertools
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from . import _sweep_exec, _sweep_run
from ._kernel import Kernel
from .isa import _TARGETS

PathLike = str | os.PathLike

# What a metric ranks points by: (SweepPoint attribute, whether larger is better).
METRICS = {"latency": ("latency_us", False), "mfu": ("mfu", True), "hfu": ("hfu", True),
           "dma_bytes": ("dma_bytes", False), "sbuf": ("sbuf_high_water", False),
           "instructions": ("instructions", False)}


@dataclasses.dataclass
class SweepPoint:
    """One configuration's result. latency_us: simulated end-to-end latency (the simulator is
    deterministic, so it is every percentile, p50 included); mfu / hfu: model and hardware FLOPs
    utilization (0..1); utilization: {queue: busy fraction}; dma_bytes; sbuf_high_water /
    psum_high_water: bytes per partition the allocation uses; instructions: executed (loops count
    every trip); compile_s / simulate_s: wall seconds of trace+lower and of the simulation;
    check: the functional check's verdict (None: no check). A failed point has error (one line:
    file:line, exception type, [rule], message), error_rule / error_file / error_line, and None
    for every measurement."""

    config: dict[str, Any]
    index: int = 0
    latency_us: float | None = None
    mfu: float | None = None
    hfu: float | None = None
    utilization: dict[str, float] = dataclasses.field(default_factory=dict)
    dma_bytes: int | None = None
    sbuf_high_water: int | None = None
    psum_high_water: int | None = None
    instructions: int | None = None
    compile_s: float = 0.0
    simulate_s: float = 0.0
    check: bool | None = None
    error: str | None = None
    error_rule: str | None = None
    error_file: str | None = None
    error_line: int | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def measured(self) -> dict[str, Any]:
        """Everything but the wall times: what the simulator decides, equal on every executor."""
        out = dataclasses.asdict(self)
        del out["compile_s"], out["simulate_s"]
        return out

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> SweepPoint:
        names = {f.name for f in dataclasses.fields(cls)}
        point = cls(**{k: v for k, v in record.items() if k in names})
        if point.error is not None:  # a failed check ran, but its numbers describe a wrong kernel
            for name in ("latency_us", "mfu", "hfu", "dma_bytes", "sbuf_high_water", "psum_high_water",
                         "instructions"):
                setattr(point, name, None)
            point.utilization = {}
        return point


# The CSV / DataFrame columns after the config's: SweepPoint's scalar fields, in order.
SCALAR_COLUMNS = ("latency_us", "mfu", "hfu", "dma_bytes", "sbuf_high_water", "psum_high_water", "instructions",
                  "compile_s", "simulate_s", "check", "error", "error_rule", "error_file", "error_line")
_INT_COLUMNS = {"dma_bytes", "sbuf_high_water", "psum_high_water", "instructions", "error_line", "index"}
_FLOAT_COLUMNS = {"latency_us", "mfu", "hfu", "compile_s", "simulate_s"}
_RESERVED = set(SCALAR_COLUMNS) | {"index"}
# to_json's layout (docs/cli.md): raised when a key is removed or renamed or changes meaning.
SCHEMA_VERSION = 1


class SweepResult:
    """The points of a sweep, in the order of the space. ``best()`` is the best point by the
    sweep's metric; ``ranked()`` all of them, failed ones last; ``table()`` a ranked text table;
    ``to_csv`` / ``to_json`` / ``from_csv`` / ``from_json`` / ``to_pandas`` / ``plot`` export."""

    def __init__(self, points: list[SweepPoint], kernel_name: str, target: str, metric: str = "latency",
                 executor: str = "", wall_s: float = 0.0) -> None:
        self.points = points
        self.kernel_name, self.target, self.metric = kernel_name, target, metric
        self.executor, self.wall_s = executor, wall_s

    @property
    def failures(self) -> list[SweepPoint]:
        return [p for p in self.points if not p.ok]

    def ranked(self) -> list[SweepPoint]:
        """Points that ran, best first by the metric (ties in space order), then the failed ones."""
        attr, larger_better = METRICS[self.metric]
        ok = sorted((p for p in self.points if p.ok),
                    key=lambda p: ((-1 if larger_better else 1) * getattr(p, attr), p.index))
        return ok + self.failures

    def best(self) -> SweepPoint:
        ranked = self.ranked()
        if not ranked or not ranked[0].ok:
            first = f"; the first error: {ranked[0].error}" if ranked else ""
            raise ValueError(f"knit.sweep of {self.kernel_name}: no configuration ran ({len(self.points)} "
                             f"points){first}")
        return ranked[0]

    def __repr__(self) -> str:
        return (f"SweepResult({self.kernel_name} on {self.target}: {len(self.points)} points, "
                f"{len(self.failures)} failed, {self.wall_s:.2f} s on {self.executor or 'unknown'})")

    # ---- tables and files --------------------------------------------------------------------

    def config_keys(self) -> list[str]:
        return list(dict.fromkeys(k for p in self.points for k in p.config))

    def _queues(self) -> list[str]:
        return list(dict.fromkeys(q for p in self.points for q in p.utilization))

    def rows(self) -> list[dict[str, Any]]:
        """One flat dict per point: index, the config keys, the scalar columns, util_<queue>."""
        keys, queues = self.config_keys(), self._queues()
        out = []
        for p in self.points:
            row: dict[str, Any] = {"index": p.index, **{k: p.config.get(k) for k in keys}}
            row.update({c: getattr(p, c) for c in SCALAR_COLUMNS})
            row.update({f"util_{q}": p.utilization.get(q) for q in queues})
            out.append(row)
        return out

    def to_csv(self, path: PathLike | None = None) -> str:
        """The points as CSV (one row each, config keys as columns); written to `path` when given.
        Returns the text."""
        rows = self.rows()
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else ["index"], lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: "" if v is None else v for k, v in r.items()} for r in rows)
        return _written(buf.getvalue(), path)

    def to_json(self, path: PathLike | None = None) -> str:
        """The sweep as JSON (schema_version, kernel, target, metric, executor, wall_s, points); written to
        `path` when given. Returns the text."""
        data = {"schema_version": SCHEMA_VERSION, "kernel": self.kernel_name, "target": self.target,
                "metric": self.metric, "executor": self.executor, "wall_s": self.wall_s,
                "points": [dataclasses.asdict(p) for p in self.points]}
        return _written(json.dumps(data, indent=1, default=repr), path)

    @classmethod
    def from_json(cls, source: PathLike) -> SweepResult:
        """A result read back from to_json's text or file."""
        data = json.loads(_read(source))
        points = [SweepPoint.from_record(p) for p in data["points"]]
        return cls(points, data["kernel"], data["target"], data["metric"], data.get("executor", ""),
                   data.get("wall_s", 0.0))

    @classmethod
    def from_csv(cls, source: PathLike, kernel_name: str = "", target: str = "",
                 metric: str = "latency") -> SweepResult:
        """A result read back from to_csv's text or file (config values are read as Python
        literals where they are one, else as strings)."""
        points = []
        for row in csv.DictReader(io.StringIO(_read(source))):
            record: dict[str, Any] = {"config": {}, "utilization": {}}
            for column, text in row.items():
                if column.startswith("util_"):
                    if text != "":
                        record["utilization"][column[5:]] = float(text)
                elif column in _RESERVED:
                    record[column] = _typed_cell(column, text)
                else:
                    record["config"][column] = _literal(text)
            points.append(SweepPoint.from_record(record))
        return cls(points, kernel_name, target, metric)

    def to_pandas(self) -> Any:
        """The rows as a pandas DataFrame (needs pandas: pip install pandas)."""
        try:
            import pandas
        except ImportError as e:
            raise ImportError("SweepResult.to_pandas needs pandas (pip install pandas); to_csv and to_json "
                              "work without it") from e
        return pandas.DataFrame(self.rows())

    def table(self, limit: int | None = None) -> str:
        """A text table, best first (the failed points last, with their errors); `limit` keeps
        the best that many rows."""
        return _report_table(self, limit)

    def plot(self, path: PathLike) -> PathLike:
        """Save a PNG: latency per configuration, and latency against SBUF use with its Pareto
        front (needs matplotlib: pip install matplotlib)."""
        from ._sweep_plot import plot
        return plot(self, path)


def _written(text: str, path: PathLike | None) -> str:
    if path is not None:
        with open(path, "w", newline="") as f:
            f.write(text)
    return text


def _read(source: PathLike) -> str:
    """The text of a file, or `source` itself when it is text already (starts like JSON / CSV)."""
    if isinstance(source, str) and ("\n" in source or source.lstrip().startswith("{")):
        return source
    with open(source, newline="") as f:
        return f.read()


def _literal(text: str) -> Any:
    if text == "":
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        return text


def _typed_cell(column: str, text: str) -> Any:
    if text == "":
        return None
    if column in _INT_COLUMNS:
        return int(text)
    if column in _FLOAT_COLUMNS:
        return float(text)
    if column == "check":
        return text == "True"
    return text


def _report_table(result: SweepResult, limit: int | None) -> str:
    keys = result.config_keys()
    header = ["rank", *keys, "latency us", "MFU %", "SBUF KiB", "PSUM KiB", "DMA MB", "instrs", "error"]
    rows = []
    for rank, p in enumerate(result.ranked()[:limit], 1):
        config = [_cell(p.config.get(k)) for k in keys]
        if p.ok:
            assert p.latency_us is not None and p.mfu is not None and p.sbuf_high_water is not None
            assert p.psum_high_water is not None and p.dma_bytes is not None
            rows.append([str(rank), *config, f"{p.latency_us:.2f}", f"{100 * p.mfu:.2f}",
                         f"{p.sbuf_high_water / 1024:.1f}", f"{p.psum_high_water / 1024:.1f}",
                         f"{p.dma_bytes / 1e6:.2f}", str(p.instructions), ""])
        else:
            rows.append(["-", *config, "-", "-", "-", "-", "-", "-", str(p.error)])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    lines = [f"knit sweep of {result.kernel_name} on {result.target}: {len(result.points)} points, "
             f"{len(result.failures)} failed, ranked by {result.metric}"]
    for r in [header, *rows]:
        lines.append("  ".join(c.rjust(w) for c, w in zip(r, widths)) + ("  " + r[-1] if r[-1] else ""))
    return "\n".join(lines)


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


# ---- the sweep ---------------------------------------------------------------------------------

Space = Mapping[str, Any] | Sequence[Mapping[str, Any]]
Inputs = Sequence[Any] | Callable[[dict[str, Any]], Sequence[Any]]


def expand(space: Space) -> list[dict[str, Any]]:
    """The configurations of a space: a dict of lists is a grid (the cartesian product, the last
    key varying fastest; a value that is not a list/tuple/range is one fixed value), a list of
    dicts is those configurations in order."""
    if isinstance(space, Mapping):
        keys = list(space)
        values = [list(v) if isinstance(v, (list, tuple, range)) else [v] for v in space.values()]
        configs = [dict(zip(keys, combo)) for combo in itertools.product(*values)]
    elif isinstance(space, Iterable) and not isinstance(space, (str, bytes)):
        configs = [dict(c) if isinstance(c, Mapping) else _bad_space(c) for c in space]
    else:
        configs = _bad_space(space)
    for config in configs:
        bad = [k for k in config if not isinstance(k, str) or not k.isidentifier() or k in _RESERVED]
        if bad:
            raise ValueError(f"knit.sweep: config key(s) {bad} must be identifiers (a kernel's parameter names or "
                             f"shape names) other than the result columns {sorted(_RESERVED)}")
    return configs


def _bad_space(value: Any) -> Any:
    raise TypeError(f"knit.sweep: space must be a dict of lists (a grid) or a list of dicts, not {value!r}")


def config_key(config: Mapping[str, Any]) -> str:
    """A configuration's identity in a resume file."""
    return json.dumps(config, sort_keys=True, default=repr)


def _kernel_keys(kernel: Kernel, configs: list[dict[str, Any]], inputs: Inputs) -> set[str] | None:
    """The config keys passed to the kernel: those naming one of its parameters (all of them when
    it takes **kwargs: None). The other keys are for inputs(config) only, so they need an inputs
    function; without one, an unknown key is a mistake (a misspelt tunable would sweep nothing)."""
    params = inspect.signature(kernel.fn).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    names = {p.name for p in params if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                 inspect.Parameter.KEYWORD_ONLY)}
    unknown = sorted({k for c in configs for k in c} - names)
    if unknown and not callable(inputs):
        raise TypeError(f"knit.sweep: kernel {kernel.fn.__name__} has no parameter {', '.join(unknown)}; the space's "
                        f"keys are its keyword parameters, or shape names read by an inputs(config) function")
    return names


def _inputs_for(inputs: Inputs, config: dict[str, Any]) -> tuple:
    args = inputs(dict(config)) if callable(inputs) else inputs
    return tuple(args) if isinstance(args, (tuple, list)) else (args,)


def sweep(kernel: Callable[..., Any], space: Space, inputs: Inputs, *, target: str = "trn2",
          metric: str = "latency", check: Callable[[Any, tuple], Any] | None = None, executor: Any = None,
          resume: PathLike | None = None) -> SweepResult:
    """Simulate `kernel` for every configuration of `space` on `target` and return the points.

    space: a dict of lists (a grid) or a list of dicts. A config's keys that name parameters of
    the kernel are passed to it as keywords; the others (shape names, say) only reach `inputs`.
    inputs: the kernel's positional arguments (arrays or nt.tensor placeholders), or a function
    inputs(config) -> tuple of them. check(outputs, inputs) -> bool (or raises): with real
    arrays, each point also runs functionally and a False / raised check fails the point.
    metric: what best() and ranked() order by ("latency", "mfu", "hfu", "dma_bytes", "sbuf",
    "instructions"). executor: None (in this process for fewer than 4 points, else a local
    process pool; Ray when KNIT_RAY_ADDRESS is set), "inline", "process", "ray", or a
    concurrent.futures.Executor. resume: a JSON-lines file the points are appended to as they
    finish; a new sweep with the same file skips the configs already there."""
    _sweep_run.refuse_nested_sweep()
    started = time.perf_counter()
    k = kernel if isinstance(kernel, Kernel) else Kernel(kernel)
    target = _TARGETS.get(str(target).lower(), str(target))
    if metric not in METRICS:
        raise ValueError(f"knit.sweep: metric={metric!r}: use one of {', '.join(METRICS)}")
    configs = expand(space)
    passed = _kernel_keys(k, configs, inputs)
    log = _ResumeLog(resume, k.fn.__name__, target)
    found: dict[int, SweepPoint] = {}
    units = []
    for i, config in enumerate(configs):
        if config_key(config) in log.done:
            found[i] = SweepPoint.from_record({**log.done[config_key(config)], "index": i, "config": config})
            continue
        try:
            args = _inputs_for(inputs, config)
        except Exception as e:  # a shape the inputs function rejects is that point's error
            found[i] = SweepPoint(config=config, index=i, **_sweep_run.error_fields(e, "inputs(config) failed"))
            continue
        units.append((i, config, args, {n: v for n, v in config.items() if passed is None or n in passed}))
    chosen = _sweep_exec.choose(executor, len(units))
    work = _sweep_exec.chunks(units, _sweep_exec.workers_of(chosen) if units else 1)
    progress = _Progress(len(units))

    def deliver(records: list[dict[str, Any]]) -> None:
        for record in records:
            found[record["index"]] = SweepPoint.from_record(record)
        log.append(records)
        progress.update(records)

    with progress.quiet_simulations():
        try:
            ran_on = _sweep_exec.run(chosen, k, target, check, work, deliver, named=executor is not None)
        finally:
            progress.close()
    return SweepResult([found[i] for i in range(len(configs))], k.fn.__name__, target, metric,
                       ran_on if units else "resume", time.perf_counter() - started)


class _ResumeLog:
    """The resume file: one JSON record per finished point (with its kernel, target and config
    key), appended a chunk at a time. Points lost to a dying worker are not taken as done."""

    def __init__(self, path: PathLike | None, kernel_name: str, target: str) -> None:
        self.path, self.kernel_name, self.target = path, kernel_name, target
        self.done: dict[str, dict[str, Any]] = {}
        self.broken_end = False  # the file ends in half a line: the next record starts a new one
        if path is None or not os.path.exists(path):
            return
        with open(path) as f:
            text = f.read()
        self.broken_end = bool(text) and not text.endswith("\n")
        for line in text.splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:  # the last line of a sweep killed mid-write
                continue
            if (record.get("kernel"), record.get("target")) == (kernel_name, target) and \
                    record.get("error_rule") != _sweep_run.WORKER_DIED:
                self.done[record["key"]] = record

    def append(self, records: list[dict[str, Any]]) -> None:
        if self.path is None:
            return
        lines = [json.dumps({"kernel": self.kernel_name, "target": self.target, "key": config_key(r["config"]), **r},
                            default=repr) + "\n" for r in records]
        with open(self.path, "a") as f:
            f.write("\n" * self.broken_end + "".join(lines))
        self.broken_end = False


class _Progress:
    """A tqdm bar on stderr (points done, failures, ETA) when tqdm is installed, stderr is a
    terminal and KNIT_PROGRESS is not 0; nothing otherwise."""

    def __init__(self, total: int) -> None:
        self.bar: Any = None
        self.failures = 0
        if not total or os.environ.get("KNIT_PROGRESS", "1") == "0" or not sys.stderr.isatty():
            return
        try:
            from tqdm import tqdm
        except ImportError:
            return
        self.bar = tqdm(total=total, desc="knit sweep", unit="point", file=sys.stderr, dynamic_ncols=True)

    def update(self, records: list[dict[str, Any]]) -> None:
        if self.bar is not None:
            self.failures += sum(r.get("error") is not None for r in records)
            self.bar.set_postfix(failed=self.failures, refresh=False)
            self.bar.update(len(records))

    @contextlib.contextmanager
    def quiet_simulations(self) -> Iterator[None]:
        """While the bar shows, a long simulation's own progress line (KNIT_PROGRESS) stays off."""
        if self.bar is None:
            yield
            return
        before = os.environ.get("KNIT_PROGRESS")
        os.environ["KNIT_PROGRESS"] = "0"
        try:
            yield
        finally:
            if before is None:
                del os.environ["KNIT_PROGRESS"]
            else:
                os.environ["KNIT_PROGRESS"] = before

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
