"""One dtype-promotion rule (knit/_promotion.py) for both API generations: the result dtype of a
two-input call without dtype= is the same in knit.language and the legacy facade for every pair
of Knit dtypes (and tile-scalar pair), and matches NKI's promotion table (the NKI docs' type
promotion table)."""
import numpy as np
import pytest

import knit
import knit.language as nl
import knit.legacy as legacy
import knit.legacy.language as lnl
from knit._dtypes import ALL
from knit._promotion import promote

PACKED = {"float8_e5m2_x4", "float8_e4m3fn_x4", "float4_e2m1fn_x4"}
NAMES = [n for n in ALL if n not in PACKED]
SCALARS = [True, 2, 1.5, np.float16(2), np.int8(3), np.float32(0.5)]


def _current_results():
    """{(x, y): result dtype name} of nl.add on tiles of every pair of dtypes (and of a tile and
    each scalar), traced by the current API."""
    out = {}

    def kernel(a):
        res = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        tiles = {n: nl.ndarray((2, 4), ALL[n]) for n in NAMES}
        for x in NAMES:
            for y in NAMES:
                out[x, y] = str(nl.add(tiles[x], tiles[y]).dtype)
            for i, s in enumerate(SCALARS):
                out[x, i] = str(nl.add(tiles[x], s).dtype)
        nl.store(res, nl.load(a))
        return res

    knit.compile(kernel, np.ones((2, 4), np.float32))
    return out


def _legacy_results():
    out = {}

    @legacy.jit
    def kernel(a):
        res = lnl.ndarray(a.shape, a.dtype, buffer=lnl.shared_hbm)
        tiles = {n: lnl.ndarray((2, 4), ALL[n]) for n in NAMES}
        for x in NAMES:
            for y in NAMES:
                out[x, y] = str(lnl.add(tiles[x], tiles[y]).dtype)
            for i, s in enumerate(SCALARS):
                out[x, i] = str(lnl.add(tiles[x], s).dtype)
        lnl.store(res, lnl.load(a))
        return res

    knit.compile(kernel, np.ones((2, 4), np.float32))
    return out


def test_both_generations_promote_alike():
    current, g1 = _current_results(), _legacy_results()
    assert len(current) == len(NAMES) * (len(NAMES) + len(SCALARS))
    differ = {k: (current[k], g1[k]) for k in current if current[k] != g1[k]}
    assert not differ, f"knit.language and knit.legacy disagree on (x, y): (current, legacy) {differ}"
    for (x, y), r in current.items():  # symmetric on tile pairs
        if isinstance(y, str):
            assert current[y, x] == r, (x, y)


@pytest.mark.parametrize("packed", sorted(PACKED))
def test_packed_types_take_no_part(packed):
    def kernel(a):
        res = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        with pytest.raises(knit.NkiValidationError, match="packed MX"):
            nl.add(nl.ndarray((2, 4), ALL[packed]), nl.ndarray((2, 4), nl.float32))
        nl.store(res, nl.load(a))
        return res

    @legacy.jit
    def g1(a):
        res = lnl.ndarray(a.shape, a.dtype, buffer=lnl.shared_hbm)
        with pytest.raises(knit.NkiValidationError, match="packed MX"):
            lnl.add(lnl.ndarray((2, 4), lnl.float32), lnl.ndarray((2, 4), ALL[packed]))
        lnl.store(res, lnl.load(a))
        return res

    knit.compile(kernel, np.ones((2, 4), np.float32))
    knit.compile(g1, np.ones((2, 4), np.float32))


# NKI's type promotion table, then Knit's choices where it is silent (the module docstring).
DOCUMENTED = [
    ("float32", "tfloat32", "float32"), ("float32", "bfloat16", "float32"), ("float16", "bfloat16", "float32"),
    ("float8_e4m3", "float16", "float16"), ("float8_e4m3", "bfloat16", "bfloat16"),
    ("float8_e4m3", "float8_e5m2", "bfloat16"), ("int16", "int32", "int32"), ("uint8", "uint16", "uint16"),
    ("uint16", "int32", "int32"), ("int8", "uint8", "int16"), ("int8", "uint16", "int32"),
    ("int32", "uint32", "float32"), ("int32", "float16", "float16"), ("uint8", "float8_e5m2", "float8_e5m2"),
]
KNIT_CHOICES = [
    ("tfloat32", "bfloat16", "float32"), ("tfloat32", "float8_e4m3", "float32"),
    ("float8_e4m3", "float8_e4m3fn", "bfloat16"), ("float8_e4m3fn", "float16", "float16"),
    ("float8_e4m3fn", "float8_e5m2", "bfloat16"), ("float8_e8m0fnu", "bfloat16", "bfloat16"),
    ("float8_e8m0fnu", "float16", "float32"), ("bool", "int8", "int8"), ("bool", "bfloat16", "bfloat16"),
    ("bool", "uint32", "uint32"), ("int8", "uint32", "float32"),
]


@pytest.mark.parametrize("a,b,expected", DOCUMENTED + KNIT_CHOICES)
def test_promotion_table(a, b, expected):
    assert promote(a, b) == expected
    assert promote(b, a) == expected


def test_weak_scalars():
    current = _current_results()
    i_true, i_int, i_float, i_f16 = 0, 1, 2, 3
    assert current["int8", i_int] == "int32"  # int8 tile + 2
    assert current["float16", i_float] == "float32"  # fp16 tile + 1.2
    assert current["bfloat16", i_int] == "bfloat16"
    assert current["uint8", i_true] == "uint8"
    assert current["float16", i_f16] == "float16" and current["float32", i_f16] == "float32"  # np.float16(2)
