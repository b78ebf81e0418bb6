"""Comparing kernel results with a reference: assert_close and assert_kernel_close.

An element passes when |actual - expected| <= atol + rtol * |expected| (NumPy's allclose rule),
NaN matches NaN, and an infinity matches only the same infinity. The reference is exact (float64);
where its value overflows the output dtype the expected value is what the hardware writes then
(+-inf, or NaN for float8_e4m3fn, which has no infinity). A failure names the worst elements, their
indices, both values and their distance in ULPs of the output dtype.
"""
from collections.abc import Callable
from typing import Any

import numpy as np

from .._dtypes import to_dtype
from .._kernel import _to_numpy, compile as knit_compile
from .tolerances import Tolerance, round_to, tolerance, ulp_distance

WORST_SHOWN = 8  # elements listed in a failure message


def _as_array(value, what):
    """`value` as a NumPy array (torch tensors and Knit's narrow dtypes included)."""
    if value is None or isinstance(value, (str, bytes, dict)):
        raise TypeError(f"{what} must be an array, got {type(value).__name__}")
    try:
        array, _ = _to_numpy(value)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{what} must be an array: {e}") from None
    if array.dtype.kind not in "biuf" and _knit_name(array.dtype) is None:
        raise TypeError(f"{what} has dtype {array.dtype}, which is not a real number type")
    return array


def _knit_name(dtype):
    """Knit's name for a NumPy dtype (None for dtypes Knit does not store, e.g. float64)."""
    try:
        return str(to_dtype(dtype))
    except TypeError:
        return None


def _expected_in(expected, dtype):
    """The exact reference, except where it overflows `dtype`: there, what writing it produces."""
    if _knit_name(dtype) not in _FLOAT_NAMES:
        return expected
    rounded = round_to(expected, dtype)
    overflow = np.isfinite(expected) & ~np.isfinite(rounded)
    return np.where(overflow, rounded, expected)


def _index(flat, shape):
    return tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()


def _fmt(x):
    return f"{x:.9g}"


def mismatch_report(actual, expected, rtol, atol, name="result", equal_nan=True, tol_note=""):
    """None if `actual` matches `expected` within the tolerance, else the failure message.
    `actual` keeps its dtype (ULPs are counted in it); `expected` is any real array."""
    dtype = actual.dtype
    knit_name = _knit_name(dtype) or str(dtype)
    a = actual.astype(np.float64)
    e = _expected_in(np.asarray(expected, dtype=np.float64), dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a - e)
        allowed = atol + rtol * np.abs(e)
        both_nan = np.isnan(a) & np.isnan(e)
        same_inf = np.isinf(a) & np.isinf(e) & (np.sign(a) == np.sign(e))
        ok = ((diff <= allowed) & np.isfinite(e)) | same_inf | (both_nan if equal_nan else False)
    bad = np.flatnonzero(~ok)
    if bad.size == 0:
        return None
    # Worst first: by how many times the allowed error an element is off (NaN / inf mismatches,
    # infinitely far off, come first, in index order).
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(np.isfinite(diff.flat[bad]), diff.flat[bad] / np.maximum(allowed.flat[bad], 1e-300), np.inf)
    order = bad[np.argsort(-ratio, kind="stable")][:WORST_SHOWN]
    ulps = ulp_distance(a.flat[order], e.flat[order], dtype) if knit_name in _FLOAT_NAMES else None
    shape = actual.shape
    lines = [f"{name} ({knit_name}{list(shape)}) differs from the reference: {bad.size} of {actual.size} elements "
             f"({100 * bad.size / actual.size:.3g}%) exceed |actual - expected| <= atol + rtol * |expected| "
             f"with rtol={rtol:.3g}, atol={fmt_atol(atol)}{tol_note}",
             f"worst {len(order)} (index: actual vs expected, |diff|, allowed"
             f"{', ULPs of ' + knit_name if ulps is not None else ''}):"]
    for n, flat in enumerate(order):
        row = f"  {_index(flat, shape)}: {_fmt(a.flat[flat])} vs {_fmt(e.flat[flat])}, " \
              f"|diff| {_fmt(diff.flat[flat])}, allowed {allowed.flat[flat]:.3g}"
        if ulps is not None:
            row += ", ULPs n/a (NaN)" if ulps[n] < 0 else f", {int(ulps[n])} ULPs"
        lines.append(row)
    if shape:
        lines.append(f"the mismatches lie within [{_bounding_box(bad, shape)}]")
    lines.extend(_nan_inf_notes(a, e, shape, equal_nan))
    if ulps is not None:
        all_ulps = ulp_distance(a.flat[bad], e.flat[bad], dtype)
        worst = int(np.argmax(all_ulps))
        if all_ulps[worst] >= 0:
            lines.append(f"largest ULP distance {int(all_ulps[worst])} at {_index(bad[worst], shape)}")
    return "\n".join(lines)


def fmt_atol(atol):
    """A scalar atol, or the range of a per-element one (e.g. a quantization error bound)."""
    if np.ndim(atol):
        return f"per element {float(np.min(atol)):.3g} to {float(np.max(atol)):.3g}"
    return f"{atol:.3g}"


