"""The collective cost model (simulator/src/collective_cost.cpp, docs/collectives.md) against
hand-computed ring costs, and the per-rank timing of multi-rank kernels: a collective starts
when the last rank of its group arrives, every rank leaves it together, and each rank's latency
is its own."""
import linecache

import pytest

import knit  # noqa: E402  (tests/python/conftest.py puts python/ on sys.path)
import knit.collectives as cc  # noqa: E402
import knit.isa as nisa  # noqa: E402
import knit.language as nl  # noqa: E402
import knit.typing as nt  # noqa: E402

MIB = 1 << 20
# The topology table's figures (collective_cost.cpp), restated from their sources.
LINK_BYTES_PER_NS = {"trn1": 384, "trn2": 1280}  # NeuronLink per chip
EFA_BYTES_PER_NS = {"trn1": 800 / 8 / 16, "trn2": 200 / 8}  # per chip
RANKS_PER_CHIP = {"trn1": 2, "trn2": 4}
LINK_STEP_NS, EFA_STEP_NS = 2000, 15000


def collective_kernel(call, out_rows):
    @knit.jit
    def kernel(a):
        buf = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="buf")
        res = nl.ndarray((out_rows, a.shape[1]), dtype=a.dtype, buffer=nl.shared_hbm, name="res")
        nisa.dma_copy(buf, a)
        call(buf, res)
        out = nl.ndarray(res.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(out, res)
        return out
    return kernel


def timed(kernel, ranks, rows, target):
    prof = knit.profile(knit.simulate(kernel, ranks=ranks), nt.tensor[[rows, 1024], nl.float32], target=target)
    return prof, [c for c in prof.collectives if c["rank"] == 0][0]


@pytest.mark.parametrize("target,ranks,path", [("trn1", 4, "neuronlink"), ("trn2", 8, "neuronlink"),
                                               ("trn2", 4, "chip")])
def test_all_reduce_ring_cost(target, ranks, path):
    """2(N-1) steps of S/N bytes, each a step latency plus the bytes over the per-rank share of the
    slowest hop (the chip's links or EFA shared by the group's ranks on that chip)."""
    rows = 1024  # S = 4 MiB of fp32
    kernel = collective_kernel(lambda s, d: cc.all_reduce([s], [d], cc.ReplicaGroup([list(range(ranks))]), nl.add),
                               rows)
    _, c = timed(kernel, ranks, rows, target)
    share = min(ranks, RANKS_PER_CHIP[target])
    assert c["path"] == path and c["steps"] == 2 * (ranks - 1) and c["step_bytes"] == 4 * MIB / ranks
    if path == "chip":
        return  # through HBM: the machine table's per-core HBM rate (test_timing covers it)
    want = 2 * (ranks - 1) * (LINK_STEP_NS + 4 * MIB / ranks / (LINK_BYTES_PER_NS[target] / share))
    assert c["end_ns"] - c["start_ns"] == pytest.approx(want, rel=1e-9)


def test_two_level_all_reduce_across_nodes():
    """trn1, 64 ranks on two 32-rank nodes: a reduce-scatter within each node (31 steps of S/32
    over NeuronLink shared by a chip's 2 ranks), an all-reduce of S/32 across the 2 nodes (2 steps
    of S/64 over EFA shared by 2), an all-gather within each node again."""
    kernel = collective_kernel(lambda s, d: cc.all_reduce([s], [d], cc.ReplicaGroup([list(range(64))]), nl.add), 1024)
    _, c = timed(kernel, 64, 1024, "trn1")
    size = 4 * MIB
    within = 31 * (LINK_STEP_NS + size / 32 / (LINK_BYTES_PER_NS["trn1"] / 2))
    across = 2 * (EFA_STEP_NS + size / 64 / (EFA_BYTES_PER_NS["trn1"] / 2))
    assert (c["path"], c["steps"]) == ("neuronlink+efa", 64)
    assert c["end_ns"] - c["start_ns"] == pytest.approx(2 * within + across, rel=1e-9)


def test_all_to_all_across_nodes_stays_a_flat_ring_over_efa():
    kernel = collective_kernel(lambda s, d: cc.all_to_all([s], [d], cc.ReplicaGroup([list(range(64))]), 0), 64)
    _, c = timed(kernel, 64, 64, "trn1")
    step = 64 * 4096 / 64
    assert (c["path"], c["steps"]) == ("efa", 63)
    assert c["end_ns"] - c["start_ns"] == pytest.approx(63 * (EFA_STEP_NS + step / (EFA_BYTES_PER_NS["trn1"] / 2)))


@pytest.mark.parametrize("make,out_rows,steps,step_bytes", [
    (lambda g: (lambda s, d: cc.all_gather([s], [d], g, 0)), 8 * 64, 7, 64 * 4096),
    (lambda g: (lambda s, d: cc.all_to_all([s], [d], g, 0)), 64, 7, 64 * 4096 / 8),
    (lambda g: (lambda s, d: cc.collective_permute_implicit([[s]], [[d]], g)), 64, 1, 64 * 4096),
])
def test_ring_steps_per_function(make, out_rows, steps, step_bytes):
    """all_gather: N-1 steps of the whole src; all_to_all: N-1 of a chunk; a permute: one."""
    call = make(cc.ReplicaGroup([list(range(8))]))
    _, c = timed(collective_kernel(call, out_rows), 8, 64, "trn2")
    assert (c["steps"], c["step_bytes"], c["path"]) == (steps, step_bytes, "neuronlink")
    assert c["end_ns"] - c["start_ns"] == pytest.approx(steps * (LINK_STEP_NS + step_bytes / (1280 / 4)))


def test_late_rank_holds_the_group_and_ranks_report_their_own_latency():
    """Rank 1 does extra DMA work before the collective and rank 0 after it: the collective starts
    when rank 1 arrives, both leave it together, and rank 0 ends last."""
    from knit import _trace

    @knit.jit
    def kernel(a):
        buf = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="buf")
        res = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="res")
        extra = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="extra")
        rank = _trace.current().rank
        nisa.dma_copy(buf, a)
        for _ in range(4 if rank == 1 else 0):
            nisa.dma_copy(extra, a)
        cc.all_reduce([buf], [res], cc.ReplicaGroup([[0, 1]]), nl.add)
        for _ in range(8 if rank == 0 else 0):
            nisa.dma_copy(extra, res)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(out, res)
        return out

    prof = knit.profile(knit.simulate(kernel, ranks=2), nt.tensor[[512, 1024], nl.float32], target="trn2")
    r0, r1 = sorted(prof.collectives, key=lambda c: c["rank"])
    assert r1["arrive_ns"] > r0["arrive_ns"]
    assert r0["start_ns"] == r1["start_ns"] >= r1["arrive_ns"]
    assert r0["end_ns"] == r1["end_ns"] > r0["start_ns"]
    assert prof.rank_latency_ns[0] > prof.rank_latency_ns[1]
    assert prof.total_ns == pytest.approx(max(prof.rank_latency_ns))
    bench = knit.benchmark(knit.simulate(kernel, ranks=2), nt.tensor[[512, 1024], nl.float32], target="trn2")
    assert bench.benchmark_result.rank_latency_us == pytest.approx([ns / 1e3 for ns in prof.rank_latency_ns])
    assert bench.benchmark_result.nc_latency.get_latency_percentile(50) == pytest.approx(prof.latency_us)


