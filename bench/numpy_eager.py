"""An eager NumPy interpreter for NKI kernels: the baseline bench/jit_speed.py compares Knit with.

It works the way NKI's own CPU simulator does: the kernel's undecorated Python function runs as
ordinary Python, with ``nl`` / ``nisa`` / ``nki`` in its module's globals temporarily replaced by
the small NumPy implementation below, so every ISA call executes at once as NumPy operations on
NumPy arrays. Arithmetic is fp32; a result is rounded to its destination's dtype when it is stored
(NumPy's cast, round-to-nearest-even for ml_dtypes.bfloat16). There is no engine program, no
scheduling, no race or initialization checking: only the data path, which is what makes it a fair
lower bound for "Python driving NumPy one instruction at a time".

Only the API subset the benchmarked example kernels use is here (tensor_add, softmax, rmsnorm,
layernorm, matmul); anything else raises AttributeError, so a kernel that needs more fails loudly
instead of silently computing something different.

    import numpy_eager
    out = numpy_eager.run(softmax_kernel, x)      # a @nki.jit kernel or a plain function
    numpy_eager.count(softmax_kernel, x)           # {"instructions": ISA calls, "dma_bytes": ...}
"""
import contextlib
import types

import ml_dtypes
import numpy as np

F32 = np.float32


# ---- tensors ---------------------------------------------------------------------------------


class _Alloc:
    """One nl.ndarray allocation; its views share it. Tracks whether a matmul wrote the PSUM tile
    yet, because nc_matmul's default accumulate flag overwrites a fresh PSUM tile and adds after."""

    __slots__ = ("buffer", "matmul_written")

    def __init__(self, buffer):
        self.buffer = buffer
        self.matmul_written = False


class Tensor:
    """A view of a NumPy array: what a kernel sees for an HBM tensor or an SBUF/PSUM tile."""

    __slots__ = ("a", "alloc")

    def __init__(self, array, alloc):
        self.a = array
        self.alloc = alloc

    @property
    def shape(self):
        return self.a.shape

    @property
    def dtype(self):
        return self.a.dtype

    def __getitem__(self, index):  # nl.ds is a plain slice here, so NumPy indexing does the rest
        return Tensor(self.a[index], self.alloc)

    def reshape(self, *shape):
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return Tensor(self.a.reshape(shape), self.alloc)

    def broadcast(self, dim, size):
        """A size-1 dim repeated `size` times (a stride-0 view, as Knit's view_broadcast)."""
        shape = list(self.a.shape)
        shape[dim] = size
        return Tensor(np.broadcast_to(self.a, shape), self.alloc)

    def ap(self, pattern, offset=0):
        """A raw access pattern [[step, count], ...] in elements over the tensor's storage."""
        flat = self.a.reshape(-1)
        item = flat.itemsize
        view = np.lib.stride_tricks.as_strided(flat[offset:], shape=[n for _, n in pattern],
                                               strides=[s * item for s, _ in pattern], writeable=False)
        return Tensor(view, self.alloc)


def _f32(x):
    """An operand as fp32: a Tensor's values, or a Python scalar (immediate)."""
    return x.a.astype(F32, copy=False) if isinstance(x, Tensor) else F32(x)


def _store(dst, values):
    """Write fp32 values to dst, rounding to dst's dtype (NumPy / ml_dtypes cast, RNE)."""
    np.copyto(dst.a, values, casting="unsafe")


def _free_axes(x):
    return tuple(range(1, x.ndim))


# ---- nl: language ----------------------------------------------------------------------------


def _rsqrt(x):
    return F32(1.0) / np.sqrt(x)


class tile_size:  # the same plain ints as knit.language.tile_size (nki-api.md §2.11)
    pmax = 128
    psum_fmax = 512
    gemm_stationary_fmax = 128
    gemm_moving_fmax = 512
    bn_stats_fmax = 512


