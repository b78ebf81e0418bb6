"""Property tests of NkiTensor views (the NKI Access Patterns guide) against NumPy, with hypothesis.

A kernel receives an HBM array, applies a random chain of view operations to its input tensor
(subscripts with ints, slices with steps and negative bounds, ``...`` and ``nl.ds``;
``.reshape``, ``.permute``, ``.expand_dim``, ``.squeeze_dim``, ``.broadcast`` of size-1 dims,
``.slice``, ``.select``), and dma_copies the resulting view into a shared_hbm output of the view's
shape. The same chain is applied to the NumPy array with NumPy's basic-indexing semantics and
``np.ascontiguousarray`` of the result must equal the kernel's output.

Knit's rules where they differ from NumPy are modelled explicitly:
  * HBM: an int drops its dim, but a view keeps at least 1 dim (the last dropped dims stay as
    size 1 when everything would be dropped);
  * on-chip (SBUF; tested by dma-ing the input into a tile first and the view out): an int on
    dim 0 (the partition dim) keeps it as size 1, results keep at least 2 dims, and permute /
    broadcast / expand_dim / squeeze_dim / select may not touch dim 0;
  * reshape never copies: it must succeed exactly when NumPy's ``reshape(copy=False)`` succeeds
    (else rule ``view-reshape``);
  * on-chip views may not step across partitions: a view with more than one partition whose
    partition stride differs from the tile's partition size fails at the DMA with
    ``view-partition-step``.
Invalid operations (out-of-range index, broadcast of a dim that is not 1, partition-dim ops on
chip, ...) are drawn now and then; they must raise NkiValidationError with the predicted rule.
"""
import functools

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import (  # noqa: E402
    HealthCheck,
    given,
    settings,
    strategies as st,  # noqa: E402
)

import knit as nki  # noqa: E402
import knit.isa as nisa  # noqa: E402
import knit.language as nl  # noqa: E402