def test_single_rank_group_costs_nothing_but_the_sync():
    kernel = collective_kernel(lambda s, d: cc.all_reduce([s], [d], cc.ReplicaGroup([[0], [1]]), nl.add), 64)
    _, c = timed(kernel, 2, 64, "trn2")
    assert (c["path"], c["steps"]) == ("none", 0) and c["end_ns"] == c["start_ns"]


def test_trace_shows_each_ranks_wait_and_transfer():
    kernel = collective_kernel(lambda s, d: cc.all_gather([s], [d], cc.ReplicaGroup([[0, 1, 2, 3]]), 0), 4 * 64)
    prof, _ = timed(kernel, 4, 64, "trn2")
    events = [e for e in prof.trace_events() if e.get("cat") == "collective"]
    for c in prof.collectives:
        mine = {e["name"]: e for e in events if e["pid"] == c["rank"]}
        assert set(mine) == {"wait", "all_gather"}
        assert mine["wait"]["ts"] * 1e3 == pytest.approx(c["arrive_ns"])
        assert mine["all_gather"]["dur"] * 1e3 == pytest.approx(c["end_ns"] - c["start_ns"])
        assert mine["all_gather"]["args"]["source"].rsplit(":", 1)[0].endswith("test_collectives_timing.py")


@pytest.mark.parametrize("lnc,path,share", [(None, "neuronlink", 4), (2, "neuronlink", 4), (1, "chip", None)])
def test_lnc_sets_ranks_per_chip(lnc, path, share):
    """trn2 at LNC=2 (the default) puts 4 ranks on a chip, so 8 ranks span two chips; at LNC=1 a
    chip holds 8 and the all_reduce stays on it."""
    kernel = collective_kernel(lambda s, d: cc.all_reduce([s], [d], cc.ReplicaGroup([list(range(8))]), nl.add), 64)
    prof = knit.profile(knit.simulate(kernel, ranks=8, lnc=lnc), nt.tensor[[64, 1024], nl.float32], target="trn2")
    c = prof.collectives[0]
    assert c["path"] == path
    if share:
        assert c["end_ns"] - c["start_ns"] == pytest.approx(14 * (LINK_STEP_NS + 64 * 4096 / 8 / (1280 / share)))


