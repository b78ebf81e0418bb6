"""Multi-rank launches: ``knit.simulate(kernel, ranks=N)(*args)`` runs one kernel on N ranks in
this process, each with its own HBM, SBUF and PSUM, meeting at nki.collectives calls.

The kernel is traced once per rank into one IR kernel: rank r's instructions follow a
``program id=r`` marker and use rank r's own parameter tensors (named ``<param>_rank<r>``), so
the machine runs the ranks as cores that interleave only at collectives (docs/collectives.md).
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _trace
from ._kernel import (
    Compiled,
    Kernel,
    _as_positional,
    _is_array,
    _precise_fp,
    add_params,
    call_key,
    default_backend,
    simulate as _simulate_one,
)
from ._tensor import NkiTensor
from .errors import user_error
from .typing import TensorType


def _is_tensor(x: Any) -> bool:
    return _is_array(x) or isinstance(x, TensorType)


class RankedKernel:
    """A kernel launched on `ranks` ranks. Call it with, for each tensor argument, a list of one
    array per rank, or one array that every rank gets a copy of (with ``rank_dim=True``: an array
    whose leading dimension indexes the ranks). Returns one result per rank (a list), or with
    ``rank_dim=True`` the results stacked along a new leading dimension."""

    def __init__(self, kernel: Kernel, ranks: int, rank_dim: bool = False, lnc: int | None = None):
        if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
            raise ValueError(f"ranks must be a positive int, got {ranks!r}")
        if lnc not in (None, 1, 2):
            raise ValueError(f"lnc (physical cores per rank) must be 1 or 2, got {lnc!r}")
        if kernel.grid:
            raise ValueError("a multi-rank launch of an LNC grid (kernel[2]) is not supported; launch the kernel "
                             "without a grid")
        self.kernel = kernel
        self.ranks = ranks
        self.rank_dim = rank_dim
        self.lnc = lnc
        self._cache: dict = {}

    def per_rank(self, args: Sequence[Any], kwargs: dict) -> list[tuple[list, dict]]:
        """Each rank's (args, kwargs): per-rank lists split, other values shared."""
        def pick(value: Any, r: int, what: str) -> Any:
            if self.rank_dim and _is_array(value):
                if len(value) != self.ranks:
                    raise ValueError(f"{what}: with rank_dim=True its leading dimension ({len(value)}) must be the "
                                     f"number of ranks ({self.ranks})")
                return value[r]
            if isinstance(value, (list, tuple)) and value and all(_is_tensor(v) for v in value):
                if len(value) != self.ranks:
                    raise ValueError(f"{what}: a list of {len(value)} arrays for {self.ranks} ranks; pass one per "
                                     "rank, or a single array for every rank")
                return value[r]
            return value
        out = []
        for r in range(self.ranks):
            rank_args = [pick(a, r, f"argument {i}") for i, a in enumerate(args)]
            rank_kwargs = {k: pick(v, r, f"argument '{k}'") for k, v in kwargs.items()}
            out.append(_as_positional(self.kernel.fn, rank_args, rank_kwargs))
        return out

    def compile(self, *args: Any, target: str | None = None, **kwargs: Any) -> RankedCompiled:
        per_rank = self.per_rank(args, kwargs)
        target = self.kernel.resolve_target(target)
        key = (target, _precise_fp(), tuple(call_key(ra, rk) for ra, rk in per_rank))
        if key not in self._cache:
            if self.lnc == 2 and target == "trn1":
                raise ValueError("lnc=2 needs trn2 or trn3: a trn1 rank is one NeuronCore")
            self._cache[key] = _trace_ranks(self.kernel, per_rank, target)
            self._cache[key].lnc = self.lnc or 0
        return self._cache[key]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        compiled = self.compile(*args, **kwargs)
        results = compiled.run_ranks(self.per_rank(args, kwargs))
        if self.rank_dim and results and results[0] is not None:
            if isinstance(results[0], tuple):
                return tuple(np.stack([r[k] for r in results]) for k in range(len(results[0])))
            return np.stack(results)
        return results


