"""Property tests of the native path's row walks (simulator/src/native/rows.cpp) and of its
overlap snapshots (executor.cpp) against the reference executors, with hypothesis: a dma_copy
gathering rows through an indirect HBM view, a dma_copy scattering them back through another,
the two within one tensor, and a dma_compute scatter-adding them, over random tables, dtypes,
strided row views (rows that overlap, gaps between elements, an offset) and random indices, some
negative or past the table, with oob_mode error or skip; instructions whose dst overlaps their
input in one tile; and element-wise instructions over views of more walk dims than a compiled
body has.

The JIT backend must give the reference backend's outcome exactly: the same bytes, or the same
error (rule, line and message). It runs as jit-fallback, because a skipped row that lies partly
inside its tensor is one of the few cases the native path leaves to the reference executors.
Every kernel compiles (KNIT_JIT_THRESHOLD=0), and every run that completes is checked, from
`Compiled.last_run`, to have run natively: each instruction it did not is one of those few
cases, listed in `fallbacks` with its reason (a run that ends in an error leaves no counts).
"""
import collections

import ml_dtypes
import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import (  # noqa: E402
    HealthCheck,
    assume,
    given,
    settings,
    strategies as st,  # noqa: E402
)

import knit  # noqa: E402
import knit.isa as nisa  # noqa: E402
import knit.language as nl  # noqa: E402

# ~40 kernels per property: a few seconds; database=None: no .hypothesis/ directory.
SETTINGS = settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
DTYPES = [np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16), np.dtype(np.int32)]


@pytest.fixture(autouse=True)
def _compile_everything(monkeypatch):
    monkeypatch.setenv("KNIT_JIT_THRESHOLD", "0")


