"""Run by test_collectives_torch.py under torchrun: every collective kind through
knit.distributed (torch.distributed, gloo) must give the bytes the in-process launch gives.
Prints "rank <r>: <name> ok" per check, or raises. Then the errors: a rank that skips a
collective, and a rank that calls another one, must make every rank raise (not wait forever);
prints "rank <r>: <case> raised <rule>"."""
import os
import sys

import numpy as np
import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import knit  # noqa: E402
import knit.collectives as cc  # noqa: E402
import knit.isa as nisa  # noqa: E402
import knit.language as nl  # noqa: E402


def through(call, out_shape):
    """A kernel: a -> shared_hbm buf; res starts as rows of a[0]; call(buf, res); returns res."""
    @knit.jit
    def kernel(a):
        buf = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="buf")
        res = nl.ndarray(out_shape, dtype=a.dtype, buffer=nl.shared_hbm, name="res")
        nisa.dma_copy(buf, a)
        nisa.dma_copy(res, a.ap([[0, out_shape[0]], [1, out_shape[1]]]))  # a rank no one sends to keeps it
        call(buf, res)
        out = nl.ndarray(out_shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(out, res)
        return out
    return kernel


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    everyone = cc.ReplicaGroup([list(range(world))])
    halves = cc.ReplicaGroup([list(range(world // 2)), list(range(world // 2, world))])
    ring = [(r, (r + 1) % (world - 1)) for r in range(world - 1)]  # the last rank is idle
    checks = {  # name: (call, src shape, dst shape)
        "all_reduce split groups": (lambda s, d: cc.all_reduce([s], [d], halves, nl.add), (3, 4), (3, 4)),
        "all_gather": (lambda s, d: cc.all_gather([s], [d], everyone, 0), (3, 4), (3 * world, 4)),
        "reduce_scatter max": (lambda s, d: cc.reduce_scatter([s], [d], everyone, 0, nl.maximum),
                               (3 * world, 4), (3, 4)),
        "all_to_all": (lambda s, d: cc.all_to_all([s], [d], everyone, 0), (3 * world, 4), (3 * world, 4)),
        "collective_permute idle rank": (lambda s, d: cc.collective_permute([s], [d], ring), (3, 4), (3, 4)),
    }
    for n, (name, (call, in_shape, out_shape)) in enumerate(checks.items()):
        xs = [np.random.default_rng(100 * n + r).standard_normal(in_shape).astype(np.float32) for r in range(world)]
        kernel = through(call, out_shape)
        got = knit.distributed(kernel)(torch.from_numpy(xs[rank]))
        want = knit.simulate(kernel, ranks=world)(xs)[rank]
        assert isinstance(got, torch.Tensor) and np.array_equal(got.numpy(), want), name
        print(f"rank {rank}: {name} ok", flush=True)
    errors(rank, world, everyone)
    dist.destroy_process_group()


def errors(rank, world, everyone):
    from knit.errors import KnitError

    cases = {  # rank 1 skips the collective / calls maximum where the others call add
        "skip": lambda s, d: None if rank == 1 else cc.all_reduce([s], [d], everyone, nl.add),
        "mismatch": lambda s, d: cc.all_reduce([s], [d], everyone, nl.maximum if rank == 1 else nl.add),
    }
    for name, call in cases.items():
        try:
            knit.distributed(through(call, (3, 4)))(torch.ones(3, 4))
        except KnitError as e:
            rule = "deadlock" if "[deadlock]" in str(e) else "collective-mismatch" if "mismatch" in str(e) else "?"
            print(f"rank {rank}: {name} raised {rule}", flush=True)
        else:
            print(f"rank {rank}: {name} did not raise", flush=True)


if __name__ == "__main__":
    main()
