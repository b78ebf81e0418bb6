"""Knit's exceptions. Every error raised while tracing or running a kernel names the kernel's own
file and line, shows it with a caret, names the broken rule and says how to fix it."""
from . import _core
from ._memory_map import MemoryMap, from_capacity_error

# Base class of every Knit error (kind: "user" | "runtime" | "internal", rule, message, file, line).
KnitError = _core.KnitError


class NkiValidationError(KnitError):
    """A kernel broke an NKI rule (shape, dtype, buffer, limit): a user error at the kernel's line."""

    # On a capacity error (rule "capacity"): the SBUF / PSUM placements at the failing point, with
    # the tensor that did not fit (MemoryMap.save_svg draws it). None otherwise.
    memory_map: MemoryMap | None = None


class KnitRuntimeError(KnitError):
    """Running the kernel failed: out-of-bounds access, read of never-written memory."""


class KnitIndexError(KnitRuntimeError, IndexError):
    """An index read at run time (an indirect DMA's row, a gather's element) is out of range; NKI
    raises IndexError there, so this is one too."""


class KnitZeroDivisionError(KnitRuntimeError, ZeroDivisionError):
    """A register division by zero (register_alu divide)."""


class JitFallbackWarning(UserWarning):
    """Under KNIT_BACKEND=jit-fallback some instructions of a kernel ran on the reference executors
    instead of natively: same results, slower. Raised once per instruction and compiled kernel;
    under the default backend (jit) such an instruction is an error instead (docs/jit.md)."""


_PUBLIC = {"user": NkiValidationError, "runtime": KnitRuntimeError}
# Runtime errors whose NKI counterpart is a standard Python exception: also that type.
_RUNTIME_BY_RULE = {
    "out-of-bounds": KnitIndexError,
    "indirect-out-of-bounds": KnitIndexError,
    "register-divide-by-zero": KnitZeroDivisionError,
}


def public_error(e):
    """The public exception for a _core.KnitError, with its attributes."""
    kind = getattr(e, "kind", "")
    cls = _PUBLIC.get(kind, KnitError)
    if kind == "runtime":
        cls = _RUNTIME_BY_RULE.get(getattr(e, "rule", ""), cls)
    out = cls(str(e))
    for attr in ("kind", "rule", "message", "file", "line", "column"):
        setattr(out, attr, getattr(e, attr, None))
    if isinstance(out, NkiValidationError):  # a capacity error's map, or one made already (nested calls)
        out.memory_map = from_capacity_error(e) if hasattr(e, "placements") else getattr(e, "memory_map", None)
    return out


def user_error(rule, message, loc, cls=None):
    """An NkiValidationError (or `cls`, a subclass of it) raised from the Python layer, formatted
    like the C++ ones."""
    file, line = (loc[0], loc[1]) if loc else ("<unknown>", 0)
    text = f"{file}:{line}: error: [{rule}] {message}"
    try:
        with open(file) as f:
            src = f.read().splitlines()[line - 1]
        col = len(src) - len(src.lstrip())
        text += f"\n  {src}\n  {' ' * col}^"
    except (OSError, IndexError):
        pass
    err = (cls or NkiValidationError)(text)
    err.kind, err.rule, err.message, err.file, err.line, err.column = "user", rule, message, file, line, 0
    return err
