"""Hypothesis strategies of random kernels (docs/reliability.md "Property-based kernel fuzzing").

A kernel is described as plain data (a KernelSpec: shapes and a list of steps) so that hypothesis
can shrink a failing one to a small example, and `build_kernel` turns the description into a
@knit.jit kernel. Every step but `inplace` writes a fresh SBUF tile of shape [P, F] in full (a
memset, then the step writes a window of it), so a valid kernel never reads never-written memory:

  tt      nisa.tensor_tensor over column windows of two tiles (vector or gpsimd engine)
  ts      nisa.tensor_scalar with one or two (op, constant) pairs
  act     nisa.activation with a scale and a bias constant
  reduce  nisa.tensor_reduce of a window into one column
  matmul  nisa.nc_matmul of two windows into PSUM (once, or twice accumulating), copied back
          (partitions 0..M)
  dma     nisa.dma_copy of a window (SBUF to SBUF, strided source allowed)
  copy    nisa.tensor_copy converting to the tile's dtype
  select  nisa.affine_select: a mask from an affine expression of (partition, column)
  loop    a device loop (nl.fori_loop, register iv) applying tensor_scalar chunk by chunk

  gather  rows of an input gathered from HBM (indirect DMA, indices from nisa.iota)
  hbm     a round trip through a private HBM tensor, reading a window back
  inplace tensor_tensor writing a window of an existing tile from windows of the same tile
          (overlapping or not): no new tile; later steps see the tile as it is then

Windows: a column offset and width per operand, or a stride-2 window; compute steps on 128
partitions may work on a quadrant-aligned window of partitions. Tile dtypes: float32, bfloat16,
float16, int32 (conversions round and saturate). Inputs are float32 in [-2, 2]; sqrt, rsqrt and
log of negatives give NaN, which every execution must encode alike. `invalid_kernels` breaks one rule on purpose
(mismatched shapes, a window past the tile, a partition count over 128, a matmul whose
contraction partitions differ, a device while loop that never ends)."""
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

import knit
import knit.isa as nisa
import knit.language as nl

DTYPES = ("float32", "bfloat16", "float16", "int32")
ALU = ("add", "subtract", "multiply", "maximum", "minimum")
ACT = ("exp", "tanh", "sigmoid", "relu", "copy", "square", "sqrt", "rsqrt", "log", "gelu", "silu")  # NaN for x < 0
CMP = ("greater_equal", "greater", "less", "equal", "not_equal")


@dataclass
class KernelSpec:
    p: int  # partitions of every tile
    f: int  # free size of every tile
    steps: list = field(default_factory=list)
    outputs: tuple = ()  # indices of the tiles the kernel returns
    seed: int = 0  # of the input data

    def inputs(self):
        rng = np.random.default_rng(self.seed)
        return [rng.uniform(-2, 2, (self.p, self.f)).astype(np.float32) for _ in range(2)]


