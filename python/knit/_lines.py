"""Profile.by_line(): the simulated timeline folded onto the kernel's source lines (docs/profiling.md).

Every executed instruction carries its body index, and the program's source table maps that to
the (file, line) the tracer recorded, so the busy time, waits and DMA bytes of each instruction
add up per line. The critical path walks the timeline back from the instruction that finishes
last, each step to the instruction that set its start (the producer whose semaphore it waited
for, the previous instruction of its queue, the DMA transfer whose data it queued behind).
"""
from __future__ import annotations

import bisect
import json
import linecache
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from . import _annotate

SCHEMA_VERSION = 1
NO_SOURCE = ("(no source)", 0)  # instructions the compiler added without a kernel line
_DMA_PREFIX = "dma"

# One timeline row as Profile._timeline gives it.
Row = tuple[int, int, int, float, float, float, float, int, int, int]


@dataclass
class LineStats:
    """What one source line's instructions did in the run.

    instructions: executed instructions (every trip of a loop counts), per queue in
    queue_instructions; sites: distinct instructions in the program; trips: how many times the
    line ran (see _calls); busy_ns: {queue: engine time}; wait_ns: {queue waited for: time};
    dma_bytes: bytes its DMA moved; opcodes: {opcode: executed}; share: its busy time over all
    lines' busy time; path_ns: its time on the critical path."""

    file: str
    line: int
    instructions: int = 0
    queue_instructions: dict[str, int] = field(default_factory=dict)
    sites: int = 0
    trips: int = 0
    busy_ns: dict[str, float] = field(default_factory=dict)
    wait_ns: dict[str, float] = field(default_factory=dict)
    dma_bytes: int = 0
    opcodes: dict[str, int] = field(default_factory=dict)
    share: float = 0.0
    path_ns: float = 0.0

    @property
    def total_ns(self) -> float:
        return sum(self.busy_ns.values())

    @property
    def total_wait_ns(self) -> float:
        return sum(self.wait_ns.values())

    @property
    def engine(self) -> str:
        """The engine this line kept busiest: pe, act, dve, pool, or dma for the DMA queues
        together ('' when it has no busy time)."""
        by_engine: dict[str, float] = defaultdict(float)
        for q, ns in self.busy_ns.items():
            by_engine[_DMA_PREFIX if q.startswith(_DMA_PREFIX) else q] += ns
        return max(by_engine, key=lambda e: by_engine[e]) if by_engine else ""

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def source(self) -> str:
        """The line's text, stripped ('' when the file cannot be read)."""
        return linecache.getline(self.file, self.line).strip()

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "source": self.source, "instructions": self.instructions,
                "queue_instructions": self.queue_instructions, "sites": self.sites,
                "trips": self.trips, "busy_ns": self.busy_ns, "total_busy_ns": self.total_ns,
                "share": self.share, "wait_ns": self.wait_ns, "total_wait_ns": self.total_wait_ns,
                "dma_bytes": self.dma_bytes, "engine": self.engine, "opcodes": self.opcodes,
                "critical_path_ns": self.path_ns}


@dataclass
class PathLine:
    """One source line's part of the critical path: ns on it (busy_ns of that its instructions'
    own engine or transfer time, the rest waiting for a semaphore, a DMA's fixed cost or the
    bandwidth) over `instructions` steps."""

    file: str
    line: int
    ns: float = 0.0
    busy_ns: float = 0.0
    instructions: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "ns": self.ns, "busy_ns": self.busy_ns,
                "instructions": self.instructions}


@dataclass
class CriticalPath:
    """The chain of instructions that bound the latency, last to finish back to the first.

    total_ns: the time the chain covers (= end_ns: each step is credited from its predecessor's
    end to its own end); tail_ns: what the run lasted after it (the last result's pipeline
    latency and the final barrier; total_ns + tail_ns + launch overhead = the latency);
    lines: a PathLine per line, in the order the path first reaches them; steps: the path as
    consecutive runs on one line."""

    total_ns: float
    tail_ns: float
    instructions: int
    lines: list[PathLine]
    steps: list[tuple[str, int, float]]  # (file, line, ns)

    def to_json(self) -> dict[str, Any]:
        return {"total_ns": self.total_ns, "tail_ns": self.tail_ns, "instructions": self.instructions,
                "lines": [p.to_json() for p in self.lines],
                "steps": [{"file": f, "line": n, "ns": ns} for f, n, ns in self.steps]}


