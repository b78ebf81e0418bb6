"""The tensor-parallel MLP of tp_mlp.py as a real torch.distributed job: one process per rank.

    torchrun --standalone --nproc-per-node 4 examples/kernels/python/collectives/torchrun_tp_mlp.py

Each process holds its own shard of the weights as torch tensors and calls
``knit.distributed(kernel)``; the kernel's all_reduce runs over the job's gloo process group.
Every rank checks its result against the unsplit MLP in float64 and against the same kernel
run on all ranks in one process (knit.simulate(kernel, ranks=N)), which must agree bit for bit.
"""
import os
import sys

import numpy as np
import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tp_mlp  # noqa: E402

import knit  # noqa: E402


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    rng = np.random.default_rng(0)  # the same weights in every process
    T, D, H, E = 128, 256, 128 * world, 256
    x = rng.standard_normal((T, D)).astype(np.float32)
    w1 = (rng.standard_normal((D, H)) / np.sqrt(D)).astype(np.float32)
    w2 = (rng.standard_normal((H, E)) / np.sqrt(H)).astype(np.float32)
    w1_shards, w2_shards = tp_mlp.shard(w1, w2, world)
    y = knit.distributed(tp_mlp.tp_mlp_kernel)(torch.from_numpy(x), torch.from_numpy(w1_shards[rank]),
                                               torch.from_numpy(w2_shards[rank]), world)
    in_process = tp_mlp.run(x, w1, w2, world)[rank]
    error = float(np.max(np.abs(y.numpy() - tp_mlp.reference(x, w1, w2))))
    same = bool(np.array_equal(y.numpy(), in_process))
    print(f"rank {rank} of {world}: {type(y).__name__} {tuple(y.shape)}, max abs error {error:.3g}, "
          f"equal to the in-process run: {same}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
