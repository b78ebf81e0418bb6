"""nki.collectives on 2, 4 and 8 ranks (knit.simulate(kernel, ranks=N)) against NumPy: every
function, one and several replica sub-lists, HBM and SBUF operands, the reduction order, and the
errors (mismatched calls, deadlock, bad groups and shapes)."""
import numpy as np
import pytest

import knit  # noqa: E402  (tests/python/conftest.py puts python/ on sys.path)
import knit.collectives as cc  # noqa: E402
import knit.isa as nisa  # noqa: E402
import knit.language as nl  # noqa: E402
from knit.errors import KnitError  # noqa: E402

RANKS = [2, 4, 8]


GROUPINGS = ["all", "reversed", "halves", "interleaved", "pairs"]


def groups_for(n, grouping):
    """The replica group of a grouping over n ranks: all ranks; all in reverse order (positions
    differ from ranks); two halves; even and odd ranks; consecutive pairs."""
    ranks = list(range(n))
    return {"all": [ranks], "reversed": [ranks[::-1]], "halves": [ranks[: n // 2], ranks[n // 2:]],
            "interleaved": [ranks[0::2], ranks[1::2]], "pairs": [ranks[i:i + 2] for i in range(0, n, 2)]}[grouping]


def position(groups, r):
    for g in groups:
        if r in g:
            return g, g.index(r)
    raise AssertionError(r)


def hbm_kernel(call, out_shape):
    """A kernel that copies `a` into a shared_hbm buffer, runs call(buf, res) and returns res."""
    @knit.jit
    def kernel(a):
        buf = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="buf")
        res = nl.ndarray(out_shape, dtype=a.dtype, buffer=nl.shared_hbm, name="res")
        out = nl.ndarray(out_shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(buf, a)
        call(buf, res)
        nisa.dma_copy(out, res)
        return out
    return kernel


def inputs(n, shape, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(dtype) for _ in range(n)]


@pytest.mark.parametrize("n", RANKS)
@pytest.mark.parametrize("grouping", GROUPINGS)
@pytest.mark.parametrize("op,np_op", [(nl.add, np.add), (nl.maximum, np.maximum), (nl.minimum, np.minimum)])
def test_all_reduce(n, grouping, op, np_op):
    groups = groups_for(n, grouping)
    xs = inputs(n, (4, 24))
    outs = knit.simulate(hbm_kernel(lambda s, d: cc.all_reduce([s], [d], cc.ReplicaGroup(groups), op), (4, 24)),
                         ranks=n)(xs)
    for r in range(n):
        g, _ = position(groups, r)
        want = xs[g[0]]
        for q in g[1:]:  # rank-position order, each step rounded to fp32
            want = np_op(want, xs[q]).astype(np.float32)
        np.testing.assert_array_equal(outs[r], want)


def test_all_reduce_rounds_once_to_bf16():
    """bf16 values summed in fp32 and rounded once: 1 + 2^-8 + 2^-8 is 1 + 2^-7, a bf16 value,
    which a bf16 accumulation would lose (1 + 2^-8 is a tie that rounds back to 1, twice)."""
    import ml_dtypes
    bf16 = ml_dtypes.bfloat16
    xs = [np.full((2, 8), v, dtype=bf16) for v in (1.0, 2.0 ** -8, 2.0 ** -8)]
    outs = knit.simulate(hbm_kernel(lambda s, d: cc.all_reduce([s], [d], cc.ReplicaGroup([[0, 1, 2]]), nl.add),
                                    (2, 8)), ranks=3)(xs)
    for o in outs:
        assert o.dtype == bf16
        np.testing.assert_array_equal(o.astype(np.float32), np.full((2, 8), 1 + 2.0 ** -7, np.float32))


def test_all_reduce_int32_exact():
    xs = [np.array([[2 ** 30, -7, 5]], np.int32), np.array([[2 ** 30 - 1, 3, -5]], np.int32)]
    outs = knit.simulate(hbm_kernel(lambda s, d: cc.all_reduce([s], [d], cc.ReplicaGroup([[0, 1]]), nl.add),
                                    (1, 3)), ranks=2)(xs)
    want = np.clip(xs[0].astype(np.int64) + xs[1], -2 ** 31, 2 ** 31 - 1).astype(np.int32)  # saturates
    for o in outs:
        np.testing.assert_array_equal(o, want)


@pytest.mark.parametrize("n", RANKS)
@pytest.mark.parametrize("grouping", GROUPINGS)
def test_all_gather_hbm_dim0(n, grouping):
    groups = groups_for(n, grouping)
    size = len(groups[0])
    xs = inputs(n, (3, 5))
    outs = knit.simulate(hbm_kernel(lambda s, d: cc.all_gather([s], [d], cc.ReplicaGroup(groups), 0),
                                    (3 * size, 5)), ranks=n)(xs)
    for r in range(n):
        g, _ = position(groups, r)
        np.testing.assert_array_equal(outs[r], np.concatenate([xs[q] for q in g], axis=0))


@pytest.mark.parametrize("n", RANKS)
@pytest.mark.parametrize("grouping", GROUPINGS)
@pytest.mark.parametrize("op,np_op", [(nl.add, np.add), (nl.maximum, np.maximum), (nl.minimum, np.minimum)])
def test_reduce_scatter_hbm(n, grouping, op, np_op):
    groups = groups_for(n, grouping)
    size = len(groups[0])
    xs = inputs(n, (2 * size, 6))
    outs = knit.simulate(hbm_kernel(lambda s, d: cc.reduce_scatter([s], [d], cc.ReplicaGroup(groups), 0, op),
                                    (2, 6)), ranks=n)(xs)
    for r in range(n):
        g, pos = position(groups, r)
        want = xs[g[0]]
        for q in g[1:]:
            want = np_op(want, xs[q]).astype(np.float32)
        np.testing.assert_array_equal(outs[r], want[2 * pos: 2 * pos + 2])


@pytest.mark.parametrize("n", RANKS)
@pytest.mark.parametrize("grouping", GROUPINGS)
def test_all_to_all(n, grouping):
    groups = groups_for(n, grouping)
    size = len(groups[0])
    xs = inputs(n, (3 * size, 4))
    outs = knit.simulate(hbm_kernel(lambda s, d: cc.all_to_all([s], [d], cc.ReplicaGroup(groups), 0),
                                    (3 * size, 4)), ranks=n)(xs)
    for r in range(n):
        g, pos = position(groups, r)
        want = np.concatenate([xs[q][3 * pos: 3 * pos + 3] for q in g], axis=0)
        np.testing.assert_array_equal(outs[r], want)


@pytest.mark.parametrize("n", RANKS)
def test_collective_permute_ring_and_idle_rank(n):
    """A ring over ranks 0..n-2; rank n-1 is in no pair and keeps its dst (its own copy of a)."""
    ring = list(range(n - 1))
    pairs = [(ring[i], ring[(i + 1) % len(ring)]) for i in range(len(ring))]

    @knit.jit
    def kernel(a):
        buf = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="buf")
        res = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="res")
        nisa.dma_copy(buf, a)
        nisa.dma_copy(res, a)
        cc.collective_permute([buf], [res], pairs)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(out, res)
        return out

    xs = inputs(n, (2, 3))
    outs = knit.simulate(kernel, ranks=n)(xs)
    for src, dst in pairs:
        np.testing.assert_array_equal(outs[dst], xs[src])
    np.testing.assert_array_equal(outs[n - 1], xs[n - 1])