class LineProfile:
    """A Profile folded onto source lines: ``rows`` (hottest first), ``critical_path``,
    ``annotate()`` (the source with a gutter of figures), ``to_json()``; str() is a ranked table."""

    def __init__(self, kernel_name: str, target: str, total_ns: float, launch_ns: float,
                 lines: dict[tuple[str, int], LineStats], path: CriticalPath):
        self.kernel_name = kernel_name
        self.target = target
        self.total_ns = total_ns
        self.launch_ns = launch_ns
        self.lines = lines
        self.critical_path = path
        self.busy_ns = sum(s.total_ns for s in lines.values())

    @property
    def rows(self) -> list[LineStats]:
        """The lines, most busy time first (ties: most waiting, then file order)."""
        return sorted(self.lines.values(), key=lambda s: (-s.total_ns, -s.total_wait_ns, s.file, s.line))

    def line(self, file_suffix: str, line: int) -> LineStats:
        """The stats of `line` in the file whose path ends with file_suffix."""
        for (file, n), stats in self.lines.items():
            if n == line and file.endswith(file_suffix):
                return stats
        raise KeyError(f"no instruction comes from {file_suffix}:{line}")

    def to_json(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "kernel": self.kernel_name, "target": self.target,
                "total_ns": self.total_ns, "launch_ns": self.launch_ns, "busy_ns": self.busy_ns,
                "critical_path": self.critical_path.to_json(), "lines": [s.to_json() for s in self.rows]}

    def json(self) -> str:
        return json.dumps(self.to_json(), indent=2)

    def annotate(self, top: int = 3) -> str:
        """The source of the functions the instructions come from, each line with its figures."""
        return _annotate.annotate(self, top)

    def __str__(self) -> str:
        return _annotate.ranked_table(self)

    def __repr__(self) -> str:
        return str(self)


def build(kernel_name: str, target: str, total_ns: float, launch_ns: float, queues: Sequence[str],
          timeline: Sequence[Row], source: Sequence[tuple[str, str, int]]) -> LineProfile:
    """Fold `timeline` (Profile._timeline rows) onto the lines of `source` (Program.source)."""
    where = [(f, n) if n > 0 else NO_SOURCE for _, f, n in source]
    lines: dict[tuple[str, int], LineStats] = {}

    def stats(ir: int) -> LineStats:
        key = where[ir]
        if key not in lines:
            lines[key] = LineStats(*key)
        return lines[key]

    sites: dict[tuple[str, int], set[int]] = defaultdict(set)
    opcodes: dict[tuple[str, int], Counter[str]] = defaultdict(Counter)
    for core, ir, q, start, end, issue, stall, on, waited, nbytes in timeline:
        s = stats(ir)
        s.instructions += 1
        s.queue_instructions[queues[q]] = s.queue_instructions.get(queues[q], 0) + 1
        s.busy_ns[queues[q]] = s.busy_ns.get(queues[q], 0.0) + (end - start)
        if stall > 0 and on >= 0:
            s.wait_ns[queues[on]] = s.wait_ns.get(queues[on], 0.0) + stall
        s.dma_bytes += nbytes
        sites[where[ir]].add(ir)
        opcodes[where[ir]][source[ir][0]] += 1
    calls = _calls(source, where)
    for key, s in lines.items():
        s.sites = len(sites[key])
        s.trips = round(calls[key] * s.instructions / s.sites)  # times the runs the program repeats
        s.opcodes = dict(opcodes[key].most_common())
    busy = sum(s.total_ns for s in lines.values())
    for s in lines.values():
        s.share = s.total_ns / busy if busy else 0.0
    path = critical_path(timeline, queues, where, total_ns - launch_ns)
    for p in path.lines:
        lines[(p.file, p.line)].path_ns = p.ns
    return LineProfile(kernel_name, target, total_ns, launch_ns, lines, path)


