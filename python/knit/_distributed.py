"""Multi-rank kernels in a torch.distributed job: ``knit.distributed(kernel)(*args)`` in each
process runs this process's rank of the kernel, and its collectives exchange their operands with
the other processes over torch.distributed (any backend; gloo on CPU).

Each collective is one ``all_gather_object`` over the process group, from which every rank takes
its replica group's operands and computes what it receives with the same code as an in-process
run, so both give the same bytes (docs/collectives.md). Every rank therefore has to issue the
same number of collectives.
"""
from __future__ import annotations

import os
from typing import Any

from . import _trace
from ._kernel import Kernel, _as_positional, default_backend
from ._ranks import RankedCompiled, _trace_ranks
from .isa import _TARGETS, target_from_env


class DistributedKernel:
    """A kernel run as this process's rank of a torch.distributed process group."""

    def __init__(self, kernel: Kernel, group: Any = None):
        self.kernel = kernel
        self.group = group
        self._cache: dict = {}

    def _world(self) -> tuple[int, int]:
        import torch.distributed as dist
        if not dist.is_initialized():
            raise RuntimeError("knit.distributed needs torch.distributed initialized (dist.init_process_group, "
                               "e.g. under torchrun); for ranks in one process use knit.simulate(kernel, ranks=N)")
        return dist.get_rank(self.group), dist.get_world_size(self.group)

    def compile(self, *args: Any, target: str | None = None, **kwargs: Any) -> RankedCompiled:
        from ._kernel import _arg_key
        rank, world = self._world()
        args, kwargs = _as_positional(self.kernel.fn, list(args), kwargs)
        target = target or self.kernel.options.get("platform_target") or target_from_env()
        target = _TARGETS.get(str(target).lower(), target)
        key = (target, rank, world, tuple(_arg_key(a) for a in args),
               tuple(sorted((k, _arg_key(v)) for k, v in kwargs.items())))
        if key not in self._cache:
            self._cache[key] = _trace_ranks(self.kernel, [(list(args), kwargs)], target, first_rank=rank,
                                           num_ranks=world)
        return self._cache[key]

    def _transport(self, members: list[int], mine: dict) -> list[dict]:
        import torch.distributed as dist
        rank, world = self._world()
        gathered: list[Any] = [None] * world
        dist.all_gather_object(gathered, mine, group=self.group)
        return [gathered[m] for m in members]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        compiled = self.compile(*args, **kwargs)
        rank, world = self._world()
        args, kwargs = _as_positional(self.kernel.fn, list(args), kwargs)
        hosts, originals, any_torch = Kernel._hosts(compiled, args)
        uninitialized = os.environ.get("KNIT_UNINITIALIZED", "")
        outs, after, warnings, *counts = _trace.core_call(
            compiled.program.run, hosts, uninitialized, "round_robin", 0, True, default_backend(), rank, world,
            self._transport)
        compiled.last_run = counts[0] if counts else None
        return compiled.group_by_rank(Kernel._results(compiled, outs, after, warnings, originals, any_torch))[0]


def distributed(kernel: Any, group: Any = None) -> DistributedKernel:
    """knit.distributed(kernel)(*args): this process's rank of `kernel` in the torch.distributed
    process group `group` (default: the world); returns this rank's result."""
    return DistributedKernel(kernel if isinstance(kernel, Kernel) else Kernel(kernel), group)
