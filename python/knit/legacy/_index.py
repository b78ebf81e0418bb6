"""G1 index expressions: ``nl.arange`` / ``nl.mgrid`` affine expressions, the predicates built by
comparing them (``mask=``, ``affine_select``), and their lowering to strided access patterns.

An :class:`IndexExpr` is an integer-valued affine function over a broadcast grid, exactly like
the NumPy array ``const + sum_r coefs[r] * arange(sizes[r])`` reshaped to broadcast along grid
dim ``r``. ``nl.arange(128)[:, None]`` is a (128, 1) grid with coefficient 1 on dim 0;
``nl.arange(512)[None, :]`` is a (1, 512) grid; ``i * 128 + i_p`` shifts the constant;
``2 * i_f + 1`` scales a coefficient. Indexing a tensor with such expressions (NumPy advanced
indexing) is an affine access pattern over the broadcast grid, i.e. a Knit ``.ap()`` view.
"""
import numbers
from fractions import Fraction
from math import ceil, floor

from ..errors import user_error


def _is_int(x):
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


class IndexExpr:
    """An affine integer expression over a broadcast index grid (G1 ``nl.arange`` / ``nl.mgrid``)."""

    __slots__ = ("sizes", "coefs", "const")
    __array_ufunc__ = None  # NumPy scalars defer to our reflected operators

    def __init__(self, sizes, coefs, const=0):
        self.sizes = tuple(int(s) for s in sizes)
        self.coefs = tuple(int(c) for c in coefs)
        self.const = int(const)

    # ---- shape -------------------------------------------------------------------------------
    @property
    def shape(self):
        return self.sizes

    @property
    def ndim(self):
        return len(self.sizes)

    def __repr__(self):
        terms = [f"{c}*i{r}[{n}]" for r, (n, c) in enumerate(zip(self.sizes, self.coefs)) if c]
        return f"IndexExpr({' + '.join(terms + [str(self.const)])}, shape={self.sizes})"

    def min_max(self):
        lo = hi = self.const
        for n, c in zip(self.sizes, self.coefs):
            span = c * (n - 1)
            if span < 0:
                lo += span
            else:
                hi += span
        return lo, hi

    def __getitem__(self, key):
        """``[:, None]`` / ``[None, :]`` lifting (and plain slicing of an existing dim)."""
        key = key if isinstance(key, tuple) else (key,)
        if any(k is Ellipsis for k in key):
            at = key.index(Ellipsis)
            used = sum(1 for k in key if k is not None and k is not Ellipsis)
            key = key[:at] + (slice(None),) * (self.ndim - used) + key[at + 1:]
        sizes, coefs, const, dim = [], [], self.const, 0
        for k in key:
            if k is None:
                sizes.append(1)
                coefs.append(0)
                continue
            if dim >= self.ndim:
                raise IndexError(f"too many indices for an index expression of shape {self.sizes}")
            n, c = self.sizes[dim], self.coefs[dim]
            if isinstance(k, slice):
                r = range(n)[k]
                const += c * r.start if len(r) else 0
                sizes.append(len(r))
                coefs.append(c * r.step)
            elif _is_int(k):
                const += c * (k if k >= 0 else k + n)
            else:
                raise IndexError(f"cannot index an index expression with {k!r}")
            dim += 1
        for d in range(dim, self.ndim):
            sizes.append(self.sizes[d])
            coefs.append(self.coefs[d])
        return IndexExpr(sizes, coefs, const)

    # ---- affine arithmetic ---------------------------------------------------------------------
    @staticmethod
    def _lift(x):
        if isinstance(x, IndexExpr):
            return x
        if _is_int(x):
            return IndexExpr((), (), int(x))
        return None

    def _combine(self, other, sign):
        o = IndexExpr._lift(other)
        if o is None:
            return NotImplemented
        rank = max(self.ndim, o.ndim)
        a_sizes = (1,) * (rank - self.ndim) + self.sizes
        a_coefs = (0,) * (rank - self.ndim) + self.coefs
        b_sizes = (1,) * (rank - o.ndim) + o.sizes
        b_coefs = (0,) * (rank - o.ndim) + o.coefs
        sizes, coefs = [], []
        for na, ca, nb, cb in zip(a_sizes, a_coefs, b_sizes, b_coefs):
            if na != nb and na != 1 and nb != 1:
                raise ValueError(f"index expressions of shapes {self.sizes} and {o.sizes} do not broadcast")
            sizes.append(max(na, nb))
            coefs.append(ca + sign * cb)
        return IndexExpr(sizes, coefs, self.const + sign * o.const)

    def __add__(self, o):
        return self._combine(o, 1)

    __radd__ = __add__

    def __sub__(self, o):
        return self._combine(o, -1)

    def __rsub__(self, o):
        r = (-self)._combine(o, 1)
        return r

    def __neg__(self):
        return IndexExpr(self.sizes, [-c for c in self.coefs], -self.const)

    def __pos__(self):
        return self

    def __mul__(self, o):
        if not _is_int(o):
            if isinstance(o, IndexExpr):
                raise TypeError("the product of two index expressions is not affine")
            return NotImplemented
        return IndexExpr(self.sizes, [c * int(o) for c in self.coefs], self.const * int(o))

    __rmul__ = __mul__

    # ---- predicates ----------------------------------------------------------------------------
    def _cmp(self, o, op):
        if IndexExpr._lift(o) is None:
            return NotImplemented
        return Predicate([(self - o, op)])

    def __lt__(self, o): return self._cmp(o, "<")
    def __le__(self, o): return self._cmp(o, "<=")
    def __gt__(self, o): return self._cmp(o, ">")
    def __ge__(self, o): return self._cmp(o, ">=")
    def __eq__(self, o): return self._cmp(o, "==")
    def __ne__(self, o): return self._cmp(o, "!=")

    __hash__ = object.__hash__

    def __bool__(self):
        raise TypeError("an index expression has no truth value (it is a whole grid of indices)")

    def __index__(self):
        raise TypeError("an nl.arange / nl.mgrid index expression cannot be used as a Python int; "
                        "index tensors with it (t[i_p, i_f]) instead")