def ndarray(shape, dtype, buffer=None, name=None, **kwargs):
    return Tensor(np.empty(tuple(shape), dtype=dtype), _Alloc(buffer))


def ds(start, size):
    return slice(start, start + size)


nl = types.SimpleNamespace(
    # buffers, dtypes
    sbuf="sbuf", psum="psum", hbm="hbm", private_hbm="hbm", shared_hbm="shared_hbm",
    float32=np.dtype(np.float32), bfloat16=np.dtype(ml_dtypes.bfloat16), float16=np.dtype(np.float16),
    int32=np.dtype(np.int32), uint8=np.dtype(np.uint8),
    # tensors, indexing, loops (all loops are plain Python loops, as in NKI's simulator)
    ndarray=ndarray, ds=ds, tile_size=tile_size,
    affine_range=range, sequential_range=range, static_range=range,
    # ALU ops are NumPy ufuncs (so op.reduce is the reduction), activations are functions
    add=np.add, subtract=np.subtract, multiply=np.multiply, divide=np.divide,
    maximum=np.maximum, minimum=np.minimum,
    exp=np.exp, square=np.square, rsqrt=_rsqrt, sqrt=np.sqrt, copy=lambda x: x,
)


# ---- nisa: instructions, each executed at once -------------------------------------------------


def dma_copy(dst, src, **kwargs):
    np.copyto(dst.a, src.a, casting="unsafe")


def tensor_copy(dst, src, **kwargs):
    _store(dst, _f32(src))


def memset(dst, value, **kwargs):
    _store(dst, F32(value))


def tensor_tensor(dst, data1, data2, op, **kwargs):
    _store(dst, op(_f32(data1), _f32(data2)))


def _scalar_stage(x, op, operand, reverse):
    # A [P, 1] operand broadcasts along the free dims, as on the Vector Engine.
    y = _f32(operand)
    return op(y, x) if reverse else op(x, y)


def tensor_scalar(dst, data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False, **kwargs):
    x = _scalar_stage(_f32(data), op0, operand0, reverse0)
    if op1 is not None:
        x = _scalar_stage(x, op1, operand1, reverse1)
    _store(dst, x)


def reciprocal(dst, data, **kwargs):
    _store(dst, F32(1.0) / _f32(data))


def tensor_reduce(dst, op, data, axis, negate=False, keepdims=False, **kwargs):
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    r = op.reduce(_f32(data), axis=axes, keepdims=True)
    _store(dst, -r if negate else r)


def activation(dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None, **kwargs):
    """dst = op(data * scale + bias); reduce_res = reduce_op over the free dims of the fp32 result."""
    x = _f32(data)
    if not (isinstance(scale, (int, float)) and scale == 1.0):
        x = x * _f32(scale)
    if bias is not None:
        x = x + _f32(bias)
    y = op(x)
    _store(dst, y)
    if reduce_op is not None:
        _store(reduce_res, reduce_op.reduce(y, axis=_free_axes(y), keepdims=True))


def activation_reduce(dst, op, data, reduce_op, reduce_res, bias=None, scale=1.0, **kwargs):
    activation(dst, op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res)


def nc_matmul(dst, stationary, moving, **kwargs):
    """dst[M, N] (+)= stationary[K, M].T @ moving[K, N] in fp32: the first matmul into a fresh PSUM
    tile overwrites it, the next ones accumulate (Knit's and NKI's default)."""
    product = _f32(stationary).T @ _f32(moving)
    if dst.alloc.matmul_written:
        product = _f32(dst) + product
    dst.alloc.matmul_written = True
    _store(dst, product)


