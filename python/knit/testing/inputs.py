"""Test inputs by shape and dtype: normal, uniform and edge values.

Every generator is reproducible (a NumPy Generator seeded with `seed`) and returns an array of the
Knit dtype asked for (bf16 / fp8 as ml_dtypes arrays), so the values are exactly what the kernel
receives. Give each input of a test its own seed: equal seeds give equal arrays.
"""
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._dtypes import to_dtype
from .tolerances import finfo


def _numpy_dtype(dtype):
    return np.dtype(to_dtype(dtype).numpy)


def _shape(shape):
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if any(int(s) < 0 for s in shape):
        raise ValueError(f"shape {shape} has a negative dimension")
    return tuple(int(s) for s in shape)


def as_dtype(values, dtype):
    """float64 values in `dtype`: floats round through float32 (as an engine writes them), integers
    round half to even and clip to the type's range."""
    dt = _numpy_dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return np.clip(np.rint(values), info.min, info.max).astype(dt)
    if dt.kind == "b":
        return values != 0
    return values.astype(np.float32).astype(dt)


def normal(shape: int | Sequence[int], dtype: Any = "float32", seed: int = 0, mean: float = 0.0,
           std: float = 1.0) -> np.ndarray:
    """Normally distributed values of `shape`, rounded to `dtype`."""
    rng = np.random.default_rng(seed)
    return as_dtype(rng.normal(mean, std, _shape(shape)), dtype)


def uniform(shape: int | Sequence[int], dtype: Any = "float32", seed: int = 0, low: float = -1.0,
            high: float = 1.0) -> np.ndarray:
    """Values uniform in [low, high) of `shape`, rounded to `dtype`."""
    rng = np.random.default_rng(seed)
    return as_dtype(rng.uniform(low, high, _shape(shape)), dtype)


def special_values(dtype: Any, nan: bool = False, inf: bool = False) -> np.ndarray:
    """The edge values of a float `dtype`: +-0, the smallest and largest subnormals, the smallest
    normal, +-1, the neighbours of 1, the largest finite value (both signs), and NaN / +-inf when
    asked. Integers: 0, +-1, the minimum and the maximum."""
    dt = _numpy_dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return np.array(sorted({0, 1, info.max, info.min} | ({-1} if dt.kind == "i" else set())), dtype=dt)
    if dt.kind == "b":
        return np.array([False, True])
    f = finfo(dtype)
    tiny, sub, big = float(f.tiny), float(f.smallest_subnormal), float(f.max)
    values = [0.0, -0.0, sub, -sub, tiny - sub, tiny, -tiny, 1.0, -1.0, 1.0 + float(f.eps),
              1.0 - float(f.epsneg), big, -big]
    if nan:
        values.append(np.nan)
    if inf:
        if not np.isinf(np.array(np.inf).astype(dt)):
            raise ValueError(f"{to_dtype(dtype)} has no infinity (it becomes NaN); ask for nan=True instead")
        values += [np.inf, -np.inf]
    return np.array(values, dtype=np.float64).astype(dt)


def edge_values(shape: int | Sequence[int], dtype: Any = "float32", seed: int = 0, nan: bool = False,
                inf: bool = False, fraction: float = 0.25) -> np.ndarray:
    """Standard-normal values of `shape` in `dtype` with `fraction` of the elements (and at least
    one of each, when there is room) replaced by special_values(dtype, nan, inf) at random places."""
    shape = _shape(shape)
    rng = np.random.default_rng(seed)
    out = as_dtype(rng.normal(0.0, 1.0, shape), dtype).reshape(-1)
    specials = special_values(dtype, nan=nan, inf=inf)
    count = min(out.size, max(len(specials), int(round(fraction * out.size))))
    places = rng.permutation(out.size)[:count]
    # Cycle through the specials first so each appears once before any repeats.
    repeats = rng.integers(0, len(specials), max(0, count - len(specials)))
    picks = np.concatenate([rng.permutation(len(specials)), repeats])
    out[places] = specials[picks[:count]]
    return out.reshape(shape)