class RankedCompiled(Compiled):
    """The traced multi-rank kernel: .ir shows every rank's instructions after its program marker."""

    ranks = 1
    outputs_per_rank = 0
    single_per_rank = False
    lnc = 0  # physical cores per rank for the collective cost model (0: the target's default)

    def run_ranks(self, per_rank: list[tuple[list, dict]], *world: Any) -> list[Any]:
        """Runs the traced ranks on their arguments; one result per rank. `world` (rank, ranks,
        transport) makes the run one rank of a job in several processes (knit/_distributed.py)."""
        hosts, originals, any_torch = Kernel._hosts(self, flat_args(per_rank))
        uninitialized = os.environ.get("KNIT_UNINITIALIZED", "")
        outs, after, warnings, *counts = _trace.core_call(self.program.run, hosts, uninitialized, "round_robin", 0,
                                                          True, default_backend(), *world)
        self.last_run = counts[0] if counts else None
        return self.group_by_rank(Kernel._results(self, outs, after, warnings, originals, any_torch))

    def group_by_rank(self, results: Any) -> list[Any]:
        """The kernel's flat results (every rank's, rank after rank) as one result per rank."""
        if results is None:
            return [None] * self.ranks
        results = results if isinstance(results, tuple) else (results,)
        n = self.outputs_per_rank
        grouped = [results[r * n:(r + 1) * n] for r in range(self.ranks)]
        return [g[0] if self.single_per_rank else tuple(g) for g in grouped]


def flat_args(per_rank: list[tuple[list, dict]]) -> list[Any]:
    """Every rank's positional arguments, rank after rank (the compiled kernel's parameters)."""
    return [a for args, _ in per_rank for a in args]


def _trace_ranks(kernel: Kernel, per_rank: list[tuple[list, dict]], target: str, first_rank: int = 0,
                 num_ranks: int | None = None) -> RankedCompiled:
    """Traces ranks first_rank .. first_rank + len(per_rank) - 1 of num_ranks (default: these)."""
    fn = kernel.fn
    code = fn.__code__
    loc = (code.co_filename, code.co_firstlineno, 0)
    trace = _trace.Trace(fn.__name__, target)
    trace.num_ranks = num_ranks or len(per_rank)
    positions: list[int] = []
    outputs: list[int] = []
    shapes: list[Any] = []
    single, per_rank_outputs = False, None
    with _trace.tracing(trace):
        calls = []
        base = 0
        for r, (args, kwargs) in enumerate(per_rank):
            call_args, tensor_positions = add_params(trace, fn, args, loc, f"_rank{first_rank + r}", base)
            positions += tensor_positions
            calls.append((call_args, kwargs))
            base += len(args)
        for r, (call_args, kwargs) in enumerate(calls):
            trace.rank = first_rank + r
            trace.shared_created = 0
            if len(calls) > 1:
                _trace.core_call(trace.builder.append, "program", {"id": r}, loc, "")
            results = fn(*call_args, **kwargs)
            ids = Kernel._output_ids(results, loc)
            if per_rank_outputs is None:
                per_rank_outputs = len(ids)
                single = isinstance(results, NkiTensor)
            elif len(ids) != per_rank_outputs:
                raise user_error("kernel-output", f"rank {r} returns {len(ids)} tensors but rank 0 returned "
                                 f"{per_rank_outputs}; every rank must return the same outputs", loc)
            outputs += ids
            shapes += Kernel._returned_shapes(results)
        _trace.core_call(trace.builder.set_outputs, outputs + [tid for _, tid in trace.prints],
                         kernel._outputs_may_be_private_hbm)
        core_kernel = _trace.core_call(trace.builder.finish)
    compiled = RankedCompiled(kernel, core_kernel, trace, positions, target, len(outputs), False, shapes)
    compiled.ranks = len(per_rank)
    compiled.outputs_per_rank = per_rank_outputs or 0
    compiled.single_per_rank = single
    return compiled



def simulate(kernel: Any, ranks: int | None = None, rank_dim: bool = False, lnc: int | None = None) -> Any:
    """knit.simulate(kernel)(*args): run on the CPU simulator (a plain function is wrapped); the
    result is the kernel itself, so ``knit.simulate(kernel)[2](...)`` launches an LNC2 grid. With
    ``ranks=N`` the kernel runs on N ranks that meet at nki.collectives calls: per-rank inputs as
    lists of N arrays (or, with rank_dim=True, a leading rank dimension), one result per rank.
    ``lnc`` (1 or 2) sets how many physical cores make a rank for the timing model's topology
    (default: 1 on trn1, 2 on trn2 and trn3, so 4 ranks per trn2 chip; lnc=1 gives 8)."""
    k = _simulate_one(kernel)
    return k if ranks is None else RankedKernel(k, ranks, rank_dim, lnc)
