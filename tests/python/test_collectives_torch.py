"""Multi-rank kernels from PyTorch: in one process over lists of torch tensors, and as a real
torch.distributed job (torchrun, gloo, 4 processes) whose collectives run over the process group
and must give the bytes of the in-process launch."""
import os
import re
import subprocess
import sys

import pytest

import knit  # noqa: E402  (tests/python/conftest.py puts python/ on sys.path)
import knit.collectives as cc  # noqa: E402
import knit.isa as nisa  # noqa: E402
import knit.language as nl  # noqa: E402
from kernel_test_util import EXAMPLES, ROOT  # noqa: E402

torch = pytest.importorskip("torch")

TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4"]


@knit.jit
def summed(a):
    buf = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="buf")
    res = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="res")
    nisa.dma_copy(buf, a)
    cc.all_reduce([buf], [res], cc.ReplicaGroup([[0, 1, 2]]), nl.add)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(out, res)
    return out


def test_lists_of_torch_tensors_in_one_process():
    xs = [torch.randn(4, 6, generator=torch.Generator().manual_seed(r)) for r in range(3)]
    outs = knit.simulate(summed, ranks=3)(xs)
    want = (xs[0] + xs[1]) + xs[2]
    assert len(outs) == 3
    for o in outs:
        assert isinstance(o, torch.Tensor) and torch.equal(o, want)


def test_distributed_without_a_process_group_says_what_to_do():
    import torch.distributed as dist
    if dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    with pytest.raises(RuntimeError, match="init_process_group"):
        knit.distributed(summed)(torch.ones(2, 2))


def torchrun(script, timeout=240):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), OMP_NUM_THREADS="1")
    run = subprocess.run(TORCHRUN + [script], env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run.stdout


def test_every_collective_over_torch_distributed_matches_in_process():
    out = torchrun(os.path.join(ROOT, "tests", "python", "distributed_worker.py"))
    for name in ("all_reduce split groups", "all_gather", "reduce_scatter max", "all_to_all",
                 "collective_permute idle rank"):
        assert sorted(re.findall(rf"rank (\d): {name} ok", out)) == ["0", "1", "2", "3"], (name, out)
    # A skipped or mismatched collective: every rank raises (the job ends instead of waiting).
    assert sorted(re.findall(r"rank (\d): skip raised deadlock", out)) == ["0", "1", "2", "3"], out
    assert sorted(re.findall(r"rank (\d): mismatch raised collective-mismatch", out)) == ["0", "1", "2", "3"], out


def test_torchrun_tensor_parallel_mlp_example():
    out = torchrun(os.path.join(EXAMPLES, "collectives", "torchrun_tp_mlp.py"))
    rows = re.findall(r"rank (\d) of 4: Tensor \(128, 256\), max abs error (\S+), "
                      r"equal to the in-process run: (True|False)", out)
    assert sorted(r for r, _, _ in rows) == ["0", "1", "2", "3"], out
    # fp32 sums of 512 products of O(1) terms: 2^-24 * 512 * |y| (|y| < 4) bounds the error.
    assert all(float(e) < 512 * 2.0 ** -24 * 4 and same == "True" for _, e, same in rows), rows