def _bounding_box(flat, shape):
    """The smallest slice holding every index in `flat`, as "128:200, 0:64" (a tile left out, a
    wrong row or column stands out)."""
    idx = np.unravel_index(flat, shape)
    return ", ".join(f"{int(i.min())}:{int(i.max()) + 1}" for i in idx)


_FLOAT_NAMES = {"float32", "float16", "bfloat16", "float8_e4m3", "float8_e4m3fn", "float8_e5m2"}


def _nan_inf_notes(a, e, shape, equal_nan):
    """Lines counting NaN / inf where only one side has them (the usual sign of a real bug)."""
    notes = []
    for what, test in (("NaN", np.isnan), ("inf", np.isinf)):
        only_actual = np.flatnonzero(test(a) & ~test(e))
        only_expected = np.flatnonzero(test(e) & ~test(a))
        if only_actual.size:
            notes.append(f"{what}: {only_actual.size} in the result where the reference has none "
                         f"(first at {_index(only_actual[0], shape)})")
        if only_expected.size:
            notes.append(f"{what}: {only_expected.size} in the reference where the result has none "
                         f"(first at {_index(only_expected[0], shape)})")
    if not equal_nan and np.isnan(a).any() and np.isnan(e).any():
        notes.append("NaN never equals NaN here (equal_nan=False)")
    return notes


def _as_tuple(value):
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def tolerance_for(dtype, expected, rtol, atol):
    """(Tolerance, note for the message): the defaults of knit.testing.tolerance for `dtype` and
    this reference's scale, with the caller's rtol / atol where given (a given rtol also sets the
    default atol's slope). Dtypes without a default (float64) get fp32's."""
    expected = np.asarray(expected, dtype=np.float64)
    finite = np.abs(expected[np.isfinite(expected)])
    scale = float(finite.max()) if finite.size else 0.0
    name = _knit_name(dtype) or "float32"
    default = tolerance(name, scale)
    if rtol is not None and atol is None:
        default = Tolerance(rtol, default.atol + (rtol - default.rtol) * scale)
    tol = Tolerance(default.rtol if rtol is None else rtol, default.atol if atol is None else atol)
    if atol is not None or not tol.rtol:
        return tol, ""
    return tol, f" (atol = rtol * max|expected| {scale:.4g}{'' if rtol is not None else ', defaults for ' + name})"


def assert_close(actual: Any, expected: Any, rtol: float | None = None, atol: float | None = None,
                 equal_nan: bool = True, name: str = "result") -> None:
    """Assert that `actual` (a kernel result) matches `expected` (a reference) element by element.
    Tuples/lists compare item by item. rtol/atol default to the table for `actual`'s dtype
    (knit.testing.tolerance); one given alone keeps the other's default."""
    __tracebackhide__ = True  # pytest shows the caller's line, not this helper's
    actuals, expecteds = _as_tuple(actual), _as_tuple(expected)
    if len(actuals) != len(expecteds):
        raise AssertionError(f"the kernel returned {len(actuals)} result(s) but the reference {len(expecteds)}")
    for n, (act, exp) in enumerate(zip(actuals, expecteds)):
        label = name if len(actuals) == 1 else f"{name} {n}"
        act = _as_array(act, label)
        exp = _as_array(exp, f"reference for {label}")
        if act.shape != exp.shape:
            raise AssertionError(f"{label} has shape {act.shape} but the reference has shape {exp.shape}")
        tol, note = tolerance_for(act.dtype, exp, rtol, atol)
        report = mismatch_report(act, exp, tol.rtol, tol.atol, name=label, equal_nan=equal_nan, tol_note=note)
        if report:
            raise AssertionError(report)


def reference_inputs(inputs):
    """The inputs as a reference sees them: float arrays as exact float64 copies (every Knit float
    format converts exactly; torch tensors stay torch tensors), everything else unchanged."""
    out = []
    for x in inputs:
        is_torch = type(x).__module__.startswith("torch")
        if isinstance(x, np.ndarray) or is_torch:
            array = _as_array(x, "input")
            if _knit_name(array.dtype) in _FLOAT_NAMES:
                x = array.astype(np.float64)
                if is_torch:  # a torch reference gets torch tensors
                    import torch

                    x = torch.from_numpy(x)
        out.append(x)
    return out


def assert_kernel_close(kernel: Callable[..., Any], reference: Any, *inputs: Any, rtol: float | None = None,
                        atol: float | None = None, target: str | None = None, equal_nan: bool = True,
                        **kwargs: Any) -> Any:
    """Run `kernel` on `inputs` (on `target`, default as knit.compile picks it) and assert its
    result(s) match `reference`: a callable given the same inputs as exact float64 arrays (and the
    same keyword arguments), or the expected array(s) themselves. Returns the kernel's result(s)."""
    __tracebackhide__ = True  # pytest shows the caller's line, not this helper's
    actual = knit_compile(kernel, *inputs, target=target, **kwargs)(*inputs, **kwargs)
    expected = reference(*reference_inputs(inputs), **kwargs) if callable(reference) else reference
    if expected is None:
        raise TypeError("the reference returned None; it must return the expected array(s)")
    name = f"kernel {getattr(kernel, '__name__', 'kernel')}"
    if target:
        name += f" on {target}"
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan, name=name + " output")
    return actual