def _window(draw, f, width=None):
    """(start, width, step) of a column window inside [0, f)."""
    step = draw(st.sampled_from((1, 1, 1, 2))) if width is None or width * 2 - 1 <= f else 1
    width = width or draw(st.integers(1, (f + step - 1) // step))
    if (width - 1) * step + 1 > f:
        step = 1
    start = draw(st.integers(0, f - ((width - 1) * step + 1)))
    return (start, width, step)


@st.composite
def steps(draw, p, f, dtypes):
    """One step over the tiles so far (their dtypes: 2 inputs first); returns its description."""
    tiles = len(dtypes)
    kind = draw(st.sampled_from(("tt", "ts", "act", "reduce", "matmul", "dma", "copy", "select", "loop", "gather",
                                 "hbm", "inplace")))
    src = lambda: draw(st.integers(0, tiles - 1))  # noqa: E731
    dtype = draw(st.sampled_from(DTYPES))
    fill = draw(st.sampled_from((0.0, 1.0, -3.0 if dtype == "int32" else -3.5)))  # memset: ints for int tiles
    out = _window(draw, f)
    width = out[1]
    rows = (0, p)  # the partitions a compute step works on: all, or a quadrant-aligned window
    if p == 128 and draw(st.booleans()):
        start = draw(st.sampled_from((0, 32, 64, 96)))
        rows = (start, draw(st.sampled_from([h for h in (1, 16, 32, 64) if start + h <= p])))
    common = {"dtype": dtype, "fill": fill, "out": out, "rows": rows}
    if kind == "tt":
        return dict(common, kind=kind, op=draw(st.sampled_from(ALU)), a=src(), b=src(), wa=_window(draw, f, width),
                    wb=_window(draw, f, width), engine=draw(st.sampled_from(("vector", "gpsimd"))))
    if kind == "ts":
        two = draw(st.booleans())
        return dict(common, kind=kind, a=src(), wa=_window(draw, f, width), op0=draw(st.sampled_from(ALU)),
                    c0=draw(st.sampled_from((0.5, -1.25, 3.0))), op1=draw(st.sampled_from(ALU)) if two else None,
                    c1=draw(st.sampled_from((2.0, -0.75))), engine=draw(st.sampled_from(("vector", "gpsimd"))))
    if kind == "act":
        return dict(common, kind=kind, a=src(), wa=_window(draw, f, width), op=draw(st.sampled_from(ACT)),
                    scale=draw(st.sampled_from((1.0, 0.5, -2.0))), bias=draw(st.sampled_from((None, 0.25))))
    if kind == "reduce":
        return dict(common, kind=kind, a=src(), wa=_window(draw, f), op=draw(st.sampled_from(("add", "maximum"))),
                    out=(draw(st.integers(0, f - 1)), 1, 1))
    if kind == "matmul":
        m = draw(st.integers(1, min(p, f)))
        n = draw(st.integers(1, min(f, 512)))  # one PSUM bank of fp32
        # NKI: float inputs only, both fp32 or neither
        a = draw(st.sampled_from([i for i, d in enumerate(dtypes) if d != "int32"]))
        b = draw(st.sampled_from([i for i, d in enumerate(dtypes) if d != "int32" and (d == "float32") ==
                                  (dtypes[a] == "float32")]))
        return dict(common, kind=kind, a=a, b=b, wa=_window(draw, f, m), wb=_window(draw, f, n),
                    out=(draw(st.integers(0, f - n)), n, 1), m=m, again=draw(st.booleans()))
    if kind == "dma":
        return dict(common, kind=kind, a=src(), wa=_window(draw, f, width))
    if kind == "copy":
        return dict(common, kind=kind, a=src(), wa=_window(draw, f, width))
    if kind == "select":
        return dict(common, kind=kind, a=src(), wa=_window(draw, f, width), cmp=draw(st.sampled_from(CMP)),
                    pattern=draw(st.sampled_from((-1, 1, 2))), cm=draw(st.sampled_from((-1, 0, 1))),
                    offset=draw(st.integers(-f, p)), value=draw(st.sampled_from((-9.0, 0.0))))
    if kind == "gather":  # rows of an input gathered from HBM by an index tile from iota
        cm = draw(st.sampled_from((0, 1, -1)))
        offset = {0: draw(st.integers(0, p - 1)), 1: 0, -1: p - 1}[cm]
        return dict(common, kind=kind, table=draw(st.integers(0, 1)), cm=cm, offset=offset, out=(0, f, 1))
    if kind == "inplace":  # tile a's window = op(a's window, b's window): the windows may overlap
        return dict(common, kind=kind, a=src(), b=src(), wa=_window(draw, f, width), wb=_window(draw, f, width),
                    op=draw(st.sampled_from(ALU)))
    if kind == "hbm":  # through a private HBM tensor and back, a window of it
        return dict(common, kind=kind, a=src(), wa=_window(draw, f, width))
    chunk = draw(st.sampled_from([c for c in (1, 2, 4) if f % c == 0]))
    return dict(common, kind="loop", a=src(), chunk=chunk, op=draw(st.sampled_from(ALU)),
                c=draw(st.sampled_from((1.5, -0.5))), out=(0, f, 1))


@st.composite
def valid_kernels(draw, max_steps=6):
    p = draw(st.sampled_from((8, 32, 128)))
    f = draw(st.sampled_from((4, 8, 12, 16, 16, 520)))  # 128 x 520 >= 2^16: the native path splits by rows
    spec = KernelSpec(p, f, seed=draw(st.integers(0, 2**16)))
    dtypes = ["float32", "float32"]
    for _ in range(draw(st.integers(1, max_steps))):
        spec.steps.append(draw(steps(p, f, dtypes)))
        step = spec.steps[-1]
        dtypes.append(dtypes[step["a"]] if step["kind"] == "inplace" else step["dtype"])  # inplace: tile a again
    tiles = 2 + len(spec.steps)
    spec.outputs = tuple(draw(st.lists(st.integers(2, tiles - 1), min_size=1, max_size=2, unique=True)))
    return spec


INVALID = ("tt-shapes", "window-past-end", "too-many-partitions", "matmul-contraction", "dma-shapes", "runaway-loop")


@st.composite
def invalid_kernels(draw):
    """A valid kernel and one rule to break in its last step (build_kernel(spec, breaking=...))."""
    spec = draw(valid_kernels(max_steps=3))
    return spec, draw(st.sampled_from(INVALID))


def _cols(tile, window):
    start, width, step = window
    return tile[:, start:start + (width - 1) * step + 1:step]


def _dt(name):
    return getattr(nl, name)


def _rows(tile, rows):
    return tile[rows[0]:rows[0] + rows[1], :]


def _emit(step, tiles, inputs, p, f):
    """Traces one step; returns the new tile."""
    dst = nl.ndarray((p, f), _dt(step["dtype"]), buffer=nl.sbuf)
    nisa.memset(dst=dst, value=step["fill"])
    kind = step["kind"]
    if kind in ("tt", "ts", "act", "reduce", "dma", "copy"):  # on a window of partitions
        tiles = [_rows(t, step["rows"]) for t in tiles]
        out = _cols(_rows(dst, step["rows"]), step["out"])
    else:
        out = _cols(dst, step["out"])
    a = tiles[step.get("a", 0)]
    if kind == "tt":
        nisa.tensor_tensor(dst=out, data1=_cols(a, step["wa"]), data2=_cols(tiles[step["b"]], step["wb"]),
                           op=getattr(nl, step["op"]), engine=getattr(nisa.engine, step["engine"]))
    elif kind == "ts":
        op1 = getattr(nl, step["op1"]) if step["op1"] else None
        nisa.tensor_scalar(dst=out, data=_cols(a, step["wa"]), op0=getattr(nl, step["op0"]), operand0=step["c0"],
                           op1=op1, operand1=step["c1"] if op1 else None, engine=getattr(nisa.engine, step["engine"]))
    elif kind == "act":
        bias = None
        if step["bias"] is not None:
            bias = nl.ndarray((step["rows"][1], 1), nl.float32, buffer=nl.sbuf)
            nisa.memset(dst=bias, value=step["bias"])
        nisa.activation(dst=out, op=getattr(nl, step["op"]), data=_cols(a, step["wa"]), bias=bias, scale=step["scale"])
    elif kind == "reduce":
        nisa.tensor_reduce(dst=out, op=getattr(nl, step["op"]), data=_cols(a, step["wa"]), axis=1, keepdims=True)
    elif kind == "matmul":
        m, n = step["m"], step["out"][1]
        acc = nl.ndarray((m, n), nl.float32, buffer=nl.psum)
        for _ in range(2 if step["again"] else 1):  # the second one accumulates into the PSUM tile
            nisa.nc_matmul(dst=acc, stationary=_cols(a, step["wa"]), moving=_cols(tiles[step["b"]], step["wb"]))
        nisa.tensor_copy(dst=_cols(dst[0:m, :], step["out"]), src=acc)
    elif kind in ("dma", "copy"):
        (nisa.dma_copy if kind == "dma" else nisa.tensor_copy)(dst=out, src=_cols(a, step["wa"]))
    elif kind == "select":
        nisa.affine_select(dst=out, pattern=[[step["pattern"], step["out"][1]]], channel_multiplier=step["cm"],
                           on_true_tile=_cols(a, step["wa"]), on_false_value=step["value"],
                           cmp_op=getattr(nl, step["cmp"]), offset=step["offset"])
    elif kind == "gather":
        idx = nl.ndarray((p, 1), nl.int32, buffer=nl.sbuf)
        nisa.iota(dst=idx, pattern=[[0, 1]], offset=step["offset"], channel_multiplier=step["cm"])
        table = inputs[step["table"]]
        nisa.dma_copy(dst=dst, src=table.ap([[f, p], [1, f]], offset=0, vector_offset=idx, indirect_dim=0))
    elif kind == "inplace":  # no new tile: writes into tile a, read by later steps as it is then
        nisa.tensor_tensor(dst=_cols(a, step["out"]), data1=_cols(a, step["wa"]), data2=_cols(tiles[step["b"]],
                           step["wb"]), op=getattr(nl, step["op"]))
        return a
    elif kind == "hbm":
        scratch = nl.ndarray((p, f), a.dtype, buffer=nl.hbm)
        nisa.dma_copy(dst=scratch, src=a)
        nisa.dma_copy(dst=out, src=_cols(scratch, step["wa"]))
    else:  # a device loop over column chunks
        c = step["chunk"]
        nl.fori_loop(0, f // c, lambda i: nisa.tensor_scalar(dst=dst[:, nl.ds(i * c, c)], data=a[:, nl.ds(i * c, c)],
                                                             op0=getattr(nl, step["op"]), operand0=step["c"]))
    return dst


def _break(rule, tiles, p, f):
    """Traces one step that breaks `rule` (must raise a Knit error)."""
    a, b = tiles[-1], tiles[0]
    if rule == "tt-shapes":
        dst = nl.ndarray((p, f), nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=dst[:, 0:1], data1=a[:, 0:1], data2=b[:, 0:2] if f > 1 else b, op=nl.add)
    elif rule == "window-past-end":
        nisa.memset(dst=a[:, f - 1:f + 3], value=0.0)
    elif rule == "too-many-partitions":
        big = nl.ndarray((129, f), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=big, value=0.0)
    elif rule == "matmul-contraction":
        half = nl.ndarray((max(1, p // 2), f), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=half, value=1.0)
        acc = nl.ndarray((1, f), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=a[:, 0:1], moving=half)
    elif rule == "runaway-loop":  # a device while loop whose condition never becomes 0
        def body(cond):
            nisa.tensor_scalar(dst=b[:, 0:1], data=b[:, 0:1], op0=nl.add, operand0=1.0)
            return cond

        nl.while_loop(1, body)
    else:
        nisa.dma_copy(dst=a[:, 0:1], src=b)


def build_kernel(spec, breaking=None):
    """The @knit.jit kernel of `spec`; with `breaking`, it ends with a step that breaks that rule."""

    def fuzzed(x, y):
        tiles = []
        for arg in (x, y):
            t = nl.ndarray((spec.p, spec.f), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=arg)
            tiles.append(t)
        for step in spec.steps:
            tiles.append(_emit(step, tiles, (x, y), spec.p, spec.f))
        if breaking:
            _break(breaking, tiles, spec.p, spec.f)
        outs = []
        for i in spec.outputs:
            out = nl.ndarray((spec.p, spec.f), tiles[i].dtype, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=out, src=tiles[i])
            outs.append(out)
        return tuple(outs)

    return knit.jit(fuzzed)