def _calls(source: Sequence[tuple[str, str, int]], where: Sequence[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """Per line, how many times the tracer ran it. A loop's body is written out once per trip
    (rolled loops too, in C++), so a line that ran n times leaves its opcodes n times over: the
    count is how often the shortest repeating unit of its opcode sequence repeats. (A call that
    makes several instructions of one opcode counts each as a run: nothing in the program marks
    where one call ends.)"""
    sequences: dict[tuple[str, int], list[str]] = defaultdict(list)
    for (opcode, _, _), key in zip(source, where):
        sequences[key].append(opcode)
    return {key: len(seq) // _period(seq) for key, seq in sequences.items()}


def _period(seq: Sequence[str]) -> int:
    """The length of the shortest prefix that, repeated, makes seq."""
    n = len(seq)
    for p in range(1, n + 1):
        if n % p == 0 and all(seq[i] == seq[i % p] for i in range(n)):
            return p
    return n


def critical_path(timeline: Sequence[Row], queues: Sequence[str], where: Sequence[tuple[str, int]],
                  run_ns: float) -> CriticalPath:
    """Walk back from the last instruction to finish; each step is credited from the end of the
    instruction that set its start to its own end, so the steps add up to the last end exactly."""
    if not timeline:
        return CriticalPath(0.0, run_ns, 0, [], [])
    chain = _chain(timeline, queues)
    per_line: dict[tuple[str, int], PathLine] = {}
    steps: list[tuple[str, int, float]] = []
    for row, since in reversed(chain):
        key = where[timeline[row][1]]
        ns = timeline[row][4] - since
        on_line = per_line.setdefault(key, PathLine(*key))
        on_line.ns += ns
        on_line.busy_ns += timeline[row][4] - timeline[row][3]
        on_line.instructions += 1
        if steps and steps[-1][:2] == key:
            steps[-1] = (*key, steps[-1][2] + ns)
        else:
            steps.append((*key, ns))
    end = timeline[chain[0][0]][4]
    return CriticalPath(end, run_ns - end, len(chain), list(per_line.values()), steps)


def _chain(timeline: Sequence[Row], queues: Sequence[str]) -> list[tuple[int, float]]:
    """[(row, time its step starts from)], last instruction first."""
    is_dma = [q.startswith(_DMA_PREFIX) for q in queues]
    previous_on_queue = [-1] * len(timeline)
    last: dict[tuple[int, int], int] = {}
    for i, r in enumerate(timeline):
        previous_on_queue[i] = last.get((r[0], r[2]), -1)
        last[(r[0], r[2])] = i
    ends = _Ends(timeline, is_dma)
    current = max(range(len(timeline)), key=lambda i: (timeline[i][4], i))
    chain: list[tuple[int, float]] = []
    # Each step goes to an earlier row or, past a barrier, to one not on the path yet; a row seen
    # again (only possible through instructions of zero duration) ends the walk.
    seen: set[int] = set()
    while current >= 0 and current not in seen:
        seen.add(current)
        before = _predecessor(timeline, current, previous_on_queue[current], is_dma, ends, seen)
        chain.append((current, timeline[before][4] if before >= 0 else 0.0))
        current = before
    return chain


def _predecessor(timeline: Sequence[Row], i: int, previous: int, is_dma: Sequence[bool], ends: _Ends,
                 seen: set[int]) -> int:
    """The row whose end set row i's start (-1: none, the run's start). The wait's producer, the
    previous row of the queue and the transfer queued behind all come earlier in the timeline."""
    core, _, q, start, _, issue, stall, _, waited, _ = timeline[i]
    if is_dma[q]:
        # Data moves once the queue issued the transfer (plus a fixed cost) and the bandwidth is
        # free: a transfer that ended exactly when this one's data started held the bandwidth.
        behind = ends.dma_ending_at(core, start, i)
        if behind >= 0:
            return behind
        if stall > 0 and waited >= 0:
            return waited
        if previous >= 0 and timeline[previous][3] == issue:
            return previous  # the queue issues its next transfer when the previous one's data starts
        return ends.behind_barrier(core, issue, seen)
    if stall > 0 and waited >= 0:
        return waited
    if previous >= 0 and timeline[previous][4] == start:
        return previous
    # Neither a wait nor its queue: a barrier drained every queue first.
    return ends.behind_barrier(core, start, seen)


class _Ends:
    """The rows of each core by end time (for the DMA transfer a start queued behind, and for what
    a barrier waited for)."""

    def __init__(self, timeline: Sequence[Row], is_dma: Sequence[bool]):
        self._timeline = timeline
        by_core: dict[int, list[tuple[float, int]]] = defaultdict(list)
        dma_by_end: dict[tuple[int, float], int] = {}
        for i, r in enumerate(timeline):
            by_core[r[0]].append((r[4], i))
            if is_dma[r[2]]:
                dma_by_end.setdefault((r[0], r[4]), i)
        self._by_core = {c: sorted(v) for c, v in by_core.items()}
        self._all = sorted(e for v in by_core.values() for e in v)
        self._dma_by_end = dma_by_end

    def dma_ending_at(self, core: int, t: float, before: int) -> int:
        """The first DMA row before row `before` that ended at exactly t (-1: none)."""
        row = self._dma_by_end.get((core, t), -1)
        return row if row < before else -1

    def behind_barrier(self, core: int, t: float, exclude: set[int]) -> int:
        """What a barrier released at t waited for: the core's latest instruction to end by t,
        else (a core that had run nothing yet, held by a core barrier) any core's; rows in
        `exclude` (the path so far) do not count."""
        row = self._latest_before(self._by_core[core], t, exclude)
        return row if row >= 0 else self._latest_before(self._all, t, exclude)

    def _latest_before(self, ends: list[tuple[float, int]], t: float, exclude: set[int]) -> int:
        k = bisect.bisect_right(ends, (t, len(self._timeline)))
        while k > 0:
            k -= 1
            if ends[k][1] not in exclude:
                return ends[k][1]
        return -1
