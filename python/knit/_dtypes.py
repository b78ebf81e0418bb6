"""Knit dtypes: one object per element type that compares equal to its name, its NumPy dtype and
its ml_dtypes type (nki-api.md §2.10), e.g. ``nl.bfloat16 == "bfloat16" == ml_dtypes.bfloat16``.

ml_dtypes is imported only when one of its types is first needed: loading its extension takes
about half a second (ml_dtypes 0.7 with NumPy 2.4), most of `import knit`, and a process that
only uses NumPy's own types (a `knit run` of an fp32 kernel) never needs it."""
import sys

import numpy as np

# Knit name -> NumPy storage dtype. tfloat32 is stored as float32 words (low mantissa bits zero);
# the packed MX types (*_x4) as uint32 words, four sub-elements each (docs/architecture.md).
_NUMPY = {
    "bool": np.dtype(np.bool_),
    "int8": np.dtype(np.int8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "uint8": np.dtype(np.uint8),
    "uint16": np.dtype(np.uint16),
    "uint32": np.dtype(np.uint32),
    "float16": np.dtype(np.float16),
    "float32": np.dtype(np.float32),
    "tfloat32": np.dtype(np.float32),
    "float8_e5m2_x4": np.dtype(np.uint32),
    "float8_e4m3fn_x4": np.dtype(np.uint32),
    "float4_e2m1fn_x4": np.dtype(np.uint32),
}
# The narrow floats NumPy lacks, each stored as the ml_dtypes type of the same name (added to
# _NUMPY on first use). ml_dtypes added e8m0fnu in 0.5; older versions see the raw scale bytes.
_ML_DTYPES = ("bfloat16", "float8_e4m3", "float8_e5m2", "float8_e4m3fn", "float8_e8m0fnu")
_NAMES = list(_NUMPY) + list(_ML_DTYPES)


def _numpy_of(name):
    d = _NUMPY.get(name)
    if d is None:
        import ml_dtypes

        d = _NUMPY[name] = np.dtype(getattr(ml_dtypes, name, np.uint8))
    return d


# Types kept in another type's words: they compare equal only to their names, and a NumPy dtype
# never maps back to them.
_BORROWED_STORAGE = {"tfloat32", "float8_e5m2_x4", "float8_e4m3fn_x4", "float4_e2m1fn_x4"}


class dtype(str):
    """An element type. It is a ``str`` (its Knit name), so it prints, hashes and compares like
    NKI's string dtypes, and it also compares equal to the matching NumPy/ml_dtypes dtype."""

    @property
    def numpy(self):
        return _numpy_of(str(self))

    @property
    def itemsize(self):
        return self.numpy.itemsize

    def __eq__(self, other):
        if isinstance(other, str):
            return str.__eq__(self, _ALIASES.get(other, other))
        try:
            other = np.dtype(other)
        except TypeError:
            return NotImplemented
        if str(self) in _BORROWED_STORAGE:
            return False
        if str(self) in _ML_DTYPES and "ml_dtypes" not in sys.modules:
            return False  # no ml_dtypes type exists yet, so `other` is none of them
        return other == self.numpy

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = str.__hash__

    def __repr__(self):
        return f"knit.language.{str(self)}"


# What a dtype= argument takes (knit._types re-exports it; defined here so that the leaf modules
# below knit._tensor, such as _promotion, can name it too).
DTypeLike = dtype | str | np.dtype | type  # a Knit dtype, its name, a NumPy / ml_dtypes / torch dtype

_ALIASES = {"bool_": "bool", "fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
ALL = {name: dtype(name) for name in _NAMES}


def to_dtype(value, what="dtype"):
    """Knit dtype for a Knit dtype, a name, a NumPy/ml_dtypes dtype or a torch dtype."""
    if isinstance(value, dtype):
        return value
    if isinstance(value, str):
        name = _ALIASES.get(value, value)
        if name in ALL:
            return ALL[name]
    if type(value).__module__ == "torch":  # torch.float32 -> "float32"
        torch_name = str(value).replace("torch.", "")
        name = {"float": "float32", "half": "float16"}.get(torch_name, torch_name)
        if name in ALL:
            return ALL[name]
    try:
        np_dtype = np.dtype(value)
    # NumPy parses some strings as type specs: "0:" is a ValueError, "01" even a SyntaxError
    except (TypeError, ValueError, SyntaxError):
        raise TypeError(f"{what} {value!r} is not a dtype Knit knows") from None
    # (An ml_dtypes dtype means ml_dtypes is loaded; without it, only NumPy's own types can match.)
    for name in _NAMES if "ml_dtypes" in sys.modules else _NUMPY:
        if name not in _BORROWED_STORAGE and _numpy_of(name) == np_dtype:
            return ALL[name]
    raise TypeError(f"{what} {np_dtype} is not supported by Knit (supported: {', '.join(ALL)})")


def storage_dtype(d):
    """The dtype a tensor is stored with: ``d``, except that NKI_PRECISE_FP=0 (read at call time)
    keeps low-precision floats in float32, separating algorithmic error from rounding error."""
    import os

    d = to_dtype(d)
    if os.environ.get("NKI_PRECISE_FP", "1") == "0" and d in ("bfloat16", "float16", "float8_e4m3",
                                                              "float8_e5m2", "float8_e4m3fn", "tfloat32"):
        return ALL["float32"]
    return d
