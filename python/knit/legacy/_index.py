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

from .._register import RegExpr, check_subscript
from .._tensor import ds
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
        # A rolled loop's index (knit/_rolled.py) keeps the constant symbolic: k * 128 + i_k.
        self.const = const if isinstance(const, RegExpr) else int(const)

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
        if isinstance(x, RegExpr):
            return IndexExpr((), (), x)
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
    # instruction that uses the view checks the part it really touches. A rolled loop's index must
    # stay in bounds in every iteration, or the loop is unrolled (then a mask may cut).
    for d, e in enumerate(exprs):
        if isinstance(e.const, RegExpr):
            lo, hi = e.min_max()
            check_subscript(lo, shape[d], (hi - lo).const + 1)
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


def tile_index_key(key, at, partitions, shape, loc):
    """The key of ``data[idx_tile, ...]`` (the index tile at position `at`, one index per
    partition) for :func:`advanced_pattern`, with the tile replaced by the partition index p: the
    view then reads row p, and making it indirect (ir ``make_indirect``) reads row idx_tile[p]
    instead. With index expressions the tile is a ``[P, 1]`` index array on the partition dim
    (NumPy broadcasting); the other indices may not vary along it, since the indirect row replaces
    that dim's whole step. Without them (``data[idx_tile, :]``, ``data[idx_tile]``), ints and
    slices index the row as in NumPy's ``data[idx, :]``: each slice is a free dim, in order."""
    key = key if isinstance(key, tuple) else (key,)
    rest = [k for d, k in enumerate(key) if d != at]
    advanced = any(isinstance(k, IndexExpr) for k in rest)
    if advanced:
        if any(not isinstance(k, IndexExpr) and not _is_int(k) for k in rest):
            raise user_error("view-index", "with an index tile and nl.arange/nl.mgrid expressions, the other indices "
                             "must be index expressions or ints (G1 rule: no slices among them)", loc)
        rank = max([2] + [k.ndim for k in rest if isinstance(k, IndexExpr)])
        for d, k in enumerate(key):
            if d != at and isinstance(k, IndexExpr) and ((0,) * (rank - k.ndim) + k.coefs)[0] != 0:
                raise user_error("view-index", f"the index of dim {d} varies along the partition dim, whose rows "
                                 "come from the index tile; index within a row with free-dim expressions only (i_f, "
                                 "not i_p)", loc)
        out = list(key)
    else:
        if any(k is Ellipsis for k in key):
            i = next(d for d, k in enumerate(key) if k is Ellipsis)
            key = key[:i] + (slice(None),) * (len(shape) - len(key) + 1) + key[i + 1:]
        key = key + (slice(None),) * (len(shape) - len(key))
        free = sum(1 for d, k in enumerate(key) if d != at and not _is_int(k))
        rank = 1 + max(free, 1)  # on-chip results keep a free dim
        out, g = [], 1
        for d, k in enumerate(key):
            if d == at or _is_int(k):
                out.append(k)
                continue
            if isinstance(k, ds) and _is_int(k.start):
                k = slice(k.start, k.start + k.size)
            if not isinstance(k, slice) or not all(v is None or _is_int(v) for v in (k.start, k.stop, k.step)):
                raise user_error("view-index", f"cannot index a row picked by an index tile with {k!r}; use ints, "
                                 "slices with int bounds or nl.arange/nl.mgrid expressions", loc)
            r = range(shape[d])[k]
            if not len(r):
                raise user_error("view-index", f"the slice {k.start}:{k.stop} of dim {d} (size {shape[d]}) is empty",
                                 loc)
            sizes, coefs = [1] * rank, [0] * rank
            sizes[g], coefs[g] = len(r), r.step
            out.append(IndexExpr(sizes, coefs, r.start))
            g += 1
    out[at] = IndexExpr((partitions,) + (1,) * (rank - 1), (1,) + (0,) * (rank - 1))
    return tuple(out)


class Region:
    """A parsed ``mask=``: ``box`` bounds single indices ({grid dim: (lo, hi)}, hi exclusive, None =
    unbounded; False when the mask is statically all-false) and ``rest`` holds the comparisons that
    are not such bounds (two indices, e.g. ``i_p >= i_f``, or ``!=``). The box is the mask's bounding
    box: instructions run on it, and ``rest`` then picks elements inside it."""

    __slots__ = ("box", "rest")

    def __init__(self, box=None, rest=()):
        self.box = {} if box is None else box
        self.rest = list(rest)

    @property
    def empty(self):
        return self.box is False

    @property
    def masked(self):
        return self.box is False or bool(self.box) or bool(self.rest)

    def bound(self, dim):
        return (None, None) if self.box is False else self.box.get(dim, (None, None))

    def permuted(self, order):
        """The region over a grid whose dim k is this grid's dim order[k] (a transpose)."""
        if self.box is False:
            return Region(False)
        where = {src: k for k, src in enumerate(order)}
        if any(r not in where for r in self.box):
            raise ValueError("the mask bounds a dim the result does not have")
        box = {where[r]: b for r, b in self.box.items()}
        rest = []
        for expr, op in self.rest:
            coefs = [0] * len(order)
            for r, c in enumerate(expr.coefs):
                if c and r not in where:
                    raise ValueError("the mask bounds a dim the result does not have")
                if c:
                    coefs[where[r]] = c
            rest.append((IndexExpr([1] * len(order), coefs, expr.const), op))
        return Region(box, rest)

    def narrowed(self, bounds):
        """This region with extra single-index bounds {dim: (lo, hi)} (operand masks of a matmul)."""
        if self.box is False:
            return self
        box = dict(self.box)
        for r, b in bounds.items():
            box[r] = intersect(box.get(r, (None, None)), b)
        return Region(box, self.rest)


