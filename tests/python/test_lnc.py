"""LNC2: a kernel launched on a grid of 2 runs as two cores that synchronize with
nisa.core_barrier and exchange SBUF tiles with nisa.sendrecv (nki.isa.core_barrier, nki.isa.sendrecv)."""
import numpy as np
import pytest

import knit as nki
import knit.isa as nisa
import knit.language as nl
import knit.lnc
from knit.errors import KnitError


@nki.jit
def swap_halves(a):
    """Each core loads its half of the rows and sends it to the other core, which stores it."""
    rank = nl.program_id(0)
    n, f = a.shape
    h = n // 2
    out = nl.ndarray((n, f), a.dtype, buffer=nl.shared_hbm)
    mine = nl.ndarray((h, f), a.dtype, buffer=nl.sbuf)
    got = nl.ndarray((h, f), a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=a[rank * h:(rank + 1) * h, :])
    nisa.sendrecv(src=mine, dst=got, send_to_rank=1 - rank, recv_from_rank=1 - rank, pipe_id=0)
    nisa.dma_copy(dst=out[rank * h:(rank + 1) * h, :], src=got)
    return out


def test_sendrecv_exchanges_sbuf_tiles_between_the_two_cores():
    a = np.random.default_rng(0).standard_normal((256, 16)).astype(np.float32)
    np.testing.assert_array_equal(swap_halves[2](a), np.concatenate([a[128:], a[:128]]))


@nki.jit
def column_sums_lnc2(a):
    """Each core sums its half of the rows into a shared scratch row; after the barrier, each
    core reads both partial rows (one written by the other core) and stores the total."""
    rank = nl.program_id(0)
    n, f = a.shape
    h = n // 2
    partial = nl.ndarray((2, f), nl.float32, buffer=nl.shared_hbm, name="partial")
    out = nl.ndarray((2, f), nl.float32, buffer=nl.shared_hbm, name="out")
    t = nl.ndarray((1, h * f), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[rank * h:(rank + 1) * h, :].reshape((1, h * f)))
    s = nl.ndarray((1, f), nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=s, op=nl.add, data=t.reshape((1, h, f)).permute(0, 2, 1), axis=2)
    nisa.dma_copy(dst=partial[rank:rank + 1, :], src=s)
    knit.lnc.core_barrier(partial, (0, 1))
    both = nl.ndarray((2, f), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=both, src=partial)
    total = nl.ndarray((1, f), nl.float32, buffer=nl.sbuf)
    nisa.tensor_partition_reduce(dst=total, op=nl.add, data=both)
    nisa.dma_copy(dst=out[rank:rank + 1, :], src=total)
    return out


def test_core_barrier_orders_shared_hbm_writes_across_cores():
    a = np.random.default_rng(1).standard_normal((8, 4)).astype(np.float32)
    halves = [a[:4].sum(axis=0, dtype=np.float64), a[4:].sum(axis=0, dtype=np.float64)]
    got = column_sums_lnc2[2](a)
    np.testing.assert_allclose(got[0], halves[0] + halves[1], rtol=1e-5)
    np.testing.assert_array_equal(got[0], got[1])  # both cores saw both partials


def _deadlocking(kind):
    @nki.jit
    def k(a):
        rank = nl.program_id(0)
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        u = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        if kind == "barrier" and rank == 0:
            nisa.core_barrier(a, (0, 1))  # core 1 never arrives
        if kind == "pipe":
            nisa.sendrecv(src=t, dst=u, send_to_rank=1 - rank, recv_from_rank=1 - rank, pipe_id=rank)
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    return k


@pytest.mark.parametrize("kind,where", [("barrier", "core_barrier"), ("pipe", "sendrecv")])
def test_unmatched_synchronization_is_a_deadlock_error(kind, where):
    with pytest.raises(KnitError, match="wait for each other forever") as info:
        _deadlocking(kind)[2](np.zeros((4, 4), np.float32))
    assert info.value.rule == "deadlock"
    assert f"waits at {where}" in info.value.message
    assert info.value.file.endswith("test_lnc.py")


def test_lnc_calls_are_rejected_without_a_second_core_or_on_trn1():
    a = np.zeros((256, 16), np.float32)
    with pytest.raises(KnitError, match="runs on 1 core") as info:
        swap_halves(a)
    assert info.value.rule == "lnc"
    with pytest.raises(KnitError, match="gen3") as info:
        swap_halves[2].compile(a, target="trn1")
    assert info.value.rule == "target"