def index_tile(idx):
    """Inside a kernel: the [n, 1] int32 index array in SBUF."""
    it = nl.ndarray((idx.shape[0], 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=it, src=idx)
    return it


# What the native path leaves to the reference executors in these kernels (simulator/src/native/
# plan.h): a skipped row partly inside its tensor, and skipped rows moved within one tensor.
ROW_FALLBACKS = ("an oob_mode=skip row lies partly inside its tensor",
                 "it copies between rows of one tensor and skips out-of-range rows")


def assert_ran_natively(counts, allowed=ROW_FALLBACKS):
    """The run's instructions ran natively, except one per `fallbacks` entry whose reason is
    `allowed` (every instruction of these kernels is on a line of its own and runs once)."""
    assert counts["native"] > 0, f"nothing ran natively: {counts}"
    reasons = [f.split(": ", 2)[2] for f in counts["fallbacks"]]
    assert counts["interpreted"] == len(reasons), counts
    assert all(r.startswith(allowed) for r in reasons), counts


def assert_jit_matches_the_reference(kernel, *args):
    """Compiles `kernel` and requires the same outcome from jit-fallback and reference, and a
    jit-fallback run that completes to have run natively; an example whose view the verifier
    rejects statically is not this file's subject (hypothesis draws another)."""
    try:
        c = knit.compile(kernel, *args)
    except knit.NkiValidationError:
        assume(False)
    got = outcome(c, args, "jit-fallback")
    counts = c.last_run
    assert got == outcome(c, args, "reference")
    if got[0] == "ok":
        assert_ran_natively(counts)


def outcome(c, args, backend):
    """('ok', output bytes) or ('error', rule, line, message) of one run; `c.last_run` is then
    that run's counts, or None after an error."""
    c.last_run = None
    try:
        outs = c.run(*args, backend=backend)
    except knit.KnitError as e:
        return ("error", getattr(e, "rule", None), getattr(e, "line", None), str(e))
    outs = outs if isinstance(outs, tuple) else (outs,)
    return ("ok",) + tuple(np.ascontiguousarray(o).tobytes() for o in outs)


RowView = collections.namedtuple("RowView", "R F n count pattern off idx oob")


@st.composite
def row_views(draw):
    """A table [R, F], n indices, a row view of it (`pattern`, `off`: row r is elements off +
    r * row_step + j * elem_step, j < count; rows may overlap or leave gaps) and an oob_mode."""
    R, F = draw(st.integers(4, 20)), draw(st.integers(2, 12))
    n = draw(st.integers(1, 8))
    elem_step = draw(st.sampled_from([1, 1, 2]))
    count = draw(st.integers(1, max(1, F // elem_step)))
    row_step = draw(st.sampled_from([F, F, max(1, F // 2), 2 * F]))
    off = draw(st.integers(0, 3))
    # Mostly rows inside the table (the native path's work), now and then one outside or partly
    # outside (the reference's error, or a skipped row).
    last = max(0, (R * F - 1 - off - (count - 1) * elem_step) // row_step)
    idx = [draw(st.integers(0, last)) if draw(st.integers(0, 9)) < 8 else draw(st.integers(-3, last + 4))
           for _ in range(n)]
    oob = draw(st.sampled_from([nisa.oob_mode.skip, nisa.oob_mode.error]))
    return RowView(R, F, n, count, [[row_step, n], [elem_step, count]], off, np.array(idx, np.int32).reshape(n, 1), oob)


@given(view=row_views(), table_dt=st.sampled_from(DTYPES), tile_dt=st.sampled_from(DTYPES),
       seed=st.integers(0, 2**16))
@SETTINGS
@pytest.mark.slow
def test_gather_and_scatter_rows_match_the_reference(view, table_dt, tile_dt, seed):
    R, F, n, count, pattern, off, idx, oob = view

    @knit.jit
    def kernel(table, idx, init):
        it = index_tile(idx)
        t = nl.ndarray((n, count), tile_dt, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=init)  # skipped rows keep these
        nisa.dma_copy(dst=t, src=table.ap(pattern, offset=off, vector_offset=it, indirect_dim=0), oob_mode=oob)
        out = nl.ndarray(table.shape, table.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=table)
        nisa.dma_copy(dst=out.ap(pattern, offset=off, vector_offset=it, indirect_dim=0), src=t, oob_mode=oob)
        kept = nl.ndarray((n, count), tile_dt, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=kept, src=t)
        return kept, out

    rng = np.random.default_rng(seed)
    table = (rng.standard_normal((R, F)) * 50).astype(table_dt)
    init = (rng.standard_normal((n, count)) * 50).astype(tile_dt)
    assert_jit_matches_the_reference(kernel, table, idx, init)


@given(view=row_views(), direct_at=st.integers(0, 40), scatter=st.booleans(), seed=st.integers(0, 2**16))
@SETTINGS
@pytest.mark.slow
def test_rows_moved_within_one_tensor_match_the_reference(view, direct_at, scatter, seed):
    """A gather from rows of a tensor into a direct view of the same tensor, or a scatter of such
    a view into its rows, the two overlapping or not: the native path reads the source from a
    snapshot of the tensor, as the reference reads it whole before writing."""
    R, F, n, count, pattern, off, idx, oob = view
    direct = [[count, n], [1, count]]  # n rows of `count` elements, back to back
    assume(direct_at + n * count <= R * F)

    @knit.jit
    def kernel(table, idx):
        it = index_tile(idx)
        out = nl.ndarray(table.shape, table.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=table)
        rows = out.ap(pattern, offset=off, vector_offset=it, indirect_dim=0)
        block = out.ap(direct, offset=direct_at)
        nisa.dma_copy(dst=rows if scatter else block, src=block if scatter else rows, oob_mode=oob)
        return out

    table = (np.random.default_rng(seed).standard_normal((R, F)) * 50).astype(np.float32)
    assert_jit_matches_the_reference(kernel, table, idx)


@given(view=row_views(), dst_dt=st.sampled_from(DTYPES[:2]), unique=st.booleans(), seed=st.integers(0, 2**16))
@SETTINGS
@pytest.mark.slow
def test_scatter_add_matches_the_reference(view, dst_dt, unique, seed):
    R, F, n, count, pattern, off, idx, oob = view

    @knit.jit
    def kernel(table, idx, vals):
        it = index_tile(idx)
        v = nl.ndarray((n, count), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=v, src=vals)
        out = nl.ndarray(table.shape, table.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=table)
        rows = out.ap(pattern, offset=off, vector_offset=it, indirect_dim=0)
        nisa.dma_compute(dst=rows, srcs=[rows, v], reduce_op=nl.add, unique_indices=unique, oob_mode=oob)
        return out

    rng = np.random.default_rng(seed)
    table = rng.standard_normal((R, F)).astype(dst_dt)
    vals = rng.standard_normal((n, count)).astype(np.float32)
    assert_jit_matches_the_reference(kernel, table, idx, vals)


@given(P=st.integers(1, 32), F=st.integers(4, 40), width=st.integers(1, 16), src_at=st.integers(0, 24),
       dst_at=st.integers(0, 24), p_shift=st.integers(0, 8), op=st.sampled_from(["copy", "add", "reduce", "act"]),
       dt=st.sampled_from(DTYPES[:2]), seed=st.integers(0, 2**16))
@SETTINGS
@pytest.mark.slow
def test_outputs_overlapping_inputs_match_the_reference(P, F, width, src_at, dst_at, p_shift, op, dt, seed):
    """An instruction whose dst overlaps its input in one tile, shifted along the free dim and
    across partitions (the native path reads the input from a snapshot taken before writing)."""
    assume(src_at + width <= F and dst_at + width <= F and p_shift < P)
    rows = P - p_shift

    @knit.jit
    def kernel(a):
        t = nl.ndarray((P, F), dt, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        src = t[p_shift:P, src_at:src_at + width]
        if op == "copy":
            nisa.tensor_copy(dst=t[0:rows, dst_at:dst_at + width], src=src)
        elif op == "add":
            nisa.tensor_tensor(dst=t[0:rows, dst_at:dst_at + width], data1=src, data2=t[0:rows, 0:width], op=nl.add)
        elif op == "reduce":
            nisa.tensor_reduce(dst=t[0:rows, dst_at:dst_at + 1], op=nl.maximum, data=src, axis=1)
        else:
            nisa.activation(dst=t[0:rows, dst_at:dst_at + width], op=nl.exp, data=src, scale=0.25)
        out = nl.ndarray((P, F), dt, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    a = (np.random.default_rng(seed).standard_normal((P, F)) * 4).astype(dt)
    c = knit.compile(kernel, a)
    got = outcome(c, (a,), "jit")
    counts = c.last_run
    assert got == outcome(c, (a,), "reference")
    assert_ran_natively(counts, allowed=())


def _store_fold(fold):
    """Inside a kernel: a [P, 1] fp32 tile copied to a new HBM tensor."""
    out = nl.ndarray(fold.shape, fold.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=fold)
    return out


@st.composite
def many_dim_views(draw):
    """A tile [P, d1..dk] (k = 4 or 5: 5 or 6 walk dims, more than a body's 4), a permutation of
    its free dims and a step per free dim (a step > 1 keeps dims from merging)."""
    k = draw(st.integers(4, 5))
    dims = [draw(st.integers(1, 4)) for _ in range(k)]
    steps = [draw(st.sampled_from([1, 1, 2])) for _ in range(k)]
    perm = draw(st.permutations(range(1, k + 1)))
    return draw(st.integers(1, 16)), dims, steps, [0, *perm]


@given(view=many_dim_views(), op=st.sampled_from(["copy", "add", "act", "in_place", "act_sum", "scalar_max"]),
       dt=st.sampled_from(DTYPES[:2]), seed=st.integers(0, 2**16))
@SETTINGS
@pytest.mark.slow
def test_element_wise_walks_of_more_dims_than_a_body_match_the_reference(view, op, dt, seed):
    """Element-wise instructions over views needing more walk dims than a body has run natively
    (the executor walks the outer dims around the body) with the reference's bytes: a converting
    copy of a permuted strided view, an add of that view and a dense tile (two different walks),
    an activation, an activation exactly in place on the view, and two with a row fold (an
    activation's row sum, a tensor_scalar's row maximum) that goes on across the outer dims."""
    P, dims, steps, perm = view
    full = [n * s for n, s in zip(dims, steps)]
    shape = [P] + [dims[p - 1] for p in perm[1:]]
    cut = (slice(None),) + tuple(slice(0, f, s) for f, s in zip(full, steps))

    @knit.jit
    def kernel(a):
        t = nl.ndarray(a.shape, dt, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        v = t[cut].permute(*perm)
        out = nl.ndarray(shape, nl.float32 if op == "copy" else dt, buffer=nl.sbuf)
        if op == "copy":
            nisa.tensor_copy(dst=out, src=v)
        elif op == "add":
            dense = nl.ndarray(shape, dt, buffer=nl.sbuf)
            nisa.tensor_copy(dst=dense, src=v)
            nisa.tensor_tensor(dst=out, data1=v, data2=dense, op=nl.add)
        elif op == "act":
            nisa.activation(dst=out, op=nl.exp, data=v, scale=0.5)
        elif op == "in_place":
            nisa.activation(dst=v, op=nl.exp, data=v, scale=0.5)
            nisa.tensor_copy(dst=out, src=v)
        fold = nl.ndarray((P, 1), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=fold, value=0.0)
        if op == "act_sum":
            nisa.activation_reduce(dst=out, op=nl.exp, data=v, reduce_op=nl.add, reduce_res=fold, scale=0.5)
        elif op == "scalar_max":
            nisa.tensor_scalar_reduce(dst=out, data=v, op0=nl.multiply, operand0=-1.5, reduce_op=nl.maximum,
                                      reduce_res=fold)
        hbm = nl.ndarray(shape, out.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=hbm, src=out)
        return hbm, _store_fold(fold)

    a = (np.random.default_rng(seed).standard_normal((P, *full)) * 4).astype(dt)
    try:
        c = knit.compile(kernel, a)
    except knit.NkiValidationError:
        assume(False)
    got = outcome(c, (a,), "jit-strict")
    counts = c.last_run
    assert got == outcome(c, (a,), "reference")
    assert_ran_natively(counts, allowed=())
