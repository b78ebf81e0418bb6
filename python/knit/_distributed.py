"""Multi-rank kernels in a torch.distributed job: ``knit.distributed(kernel)(*args)`` in each
process runs this process's rank of the kernel, and its collectives exchange their operands with
the other processes over torch.distributed (any backend; gloo on CPU).

Each collective is one ``all_gather_object`` over the process group, from which every rank takes
its replica group's operands and computes what it receives with the same code as an in-process
run, so both give the same bytes (docs/collectives.md). Every rank therefore has to issue the
same number of collectives. A run ends with one more gather that says the rank finished (or
failed): a rank still waiting at a collective then meets it and raises, instead of waiting
forever, and so does a rank whose group called different collectives.
"""
from __future__ import annotations

from typing import Any

from ._kernel import Kernel, _as_positional, _precise_fp, call_key
from ._ranks import RankedCompiled, _trace_ranks
from .errors import KnitRuntimeError, user_error


def _loc(where: str) -> tuple[str, int, int]:
    file, _, line = where.rpartition(":")
    return (file, int(line) if line.isdigit() else 0, 0)


class DistributedKernel:
    """A kernel run as this process's rank of a torch.distributed process group."""

    def __init__(self, kernel: Kernel, group: Any = None):
        self.kernel = kernel
        self.group = group
        self._cache: dict = {}
        self._announced = False  # this run's end is known to every rank (no final gather needed)

    def _world(self) -> tuple[int, int]:
        import torch.distributed as dist
        if not dist.is_initialized():
            raise RuntimeError("knit.distributed needs torch.distributed initialized (dist.init_process_group, "
                               "e.g. under torchrun); for ranks in one process use knit.simulate(kernel, ranks=N)")
        return dist.get_rank(self.group), dist.get_world_size(self.group)

    def compile(self, *args: Any, target: str | None = None, **kwargs: Any) -> RankedCompiled:
        rank, world = self._world()
        args, kwargs = _as_positional(self.kernel.fn, list(args), kwargs)
        target = self.kernel.resolve_target(target)
        key = (target, rank, world, _precise_fp(), *call_key(args, kwargs))
        if key not in self._cache:
            self._cache[key] = _trace_ranks(self.kernel, [(list(args), kwargs)], target, first_rank=rank,
                                           num_ranks=world)
        return self._cache[key]

    def _gather(self, payload: dict) -> list[dict]:
        """Every rank's payload (one all_gather_object over the group)."""
        import torch.distributed as dist
        gathered: list[Any] = [None] * dist.get_world_size(self.group)
        dist.all_gather_object(gathered, payload, group=self.group)
        if any(p.get("state", "collective") != "collective" for p in gathered):
            self._announced = True  # every rank saw the same gather: nobody needs another
        return gathered

    def _transport(self, members: list[int], mine: dict) -> list[dict]:
        """The operands of `members` at this rank's collective (CollectiveTransport)."""
        rank, _ = self._world()
        gathered = self._gather(dict(mine, state="collective"))
        for r, p in enumerate(gathered):
            if p["state"] != "collective":
                self._announced = True
                what = f"failed ({p['error']})" if p["state"] == "failed" else "finished its kernel"
                raise user_error("deadlock", f"rank {rank} waits at this collective, but rank {r} {what}: in a "
                                 "torch.distributed job every rank must issue the same collectives",
                                 _loc(mine["where"]), KnitRuntimeError)
        for m in members:
            if gathered[m]["call"] != mine["call"]:
                raise user_error("collective-mismatch", f"rank {rank} calls {mine['call']} while rank {m} of its "
                                 f"group calls {gathered[m]['call']} ({gathered[m]['where']}): every rank of a group "
                                 "must issue the same collectives, in the same order, with matching tensors",
                                 _loc(mine["where"]), KnitRuntimeError)
        return [gathered[m] for m in members]

    def _finish(self, error: BaseException | None) -> None:
        """The run's last gather: this rank finished (or failed); a rank still at a collective
        meets it and raises. Raises here when another rank is still at one."""
        if self._announced:
            return
        rank, _ = self._world()
        gathered = self._gather({"state": "failed" if error else "finished", "error": str(error)[:300]})
        waiting = [(r, p) for r, p in enumerate(gathered) if p["state"] == "collective"]
        if waiting and error is None:
            r, p = waiting[0]
            raise user_error("deadlock", f"rank {rank} finished its kernel, but rank {r} waits at {p['call']}: in "
                             "a torch.distributed job every rank must issue the same collectives",
                             _loc(p["where"]), KnitRuntimeError)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        compiled = self.compile(*args, **kwargs)
        rank, world = self._world()
        self._announced = False
        try:
            result = compiled.run_ranks([_as_positional(self.kernel.fn, list(args), kwargs)], rank, world,
                                        self._transport)[0]
        except BaseException as e:
            self._finish(e)
            raise
        self._finish(None)
        return result


def distributed(kernel: Any, group: Any = None) -> DistributedKernel:
    """knit.distributed(kernel)(*args): this process's rank of `kernel` in the torch.distributed
    process group `group` (default: the world); returns this rank's result."""
    return DistributedKernel(kernel if isinstance(kernel, Kernel) else Kernel(kernel), group)