@pytest.mark.parametrize("n", RANKS)
@pytest.mark.parametrize("grouping", GROUPINGS)
def test_permute_implicit_ring_step(n, grouping):
    groups = groups_for(n, grouping)
    xs = inputs(n, (2, 4))
    outs = knit.simulate(hbm_kernel(lambda s, d: cc.collective_permute_implicit([[s]], [[d]], cc.ReplicaGroup(groups)),
                                    (2, 4)), ranks=n)(xs)
    for r in range(n):
        g, pos = position(groups, r)
        np.testing.assert_array_equal(outs[r], xs[g[(pos - 1) % len(g)]])


@pytest.mark.parametrize("n", RANKS)
def test_permute_implicit_reduce(n):
    @knit.jit
    def kernel(a, b):
        s0 = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="s0")
        s1 = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="s1")
        res = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="res")
        nisa.dma_copy(s0, a)
        nisa.dma_copy(s1, b)
        cc.collective_permute_implicit_reduce([[s0]], [[s1]], [[res]], cc.ReplicaGroup([list(range(n))]), nl.add)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(out, res)
        return out

    xs, ys = inputs(n, (2, 4), seed=1), inputs(n, (2, 4), seed=2)
    outs = knit.simulate(kernel, ranks=n)(xs, ys)
    for r in range(n):
        p = (r - 1) % n
        np.testing.assert_array_equal(outs[r], (xs[p] + ys[p]).astype(np.float32))