class Predicate:
    """A conjunction (``&``) of comparisons ``expr <op> 0`` (G1 ``mask=`` / ``affine_select`` pred)."""

    __slots__ = ("terms",)

    def __init__(self, terms):
        self.terms = list(terms)

    def __and__(self, other):
        if isinstance(other, bool):
            return self if other else Predicate([(IndexExpr((), (), 1), "<")])
        if not isinstance(other, Predicate):
            return NotImplemented
        return Predicate(self.terms + other.terms)

    __rand__ = __and__

    def __or__(self, other):
        raise TypeError("G1 masks are conjunctions of comparisons; '|' is not supported")

    __ror__ = __or__

    def __bool__(self):
        raise TypeError("a mask predicate has no truth value; pass it as mask=...")

    def __repr__(self):
        return " & ".join(f"({e!r} {op} 0)" for e, op in self.terms)


def arange(*args):
    """``nl.arange(stop)`` / ``nl.arange(start, stop)`` (step 1): a 1-D index expression; lift it to
    2-D with ``[:, None]`` (partition) or ``[None, :]`` (free) before indexing."""
    if len(args) == 1:
        start, stop = 0, args[0]
    elif len(args) == 2:
        start, stop = args
    elif len(args) == 3:
        start, stop, step = args
        n = len(range(int(start), int(stop), int(step)))
        return IndexExpr((n,), (int(step),), int(start))
    else:
        raise TypeError("nl.arange(stop) or nl.arange(start, stop)")
    start, stop = int(start), int(stop)
    return IndexExpr((max(stop - start, 0),), (1,), start)


class MGridResult(tuple):
    """``nl.mgrid[...]`` result: unpacks into one expression per dim; ``.p`` is dim 0 and ``.x``,
    ``.y``, ``.z`` the following dims."""

    @property
    def p(self):
        return self[0]

    @property
    def x(self):
        return self[1]

    @property
    def y(self):
        return self[2]

    @property
    def z(self):
        return self[3]


class _MGrid:
    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        ranges = []
        for k in key:
            if not isinstance(k, slice):
                raise TypeError("nl.mgrid takes slices: nl.mgrid[0:128, 0:512]")
            start = 0 if k.start is None else int(k.start)
            ranges.append(range(start, int(k.stop), 1 if k.step is None else int(k.step)))
        sizes = [len(r) for r in ranges]
        out = []
        for d, r in enumerate(ranges):
            coefs = [0] * len(ranges)
            coefs[d] = r.step
            out.append(IndexExpr(sizes, coefs, r.start))
        return MGridResult(out)

    def __repr__(self):
        return "nl.mgrid"


mgrid = _MGrid()


# ---- lowering -------------------------------------------------------------------------------------
def has_index_expr(key):
    key = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, IndexExpr) for k in key)


def has_predicate(key):
    key = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, Predicate) for k in key)