# ~50 kernels per property keep the file at a few seconds; database=None: no .hypothesis/ directory.
SETTINGS = settings(max_examples=50, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
MAX_RANK = 5


class Expected(Exception):
    """The model predicts that Knit rejects the chain with this rule."""

    def __init__(self, rule):
        super().__init__(rule)
        self.rule = rule


# ---- drawing subscripts ---------------------------------------------------------------------


def draw_slice(data, n):
    """A Python slice selecting at least one element of a dim of size n, with start/stop written
    in any of Python's spellings (None, negative, positive)."""
    step = data.draw(st.sampled_from([1, 1, 1, 2, 3, -1, -2]))
    if step > 0:
        start = data.draw(st.integers(0, n - 1))
        stop = data.draw(st.integers(start + 1, n))
        start_s = data.draw(st.sampled_from([start, start - n] + ([None] if start == 0 else [])))
        stop_s = data.draw(st.sampled_from([stop] + ([stop - n] if stop < n else [None])))
    else:
        start = data.draw(st.integers(0, n - 1))
        stop = data.draw(st.integers(-1, start - 1))  # -1: run to the beginning
        start_s = data.draw(st.sampled_from([start, start - n] + ([None] if start == n - 1 else [])))
        stop_s = None if stop == -1 else data.draw(st.sampled_from([stop, stop - n]))
    return slice(start_s, stop_s, step)


def draw_item(data, n):
    kind = data.draw(st.sampled_from(["int", "all", "slice", "ds"]))
    if kind == "int":
        return data.draw(st.integers(-n, n - 1))
    if kind == "all":
        return slice(None)
    if kind == "slice":
        return draw_slice(data, n)
    start = data.draw(st.integers(0, n - 1))
    return nl.ds(start, data.draw(st.integers(1, n - start)))


def draw_key(data, shape):
    """A subscript tuple: items for a prefix of the dims, or `...` followed by items for a suffix."""
    m = data.draw(st.integers(1, len(shape)))
    if data.draw(st.booleans()) or m == len(shape):
        return tuple(draw_item(data, n) for n in shape[:m])
    return (Ellipsis,) + tuple(draw_item(data, n) for n in shape[len(shape) - m:])


# ---- the NumPy model ------------------------------------------------------------------------


def model_index(a, key, on_chip):
    """NumPy version of Knit's t[key]."""
    if Ellipsis in key:
        at = key.index(Ellipsis)
        key = key[:at] + (slice(None),) * (a.ndim - (len(key) - 1)) + key[at + 1:]
    np_key, drop = [], [False] * a.ndim
    for k, item in enumerate(key):
        n = a.shape[k]
        if isinstance(item, nl.ds):
            np_key.append(slice(item.start, item.start + item.size))
        elif isinstance(item, int):
            if not -n <= item < n:
                raise Expected("view-out-of-range")
            i = item % n
            np_key.append(slice(i, i + 1))
            drop[k] = not (on_chip and k == 0)
        else:
            np_key.append(item)
    min_rank = 2 if on_chip else 1
    kept = drop.count(False)
    for k in reversed(range(a.ndim)):
        if kept >= min_rank:
            break
        if drop[k]:
            drop[k] = False
            kept += 1
    r = a[tuple(np_key)]
    assert r.size > 0
    return np.squeeze(r, axis=tuple(k for k in range(a.ndim) if drop[k]))


def model_reshape(a, shape):
    try:
        return np.reshape(a, shape, copy=False)
    except ValueError:
        raise Expected("view-reshape") from None


def apply_np(a, op, on_chip):
    name, args = op
    if name == "index":
        return model_index(a, args[0], on_chip)
    if name == "slice":
        dim, start, end, step = args
        return a[(slice(None),) * (dim % a.ndim) + (slice(start, end, step),)]
    if name == "select":
        dim, index = args
        return a[(slice(None),) * (dim % a.ndim) + (index,)]
    if name == "permute":
        return np.transpose(a, args[0])
    if name == "reshape":
        return model_reshape(a, args[0])
    if name == "expand_dim":
        return np.expand_dims(a, args[0])
    if name == "squeeze_dim":
        return np.squeeze(a, axis=args[0])
    if name == "broadcast":
        dim, size = args
        shape = list(a.shape)
        shape[dim % a.ndim] = size
        return np.broadcast_to(a, shape)
    if name == "invalid":
        raise Expected(args[0])
    raise AssertionError(name)


def apply_knit(t, op):
    name, args = op
    if name == "index":
        return t[args[0]]
    if name == "invalid":
        return apply_knit(t, args[1])
    return getattr(t, name)(*args)


# ---- drawing view operations ----------------------------------------------------------------


@functools.cache
def factorizations(n, max_len):
    """All ordered factorizations of n into at most max_len factors >= 2."""
    if n == 1:
        return ((),)
    if max_len == 0:
        return ()
    out = []
    for f in range(2, n + 1):
        if n % f == 0:
            out += [(f,) + rest for rest in factorizations(n // f, max_len - 1)]
    return tuple(out)


def draw_shape_of(data, n, max_len):
    """A shape with n elements and at most max_len dims (size-1 dims sprinkled in)."""
    factors = data.draw(st.sampled_from(factorizations(n, max(max_len - 1, 1))))
    shape = list(factors)
    while len(shape) < max_len and data.draw(st.integers(0, 3)) == 0:
        shape.insert(data.draw(st.integers(0, len(shape))), 1)
    return shape or [1]


def draw_invalid(data, shape, on_chip):
    """An operation Knit must reject, and the rule it must name."""
    ndim = len(shape)
    options = [("view-out-of-range", ("index", ((shape[0] + data.draw(st.integers(0, 3)),),)))]
    big = [d for d in range(ndim) if shape[d] > 1 and not (on_chip and d == 0)]
    if big:
        d = data.draw(st.sampled_from(big))
        options.append(("view-broadcast", ("broadcast", (d, shape[d] + 1))))
        options.append(("view-squeeze", ("squeeze_dim", (d,))))
    options.append(("view-out-of-range", ("slice", (ndim - 1, 0, shape[-1] + 1, 1))))
    total = int(np.prod(shape))
    options.append(("view-reshape", ("reshape", ([total + 1],))))
    if on_chip:
        options.append(("view-partition-dim", ("expand_dim", (0,))))
        if shape[0] == 1:
            options.append(("view-partition-dim", ("broadcast", (0, 4))))
            options.append(("view-partition-dim", ("squeeze_dim", (0,))))
        if ndim >= 2:
            options.append(("view-partition-dim", ("permute", (list(range(1, ndim)) + [0],))))
            options.append(("view-partition-dim", ("select", (0, 0))))
    rule, op = data.draw(st.sampled_from(options))
    return ("invalid", (rule, op))


def draw_op(data, shape, on_chip):
    ndim = len(shape)
    first = 1 if on_chip else 0  # dims that permute/broadcast/expand/squeeze/select may touch
    kinds = ["index", "slice", "permute", "reshape"]
    if ndim < MAX_RANK:
        kinds.append("expand_dim")
    ones = [d for d in range(first, ndim) if shape[d] == 1]
    if ones:
        kinds.append("broadcast")
        if ndim >= 2:  # (squeezing the only dim would leave a 0-d view, which cannot be copied)
            kinds.append("squeeze_dim")
    if ndim - first >= 1 and ndim >= 2:
        kinds.append("select")
    kind = data.draw(st.sampled_from(kinds + ["invalid"]))
    if kind == "invalid":
        return draw_invalid(data, shape, on_chip)
    if kind == "index":
        return ("index", (draw_key(data, shape),))
    if kind == "slice":
        dim = data.draw(st.integers(-ndim, ndim - 1))
        n = shape[dim]
        start = data.draw(st.integers(0, n - 1))
        end = data.draw(st.integers(start + 1, n))
        return ("slice", (dim, start, end, data.draw(st.integers(1, 3))))
    if kind == "select":
        dim = data.draw(st.integers(first, ndim - 1))
        dim = data.draw(st.sampled_from([dim, dim - ndim]))
        n = shape[dim]
        return ("select", (dim, data.draw(st.integers(-n, n - 1))))
    if kind == "permute":
        rest = data.draw(st.permutations(list(range(first, ndim))))
        return ("permute", (list(range(first)) + list(rest),))
    if kind == "reshape":
        if on_chip:
            new = [shape[0]] + draw_shape_of(data, int(np.prod(shape[1:])), MAX_RANK - 2)
            if len(new) > 2 and data.draw(st.booleans()):
                new[data.draw(st.integers(1, len(new) - 1))] = -1
        else:
            new = draw_shape_of(data, int(np.prod(shape)), MAX_RANK - 1)
            if data.draw(st.booleans()):
                new[data.draw(st.integers(0, len(new) - 1))] = -1
        return ("reshape", (new,))
    if kind == "expand_dim":
        dim = data.draw(st.integers(first, ndim))
        return ("expand_dim", (data.draw(st.sampled_from([dim, dim - ndim - 1])) if dim else 0,))
    if kind == "squeeze_dim":
        return ("squeeze_dim", (data.draw(st.sampled_from(ones)),))
    dim = data.draw(st.sampled_from(ones))
    return ("broadcast", (dim, data.draw(st.integers(1, 4))))


def draw_chain(data, a, on_chip, max_ops=4):
    """(ops, the NumPy result or the Expected error) for a random chain on array a."""
    ops = []
    cur = a
    for _ in range(data.draw(st.integers(1, max_ops))):
        op = draw_op(data, cur.shape, on_chip)
        ops.append(op)
        try:
            cur = apply_np(cur, op, on_chip)
        except Expected as e:
            return ops, e
    return ops, cur


def draw_base_shape(data, on_chip):
    if on_chip:
        return [data.draw(st.integers(1, 6))] + data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=3))
    return data.draw(st.lists(st.integers(1, 6), min_size=1, max_size=4))


# ---- running the chain in a kernel ----------------------------------------------------------


def run_chain(x, ops, on_chip):
    """Traces and runs a fresh kernel that applies `ops` to its input (after staging it in an SBUF
    tile when on_chip) and copies the view out. Returns (output, view shape seen while tracing)."""
    seen = {}

    def kernel(src):
        t = src
        if on_chip:
            t = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=src)
        for op in ops:
            t = apply_knit(t, op)
        seen["shape"] = t.shape
        out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    return nki.jit(kernel)(x), seen.get("shape")