def test_lnc2_on_trn1_is_refused():
    kernel = collective_kernel(lambda s, d: cc.all_reduce([s], [d], cc.ReplicaGroup([[0, 1]]), nl.add), 64)
    with pytest.raises(ValueError, match="lnc=2 needs trn2"):
        knit.profile(knit.simulate(kernel, ranks=2, lnc=2), nt.tensor[[64, 1024], nl.float32], target="trn1")


@knit.jit
def beside_all_reduce(a):
    """An all_reduce over 8 ranks, then copies: one independent of it, one overwriting its src, one
    reading its dst."""
    buf = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="buf")
    res = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="res")
    other = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="other")
    nisa.dma_copy(buf, a)
    cc.all_reduce([buf], [res], cc.ReplicaGroup([list(range(8))]), nl.add)
    nisa.dma_copy(other, a)  # independent: overlaps
    nisa.dma_copy(buf, a)  # overwrites the collective's src: waits
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(out, res)  # reads its dst: waits
    return out


def rank0_copy_starts(prof):
    """Rank 0's copies' start times by their source text, in time order ("nisa.dma_copy(buf, a)"
    runs twice: before and after the collective)."""
    source = prof._program.source
    starts: dict[str, list[float]] = {}
    for row in sorted((row for row in prof._timeline if row[0] == 0), key=lambda row: row[3]):
        text = linecache.getline(source[row[1]][1], source[row[1]][2])
        starts.setdefault(text.split("#")[0].strip(), []).append(row[3])
    return starts


def test_work_beside_a_collective_in_flight_overlaps_it():
    """After issuing an all_reduce, a rank's copies that touch neither its src nor dst run while it
    is in flight; the copy reading dst waits for it, and so does one overwriting its src."""
    prof = knit.profile(knit.simulate(beside_all_reduce, ranks=8), nt.tensor[[256, 1024], nl.float32], target="trn2")
    c = next(c for c in prof.collectives if c["rank"] == 0)
    starts = rank0_copy_starts(prof)
    assert starts["nisa.dma_copy(other, a)"][0] < c["end_ns"] - 1000
    assert starts["nisa.dma_copy(buf, a)"][1] >= c["end_ns"]
    assert starts["nisa.dma_copy(out, res)"][0] >= c["end_ns"]
    assert prof.rank_latency_ns[0] >= c["end_ns"] + prof.launch_ns


def test_collective_traffic_shares_the_ranks_dma():
    """The all_reduce's own reads and writes (2 x steps x step_bytes through the core's DMA at
    min(16 x 23, 362) B/ns on trn2) hold the DMA bandwidth, so an independent copy issued beside
    it moves its data only after them."""
    prof = knit.profile(knit.simulate(beside_all_reduce, ranks=8), nt.tensor[[256, 1024], nl.float32], target="trn2")
    c = next(c for c in prof.collectives if c["rank"] == 0)
    local_ns = 2 * c["steps"] * c["step_bytes"] / 362
    other = rank0_copy_starts(prof)["nisa.dma_copy(other, a)"][0]
    assert other >= c["start_ns"] + local_ns - 1e-6
    assert other < c["end_ns"]

def ring_kernel(steps, compute):
    """`steps` ring steps of collective_permute_implicit between two buffers, each followed, when
    `compute`, by an exp on an SBUF tile the ring does not touch."""
    @knit.jit
    def kernel(a, x):
        bufs = [nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name=f"ring{i}") for i in range(2)]
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(bufs[0], a)
        nisa.dma_copy(t, x)
        for k in range(steps):
            cc.collective_permute_implicit([[bufs[k % 2]]], [[bufs[(k + 1) % 2]]], cc.ReplicaGroup([list(range(8))]))
            if compute:
                nisa.activation(t, nl.exp, t)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(out, bufs[steps % 2])
        return out
    return kernel


def test_ring_steps_overlapped_with_compute_cost_about_the_larger():
    args = (nt.tensor[[64, 1024], nl.float32], nt.tensor[[128, 4096], nl.float32])
    both, ring_only = (knit.profile(knit.simulate(ring_kernel(6, c), ranks=8), *args, target="trn2").total_ns
                       for c in (True, False))
    compute = knit.profile(knit.simulate(ring_kernel(6, True), ranks=8), *args, target="trn2").engines["act"].busy_ns
    compute /= 8  # busy time is summed over the ranks
    assert both < ring_only + 0.5 * compute  # most of the compute hides under the ring
    assert both >= max(ring_only, compute)