def test_sbuf_all_gather_dim1_and_all_reduce():
    """SBUF tiles: all_gather along the free dim (the API page's example) and an in-SBUF all_reduce."""
    @knit.jit
    def kernel(a):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        g = nl.ndarray((a.shape[0], 2 * a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        s = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(t, a)
        cc.all_gather([t], [g], cc.ReplicaGroup([[0, 1]]), 1)
        cc.all_reduce([t], [s], cc.ReplicaGroup([[0, 1]]), nl.add)
        gathered = nl.ndarray(g.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        summed = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(gathered, g)
        nisa.dma_copy(summed, s)
        return gathered, summed

    xs = [np.array([[1, 2], [3, 4]], np.float32), np.array([[5, 6], [7, 8]], np.float32)]
    outs = knit.simulate(kernel, ranks=2)(xs)
    for gathered, summed in outs:
        np.testing.assert_array_equal(gathered, [[1, 2, 5, 6], [3, 4, 7, 8]])
        np.testing.assert_array_equal(summed, xs[0] + xs[1])


@pytest.mark.parametrize("n", RANKS)
def test_sbuf_reduce_scatter(n):
    @knit.jit
    def kernel(a):
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        part = nl.ndarray((a.shape[0] // n, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(t, a)
        cc.reduce_scatter([t], [part], cc.ReplicaGroup([list(range(n))]), 0, nl.add)
        out = nl.ndarray(part.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(out, part)
        return out

    xs = inputs(n, (4 * n, 8))
    total = xs[0]
    for x in xs[1:]:
        total = (total + x).astype(np.float32)
    for r, o in enumerate(knit.simulate(kernel, ranks=n)(xs)):
        np.testing.assert_array_equal(o, total[4 * r: 4 * r + 4])


def test_coalesced_all_reduce_two_tensors():
    @knit.jit
    def kernel(a, b):
        bufs = [nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name=f"in{i}") for i, x in enumerate((a, b))]
        ress = [nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name=f"res{i}") for i, x in enumerate((a, b))]
        nisa.dma_copy(bufs[0], a)
        nisa.dma_copy(bufs[1], b)
        cc.all_reduce(bufs, ress, cc.ReplicaGroup([[0, 1, 2, 3]]), nl.add)
        outs = [nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm) for x in (a, b)]
        for o, r in zip(outs, ress):
            nisa.dma_copy(o, r)
        return tuple(outs)

    xs, ys = inputs(4, (2, 3), seed=3), inputs(4, (5,), seed=4)
    for oa, ob in knit.simulate(kernel, ranks=4)(xs, ys):
        np.testing.assert_array_equal(oa, ((xs[0] + xs[1]) + xs[2]) + xs[3])
        np.testing.assert_array_equal(ob, ((ys[0] + ys[1]) + ys[2]) + ys[3])


def test_shared_input_and_rank_dim():
    """One array for every rank, and rank_dim=True in and out."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    kernel = hbm_kernel(lambda s, d: cc.all_reduce([s], [d], cc.ReplicaGroup([[0, 1, 2]]), nl.add), (2, 3))
    for o in knit.simulate(kernel, ranks=3)(x):
        np.testing.assert_array_equal(o, 3 * x)
    stacked = np.stack([x, 2 * x, 4 * x])
    out = knit.simulate(kernel, ranks=3, rank_dim=True)(stacked)
    assert out.shape == (3, 2, 3)
    np.testing.assert_array_equal(out, np.broadcast_to(7 * x, (3, 2, 3)))


@pytest.mark.parametrize("n", RANKS)
def test_rank_id_offsets_a_view(n):
    """rank_id() as the scalar_offset of an .ap() view: rank r copies row r of its table."""
    @knit.jit
    def kernel(table):
        r = cc.rank_id()
        out = nl.ndarray((1, table.shape[1]), dtype=table.dtype, buffer=nl.shared_hbm)
        row = table.ap([[table.shape[1], 1], [1, table.shape[1]]], scalar_offset=r)  # in rows: scaled by dim 0's step
        nisa.dma_copy(out, row)
        return out

    table = np.arange(n * 5, dtype=np.float32).reshape(n, 5)
    for r, o in enumerate(knit.simulate(kernel, ranks=n)(table)):
        np.testing.assert_array_equal(o, table[r: r + 1])


@pytest.mark.filterwarnings("ignore:nl.dynamic_range is deprecated")
@pytest.mark.parametrize("ring", [[0, 1], [0, 1, 2, 3], [3, 1, 0, 2], list(range(8)), [7, 5, 3, 1, 0, 2, 4, 6]])
def test_current_processing_rank_id_through_a_loop(ring):
    """ring[(pos(self) - k) mod N] for k = 0..N-1, from a device loop's register (both an
    arithmetic ring and a shuffled one) and from Python ints."""
    n = len(ring)

    @knit.jit
    def kernel(dummy):
        out = nl.ndarray((1, 2 * n), dtype=nl.int32, buffer=nl.shared_hbm)
        t = nl.ndarray((1, 2 * n), dtype=nl.int32, buffer=nl.sbuf)
        for k in nl.dynamic_range(n):  # k is a register
            reg = cc.collective_permute_implicit_current_processing_rank_id(k, cc.ReplicaGroup([ring]))
            nisa.register_store(t[0:1, nl.ds(k, 1)], reg)
        for k in range(n):
            reg = cc.collective_permute_implicit_current_processing_rank_id(k, cc.ReplicaGroup([ring]))
            nisa.register_store(t[0:1, n + k:n + k + 1], reg)
        nisa.dma_copy(out, t)
        return out

    outs = knit.simulate(kernel, ranks=n)(np.zeros((1, 1), np.float32))
    for r in range(n):
        pos = ring.index(r)
        want = [ring[(pos - k) % n] for k in range(n)]
        np.testing.assert_array_equal(outs[r][0], want + want)


def test_all_gather_v_example():
    """nki-0.6-additions.md §3.3's example: 4 ranks, dst 16 elements, (count, displ) per rank."""
    sends = [(2, 0), (1, 3), (4, 0), (0, 0)]

    @knit.jit
    def kernel(a, meta):
        buf = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="buf")
        res = nl.ndarray((16,), dtype=a.dtype, buffer=nl.shared_hbm, name="res")
        m = nl.ndarray(meta.shape, dtype=meta.dtype, buffer=nl.shared_hbm, name="meta")
        nisa.dma_copy(buf, a)
        nisa.dma_copy(m, meta)
        nisa.dma_copy(res, a.ap([[0, 16]]))  # every slot starts as a[0]: untouched elements keep it
        cc.all_gather_v([buf], [res], cc.ReplicaGroup([[0, 1, 2, 3]]), m)
        out = nl.ndarray((16,), dtype=a.dtype, buffer=nl.shared_hbm)
        counts = nl.ndarray(meta.shape, dtype=meta.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(out, res)
        nisa.dma_copy(counts, m)
        return out, counts

    xs = [np.arange(4, dtype=np.float32) + 10 * r for r in range(4)]
    metas = []
    for count, displ in sends:
        m = np.zeros((3, 4), np.uint32)
        m[0, 0], m[1, 0] = count, displ
        metas.append(m)
    outs = knit.simulate(kernel, ranks=4)(xs, metas)
    for r, (out, counts) in enumerate(outs):
        want = np.full(16, xs[r][0], np.float32)
        for s, (count, displ) in enumerate(sends):
            want[4 * s: 4 * s + count] = xs[s][displ: displ + count]
        np.testing.assert_array_equal(out, want)
        np.testing.assert_array_equal(counts[2], [c for c, _ in sends])


def test_mismatched_collectives_name_both_lines():
    kernel = hbm_kernel(lambda s, d: cc.all_reduce([s], [d], cc.ReplicaGroup([[0, 1]]),
                                                   nl.add if _rank_is_zero() else nl.maximum), (2, 2))
    with pytest.raises(KnitError, match="collective-mismatch|maximum|same collectives") as e:
        knit.simulate(kernel, ranks=2)(np.ones((2, 2), np.float32))
    assert "test_collectives.py" in str(e.value)


def _rank_is_zero():
    from knit import _trace
    return _trace.current().rank == 0


def test_missing_rank_deadlocks_with_each_rank_named():
    kernel = hbm_kernel(lambda s, d: None if _rank_is_zero() else cc.all_reduce([s], [d], cc.ReplicaGroup([[0, 1]]),
                                                                                  nl.add), (2, 2))
    with pytest.raises(KnitError, match="wait for each other forever") as e:
        knit.simulate(kernel, ranks=2)(np.ones((2, 2), np.float32))
    assert "rank 0: finished" in str(e.value) and "rank 1: waits at collective" in str(e.value)


@pytest.mark.parametrize("groups,match", [
    ([[0, 1], [1, 2]], "appears twice"),
    ([[0, 1, 2], [3]], "different lengths"),
    ([[0, 5]], "names rank 5"),
    ([[1]], "in no rank list"),
])
def test_bad_replica_groups(groups, match):
    kernel = hbm_kernel(lambda s, d: cc.all_reduce([s], [d], cc.ReplicaGroup(groups), nl.add), (2, 2))
    with pytest.raises(KnitError, match=match):
        knit.simulate(kernel, ranks=2 if match != "appears twice" else 3)(np.ones((2, 2), np.float32))


def test_all_gather_wrong_dst_shape_says_the_right_one():
    kernel = hbm_kernel(lambda s, d: cc.all_gather([s], [d], cc.ReplicaGroup([[0, 1]]), 0), (2, 3))
    with pytest.raises(KnitError, match=r"needs \[4, 3\]"):
        knit.simulate(kernel, ranks=2)(np.ones((2, 3), np.float32))


def test_reduce_with_a_non_reduction_op_is_refused():
    kernel = hbm_kernel(lambda s, d: cc.all_reduce([s], [d], cc.ReplicaGroup([[0, 1]]), nl.multiply), (2, 2))
    with pytest.raises(KnitError, match="nl.add, nl.minimum or nl.maximum"):
        knit.simulate(kernel, ranks=2)(np.ones((2, 2), np.float32))


def partly_written_gather(rows_out):
    """Rank 1 writes only row 0 of its buffer; all_gather; the first rows_out rows come back."""
    @knit.jit
    def kernel(a):
        buf = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="buf")
        res = nl.ndarray((2 * a.shape[0], a.shape[1]), dtype=a.dtype, buffer=nl.shared_hbm, name="res")
        if _rank_is_zero():
            nisa.dma_copy(buf, a)
        else:
            nisa.dma_copy(buf[0:1, :], a[0:1, :])
        cc.all_gather([buf], [res], cc.ReplicaGroup([[0, 1]]), 0)
        out = nl.ndarray((rows_out, a.shape[1]), dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(out, res[0:rows_out, :])
        return out
    return kernel


def test_never_written_src_poisons_only_what_it_reaches():
    """Rank 1's unwritten row lands in row 3 of the gathered tensor: the rows from rank 0 are
    clean, and returning all four rows reports the never-written read."""
    outs = knit.simulate(partly_written_gather(2), ranks=2)(np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(outs[0], np.ones((2, 3)))
    with pytest.raises(KnitError, match="never-written"):
        knit.simulate(partly_written_gather(4), ranks=2)(np.ones((2, 3), np.float32))


def variable_kernel(kind, dst_size):
    @knit.jit
    def kernel(a, meta):
        buf = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name="buf")
        res = nl.ndarray((dst_size,), dtype=a.dtype, buffer=nl.shared_hbm, name="res")
        m = nl.ndarray(meta.shape, dtype=meta.dtype, buffer=nl.shared_hbm, name="meta")
        nisa.dma_copy(buf, a)
        nisa.dma_copy(m, meta)
        nisa.dma_copy(res, a.ap([[0, dst_size]]))  # every slot starts as a[0]: untouched elements keep it
        kind([buf], [res], cc.ReplicaGroup([list(range(meta.shape[1]))]), m)
        out = nl.ndarray((dst_size,), dtype=a.dtype, buffer=nl.shared_hbm)
        counts = nl.ndarray(meta.shape, dtype=meta.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(out, res)
        nisa.dma_copy(counts, m)
        return out, counts
    return kernel


def test_all_to_all_v_example():
    """nki-0.6-additions.md §3.6's example: 3 ranks, dst 12 elements (slots of 4)."""
    srcs = [np.arange(1, 7, dtype=np.float32), np.arange(7, 10, dtype=np.float32),
            np.array([10, 11], np.float32)]
    counts, displs = [[1, 2, 3], [2, 0, 1], [0, 1, 1]], [[0, 1, 3], [0, 2, 2], [0, 0, 1]]
    metas = [np.array([c, d, [0, 0, 0]], np.uint32) for c, d in zip(counts, displs)]
    srcs = [np.pad(s, (0, 6 - len(s))) for s in srcs]  # one src shape for every rank
    outs = knit.simulate(variable_kernel(cc.all_to_all_v, 12), ranks=3)(srcs, metas)
    want = {0: {0: [1], 4: [7, 8]}, 1: {0: [2, 3], 8: [10]}, 2: {0: [4, 5, 6], 4: [9], 8: [11]}}
    for r, (out, meta) in enumerate(outs):
        expect = np.full(12, srcs[r][0], np.float32)
        for at, values in want[r].items():
            expect[at: at + len(values)] = values
        np.testing.assert_array_equal(out, expect)
        np.testing.assert_array_equal(meta[2], [counts[s][r] for s in range(3)])


@pytest.mark.parametrize("n", RANKS)
def test_all_to_all_v_random_counts(n):
    rng = np.random.default_rng(n)
    slot = 5
    srcs = [rng.standard_normal(4 * n).astype(np.float32) for _ in range(n)]
    counts = rng.integers(0, slot + 1, size=(n, n))
    displs = rng.integers(0, 4 * n - slot + 1, size=(n, n))
    metas = [np.array([counts[s], displs[s], np.zeros(n)], np.uint32) for s in range(n)]
    outs = knit.simulate(variable_kernel(cc.all_to_all_v, slot * n), ranks=n)(srcs, metas)
    for r, (out, meta) in enumerate(outs):
        expect = np.full(slot * n, srcs[r][0], np.float32)
        for s in range(n):
            c, d = counts[s][r], displs[s][r]
            expect[s * slot: s * slot + c] = srcs[s][d: d + c]
        np.testing.assert_array_equal(out, expect)
        np.testing.assert_array_equal(meta[2], counts[:, r])


def test_variable_count_beyond_the_slot_is_an_error():
    metas = [np.array([[3, 0], [0, 0], [0, 0]], np.uint32), np.zeros((3, 2), np.uint32)]
    with pytest.raises(KnitError, match="receive slot of 2"):
        knit.simulate(variable_kernel(cc.all_to_all_v, 4), ranks=2)([np.ones(4, np.float32)] * 2, metas)


def test_all_gather_v_rank_rules():
    metas = [np.zeros((3, 2), np.uint32)] * 2
    with pytest.raises(KnitError, match="exactly 4 ranks"):
        knit.simulate(variable_kernel(cc.all_gather_v, 8), ranks=2)([np.ones(4, np.float32)] * 2, metas)
    kernel = variable_kernel(cc.all_gather_v, 8)
    with pytest.raises(KnitError, match="gen3"):
        knit.simulate(kernel, ranks=4).compile([np.ones(4, np.float32)] * 4, [np.zeros((3, 4), np.uint32)] * 4,
                                               target="trn1")


def test_fp8_all_reduce_sums_in_fp32_and_rounds_once():
    """fp8 e4m3 (3 mantissa bits): 1 + 1/16 + 1/16 is 1.125 exactly, which a sum rounded to fp8
    after each step would lose (1 + 1/16 is a tie that rounds back to 1, twice)."""
    import ml_dtypes
    f8 = ml_dtypes.float8_e4m3
    xs = [np.full((2, 4), v, dtype=f8) for v in (1.0, 1 / 16, 1 / 16)]
    kernel = hbm_kernel(lambda s, d: cc.all_reduce([s], [d], cc.ReplicaGroup([[0, 1, 2]]), nl.add), (2, 4))
    for o in knit.simulate(kernel, ranks=3)(xs):
        np.testing.assert_array_equal(o.astype(np.float32), np.full((2, 4), 1.125, np.float32))


@pytest.mark.filterwarnings("ignore:nl.dynamic_range is deprecated")
@pytest.mark.parametrize("n", RANKS)
def test_ring_steps_in_a_device_loop(n):
    """Three ring steps of collective_permute_implicit inside a device loop (one traced body run
    three times): rank r ends with rank (r - 3) mod n's data."""
    @knit.jit
    def kernel(a):
        bufs = [nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm, name=f"ring{i}") for i in range(2)]
        nisa.dma_copy(bufs[0], a)
        for _ in nl.dynamic_range(3):
            cc.collective_permute_implicit([[bufs[0]]], [[bufs[1]]], cc.ReplicaGroup([list(range(n))]))
            nisa.dma_copy(bufs[0], bufs[1])
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(out, bufs[0])
        return out

    xs = inputs(n, (2, 4))
    launch = knit.simulate(kernel, ranks=n)
    for r, o in enumerate(launch(xs)):
        np.testing.assert_array_equal(o, xs[(r - 3) % n])
    assert len(knit.profile(launch, xs).collectives) == 3 * n