def check_chain(x, ops, expected, on_chip):
    if not isinstance(expected, Expected) and on_chip:
        # Partition step rule: more than one partition must mean the tile's own partition stride.
        per_partition_bytes = x[0].nbytes
        if expected.ndim and expected.shape[0] > 1 and expected.strides[0] != per_partition_bytes:
            expected = Expected("view-partition-step")
    if isinstance(expected, Expected):
        with pytest.raises(nki.NkiValidationError) as info:
            run_chain(x, ops, on_chip)
        assert info.value.rule == expected.rule, f"ops {ops}: {info.value}"
        return
    out, shape = run_chain(x, ops, on_chip)
    assert shape == expected.shape, f"ops {ops}: Knit view shape {shape}, NumPy {expected.shape}"
    np.testing.assert_array_equal(out, np.ascontiguousarray(expected), err_msg=f"ops {ops}")


@SETTINGS
@given(data=st.data())
def test_hbm_view_chain_matches_numpy(data):
    shape = draw_base_shape(data, on_chip=False)
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    ops, expected = draw_chain(data, x, on_chip=False)
    check_chain(x, ops, expected, on_chip=False)


@SETTINGS
@given(data=st.data())
def test_sbuf_view_chain_matches_numpy(data):
    shape = draw_base_shape(data, on_chip=True)
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    ops, expected = draw_chain(data, x, on_chip=True)
    check_chain(x, ops, expected, on_chip=True)