def bn_stats(dst, data, **kwargs):
    """Per partition: (count, mean, sum of squared deviations) of the even and then of the odd
    elements of the flattened free dims, six fp32 values (Knit's layout, exec_select.cpp)."""
    x = _f32(data).reshape(data.shape[0], -1)
    out = np.empty((x.shape[0], 6), F32)
    for parity in (0, 1):
        g = x[:, parity::2]
        n = g.shape[1]
        mean = g.mean(axis=1, dtype=F32) if n else np.zeros(x.shape[0], F32)
        out[:, 3 * parity] = n
        out[:, 3 * parity + 1] = mean
        out[:, 3 * parity + 2] = ((g - mean[:, None]) ** 2).sum(axis=1) if n else 0
    _store(dst, out)


def bn_aggr(dst, data, **kwargs):
    """(mean, population variance) from the (count, mean, m2) triples bn_stats wrote (Chan et al.)."""
    t = _f32(data).reshape(data.shape[0], -1, 3)
    n, means, m2 = t[..., 0], t[..., 1], t[..., 2]
    total = n.sum(axis=1)
    mean = (n * means).sum(axis=1) / total
    var = (m2 + n * (means - mean[:, None]) ** 2).sum(axis=1) / total
    _store(dst, np.stack([mean, var], axis=1))


nisa = types.SimpleNamespace(
    dma_copy=dma_copy, tensor_copy=tensor_copy, memset=memset, tensor_tensor=tensor_tensor,
    tensor_scalar=tensor_scalar, reciprocal=reciprocal, tensor_reduce=tensor_reduce, activation=activation,
    activation_reduce=activation_reduce, nc_matmul=nc_matmul, bn_stats=bn_stats, bn_aggr=bn_aggr,
)
nki = types.SimpleNamespace(jit=lambda fn=None, **kwargs: fn if fn is not None else (lambda f: f),
                            language=nl, isa=nisa)


# ---- running a kernel ------------------------------------------------------------------------


def _undecorated(kernel):
    """The plain Python function behind a @knit.jit kernel (knit's Kernel keeps it as .fn)."""
    return getattr(kernel, "fn", kernel)


@contextlib.contextmanager
def _numpy_globals(fn, isa=nisa):
    """Point every global of fn's module that is knit / knit.language / knit.isa at the NumPy
    stand-ins for the duration of the call, then put the originals back (helper functions of the
    same module see the swap too, because they share the globals dict)."""
    import knit
    import knit.isa
    import knit.language

    top = nki if isa is nisa else types.SimpleNamespace(**dict(vars(nki), isa=isa))
    stand_in = {id(knit): top, id(knit.language): nl, id(knit.isa): isa}
    g = fn.__globals__
    saved = {name: value for name, value in g.items() if id(value) in stand_in}
    try:
        g.update({name: stand_in[id(value)] for name, value in saved.items()})
        yield
    finally:
        g.update(saved)


def run(kernel, *arrays, _isa=nisa, **kwargs):
    """Run `kernel` eagerly on NumPy `arrays`; returns its result(s) as NumPy arrays."""
    fn = _undecorated(kernel)
    args = [Tensor(np.asarray(a), _Alloc("hbm")) if isinstance(a, np.ndarray) else a for a in arrays]
    with _numpy_globals(fn, _isa):
        out = fn(*args, **kwargs)
    if isinstance(out, (tuple, list)):
        return tuple(t.a for t in out)
    return out.a


def count(kernel, *arrays, **kwargs):
    """Runs `kernel` once as run() does and returns {"instructions": the ISA calls it made,
    "dma_bytes": the bytes its dma_copy calls wrote}: the figures Knit's Compiled.last_run and
    Compiled.stats["dma_bytes"] give for its own run (the timed runs use run(), uncounted)."""
    tally = {"instructions": 0, "dma_bytes": 0}

    def counted(name, fn):
        def call(*args, **kw):
            tally["instructions"] += 1
            if name == "dma_copy":
                tally["dma_bytes"] += (kw["dst"] if "dst" in kw else args[0]).a.nbytes
            return fn(*args, **kw)
        return call

    run(kernel, *arrays, _isa=types.SimpleNamespace(**{n: counted(n, f) for n, f in vars(nisa).items()}), **kwargs)
    return tally