def intersect(a, b):
    """The intersection of two (lo, hi) bounds (None = unbounded)."""
    lo = a[0] if b[0] is None else (b[0] if a[0] is None else max(a[0], b[0]))
    hi = a[1] if b[1] is None else (b[1] if a[1] is None else min(a[1], b[1]))
    return lo, hi


def _holds(v, op):
    return {"<": v < 0, "<=": v <= 0, ">": v > 0, ">=": v >= 0, "==": v == 0, "!=": v != 0}[op]


def _single_bound(c, k, op):
    """The bounds (lo, hi) on g of the comparison c*g + k (op) 0 (c != 0, op not !=)."""
    t = Fraction(-k, c)
    lo, hi = None, None
    for o in ([op] if op != "==" else ["<=", ">="]):
        if c < 0:
            o = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}[o]
        if o == "<":
            lo, hi = intersect((lo, hi), (None, ceil(t)))
        elif o == "<=":
            lo, hi = intersect((lo, hi), (None, floor(t) + 1))
        elif o == ">":
            lo, hi = intersect((lo, hi), (floor(t) + 1, None))
        else:
            lo, hi = intersect((lo, hi), (ceil(t), None))
    return lo, hi


def _terms(mask, loc):
    if not isinstance(mask, Predicate):
        raise user_error("mask", f"mask= must be a comparison of nl.arange/nl.mgrid index expressions, got "
                         f"{type(mask).__name__}", loc)
    return mask.terms


def region(mask, loc):
    """A mask predicate (or None / a bool) as a :class:`Region`."""
    if mask is None:
        return Region()
    if isinstance(mask, bool):
        return Region() if mask else Region(False)
    return region_of_terms(_terms(mask, loc))


def region_of_terms(terms):
    bounds, rest = {}, []
    for expr, op in terms:
        dims = [r for r, c in enumerate(expr.coefs) if c != 0]
        if not dims:
            if not _holds(expr.const, op):
                return Region(False)
            continue
        if len(dims) > 1 or op == "!=":
            rest.append((expr, op))
            continue
        r = dims[0]
        bounds[r] = intersect(bounds.get(r, (None, None)), _single_bound(expr.coefs[r], expr.const, op))
    return Region(bounds, rest)


def shifted(terms, lo):
    """The comparisons over coordinates counted from `lo` (a clipped tile's first element)."""
    out = []
    for expr, op in terms:
        const = expr.const + sum(c * lo[r] for r, c in enumerate(expr.coefs) if r < len(lo))
        out.append((IndexExpr(expr.sizes, expr.coefs, const), op))
    return out


def split_boxes(terms, shape):
    """The elements of a grid of `shape` where every comparison holds, as disjoint boxes (lists of
    (lo, hi) per dim): one index of a two-index comparison is fixed at a time (a triangle becomes a
    box per row), and ``!=`` splits a range in two. The comparisons use at most len(shape) dims."""
    reg = region_of_terms(terms)
    if reg.box is False:
        return []
    box = []
    for r, n in enumerate(shape):
        lo, hi = intersect(reg.box.get(r, (None, None)), (0, n))
        if lo >= hi:
            return []
        box.append((lo, hi))
    if not reg.rest:
        return [box]
    expr, op = reg.rest[0]
    dims = [r for r, c in enumerate(expr.coefs) if c != 0]
    bounded = [(IndexExpr([1] * len(shape), [int(d == r) for d in range(len(shape))], -b), o)
               for r, (lo, hi) in enumerate(box) for b, o in ((lo, ">="), (hi, "<"))]
    if len(dims) == 1:  # a != on one index: below or above the excluded value
        out = []
        for o in ("<", ">"):
            out += split_boxes(bounded + reg.rest[1:] + [(expr, o)], shape)
        return out
    r = dims[0]
    out = []
    for v in range(*box[r]):
        fixed = [(IndexExpr([1] * len(shape), [int(d == r) for d in range(len(shape))], -v), "==")]
        out += split_boxes(bounded + fixed + [_fix(t, r, v) for t in reg.rest], shape)
    return out


def _fix(term, dim, value):
    expr, op = term
    coefs = list(expr.coefs)
    const = expr.const + (coefs[dim] * value if dim < len(coefs) else 0)
    if dim < len(coefs):
        coefs[dim] = 0
    return IndexExpr(expr.sizes, coefs, const), op