@SETTINGS
@given(data=st.data())
def test_hbm_dst_view_matches_numpy(data):
    """Writes through a view: dma_copy into a permuted / reshaped / expanded view of the output
    (views that cover every element once) equals NumPy assignment through the same view."""
    out_shape = draw_base_shape(data, on_chip=False)
    out_np = np.zeros(out_shape, dtype=np.float32)
    ops, view = [], out_np
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["permute", "reshape", "expand_dim", "squeeze_dim"]))
        if kind == "permute":
            op = ("permute", (list(data.draw(st.permutations(list(range(view.ndim))))),))
        elif kind == "reshape":
            op = ("reshape", (draw_shape_of(data, view.size, MAX_RANK - 1),))
        elif kind == "expand_dim" and view.ndim < MAX_RANK:
            op = ("expand_dim", (data.draw(st.integers(0, view.ndim)),))
        elif kind == "squeeze_dim" and 1 in view.shape and view.ndim > 1:
            op = ("squeeze_dim", (data.draw(st.sampled_from([d for d, n in enumerate(view.shape) if n == 1])),))
        else:
            continue
        try:
            view = apply_np(view, op, on_chip=False)
        except Expected:
            continue  # not expressible without a copy: skip this op
        ops.append(op)
    src = np.arange(view.size, dtype=np.float32).reshape(view.shape) + 1
    view[...] = src

    def kernel(s):
        out = nl.ndarray(tuple(out_shape), dtype=s.dtype, buffer=nl.shared_hbm)
        v = out
        for op in ops:
            v = apply_knit(v, op)
        nisa.dma_copy(dst=v, src=s)
        return out

    got = nki.jit(kernel)(src)
    np.testing.assert_array_equal(got, out_np, err_msg=f"ops {ops}")


# ---- a few fixed cases the properties rely on ------------------------------------------------


def test_fixed_examples():
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    # HBM: every dim indexed by an int keeps one dim of size 1.
    out, shape = run_chain(x, [("index", ((1, 2, 3),))], on_chip=False)
    assert shape == (1,) and out.tolist() == [23.0]
    # On chip: an int on the partition dim keeps it; ints on free dims keep >= 2 dims.
    out, shape = run_chain(x, [("index", ((1, 2, 3),))], on_chip=True)
    assert shape == (1, 1) and out.tolist() == [[23.0]]
    out, shape = run_chain(x, [("index", ((slice(None), 2),))], on_chip=True)
    assert shape == (2, 4)
    np.testing.assert_array_equal(out, x[:, 2])
    # nl.ds and negative steps.
    out, _ = run_chain(x, [("index", ((slice(None, None, -1), nl.ds(1, 2), slice(None, None, -2)),))], on_chip=False)
    np.testing.assert_array_equal(out, x[::-1, 1:3, ::-2])
    # A strided partition dim cannot be expressed on chip (the DMA names the rule).
    x2 = np.arange(4 * 3, dtype=np.float32).reshape(4, 3)
    with pytest.raises(nki.NkiValidationError) as info:
        run_chain(x2, [("index", ((slice(None, None, 2),),))], on_chip=True)
    assert info.value.rule == "view-partition-step"
    out, shape = run_chain(x2, [("index", ((slice(None, None, 2),),))], on_chip=False)
    np.testing.assert_array_equal(out, x2[::2])