def advanced_pattern(key, shape, steps, offset, on_chip, loc):
    """The (pattern, offset) of ``view[key]`` for a key of index expressions and ints over a view of
    `shape` whose dim ``d`` has element step ``steps[d]`` and whose first element is at `offset`."""
    key = key if isinstance(key, tuple) else (key,)
    if len(key) != len(shape):
        raise user_error(
            "view-index",
            f"an index with nl.arange/nl.mgrid expressions must index every dim: got {len(key)} indices for "
            f"a tensor of shape {list(shape)}",
            loc,
        )
    exprs = []
    for d, k in enumerate(key):
        if isinstance(k, IndexExpr):
            exprs.append(k)
        elif _is_int(k):
            exprs.append(IndexExpr((), (), int(k) + (shape[d] if k < 0 else 0)))
        else:
            raise user_error(
                "view-index",
                f"basic indexing ({k!r}) and nl.arange/nl.mgrid index expressions cannot be mixed in one "
                "subscript (G1 rule); use index expressions (or ints) for every dim, or only slices",
                loc,
            )
    rank = max(e.ndim for e in exprs)
    if rank < 2 and on_chip:
        raise user_error(
            "view-index",
            "a 1-D nl.arange cannot index an on-chip tile; lift it to 2-D with nl.arange(n)[:, None] "
            "(partition) or nl.arange(n)[None, :] (free)",
            loc,
        )
    sizes = [1] * rank
    for e in exprs:
        for r, n in enumerate((1,) * (rank - e.ndim) + e.sizes):
            if n != 1:
                if sizes[r] not in (1, n):
                    raise user_error("view-index", f"index expressions of shapes do not broadcast: dim {r} is "
                                     f"{sizes[r]} and {n}", loc)
                sizes[r] = n
    grid_steps = [0] * rank
    base = offset
    # No bounds check here: a mask= may cut the out-of-range part off (G1's ragged last tile); the
    # instruction that uses the view checks the part it really touches.
    for d, e in enumerate(exprs):
        base += steps[d] * e.const
        for r, c in enumerate((0,) * (rank - e.ndim) + e.coefs):
            grid_steps[r] += steps[d] * c
    pattern = []
    for r in range(rank):
        step = grid_steps[r]
        if sizes[r] == 1 and step == 0 and r < len(steps):
            step = steps[r]  # keeps an on-chip partition step exact for a size-1 partition dim
        pattern.append([step, sizes[r]])
    return pattern, base


def box(mask, loc):
    """A mask predicate as a box: {grid dim: (lo, hi)} (hi exclusive; None = unbounded), or False
    when the mask is statically all-false. Only conjunctions of comparisons involving one grid dim each are boxes."""
    if mask is None:
        return {}
    if isinstance(mask, bool):
        return {} if mask else False
    if not isinstance(mask, Predicate):
        raise user_error("mask", f"mask= must be a comparison of nl.arange/nl.mgrid index expressions, got "
                         f"{type(mask).__name__}", loc)
    bounds = {}
    for expr, op in mask.terms:
        dims = [r for r, c in enumerate(expr.coefs) if c != 0]
        if not dims:
            v = expr.const
            ok = {"<": v < 0, "<=": v <= 0, ">": v > 0, ">=": v >= 0, "==": v == 0, "!=": v != 0}[op]
            if not ok:
                return False
            continue
        if len(dims) > 1 or op == "!=":
            raise user_error(
                "unsupported",
                "mask= is supported for rectangular masks only (each comparison bounds one index, e.g. "
                "(i * 128 + i_p < n)); for triangular masks use nisa.affine_select",
                loc,
            )
        r = dims[0]
        c, k = expr.coefs[r], expr.const
        t = Fraction(-k, c)  # the comparison c*g + k (op) 0 is g (op') t
        lo, hi = bounds.get(r, (None, None))
        cmp_ops = [op] if op != "==" else ["<=", ">="]
        for o in cmp_ops:
            if c < 0:
                o = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}[o]
            if o == "<":
                new_lo, new_hi = None, ceil(t)
            elif o == "<=":
                new_lo, new_hi = None, floor(t) + 1
            elif o == ">":
                new_lo, new_hi = floor(t) + 1, None
            else:
                new_lo, new_hi = ceil(t), None
            if new_lo is not None:
                lo = new_lo if lo is None else max(lo, new_lo)
            if new_hi is not None:
                hi = new_hi if hi is None else min(hi, new_hi)
        bounds[r] = (lo, hi)
    return bounds
