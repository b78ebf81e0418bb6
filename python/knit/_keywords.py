"""Keyword arguments of the public API (knit.isa, knit.language and the legacy facade).

A function accepts exactly the keywords of its NKI signature: a misspelled option
(``tensor_scalar(..., revers1=True)``) would otherwise run with a silently different meaning,
so it is a ``TypeError`` naming the keyword, the function and the closest valid name, raised
before the call does any work and pointing at the kernel's line like every Knit user error.

The few keywords NKI itself accepts without a parameter of that name are listed once, in
``IGNORED`` and ``LEGACY_ONLY`` below.

The same wrapper is the API's argument boundary: a value a function cannot use (a string for a
shape, inf for a size, 2**63 for an index, a tensor where a flag belongs) may fail deep inside a
conversion as a bare Python or pybind11 error; the wrapper re-raises it as ArgumentTypeError /
ArgumentValueError (NkiValidationError and TypeError / ValueError at once) at the kernel's line,
naming the function. Errors raised by the user's own code called back from the API (an
``nl.if_else`` branch) pass through unchanged."""
import difflib
import functools
import inspect
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from ._source import _inside_knit, user_location
from .errors import KnitError, NkiValidationError, user_error

F = TypeVar("F", bound=Callable[..., Any])

# Keywords a function takes and ignores because NKI code passes them: {qualified name: names}.
IGNORED: dict[str, tuple[str, ...]] = {
    # nki-samples pass dtype= to the dst-first tensor_copy; the result's type is dst's anyway.
    "nisa.tensor_copy": ("dtype",),
}

# G1 keywords that have no meaning in the current (dst-first) API: accepted when None (code
# that passes mask=None everywhere), an error pointing to the legacy facade otherwise.
LEGACY_ONLY: tuple[str, ...] = ("mask",)


class UnknownKeywordError(NkiValidationError, TypeError):
    """A call passed a keyword argument the function does not have."""


class ArgumentTypeError(NkiValidationError, TypeError):
    """An API function got an argument of a kind it cannot use."""


class ArgumentValueError(NkiValidationError, ValueError):
    """An API function got an argument of the right kind with a value it cannot use."""


# Bare errors of argument conversion, and the public error each becomes.
_CONVERTED: dict[type[Exception], type[NkiValidationError]] = {
    TypeError: ArgumentTypeError, AttributeError: ArgumentTypeError, ValueError: ArgumentValueError,
    OverflowError: ArgumentValueError, KeyError: ArgumentValueError, IndexError: ArgumentValueError}
_BARE = tuple(_CONVERTED)
_LIBRARY_DIRS = tuple({os.path.abspath(p) + os.sep for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)})


def _from_user_code(tb: Any) -> bool:
    """Whether a traceback (from the API wrapper inward) passes through the user's own code: a
    callback the API called. Knit's files and installed libraries (NumPy) are not the user's."""
    tb = tb.tb_next  # the wrapper's own frame
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        library = name.startswith("<") or os.path.abspath(name).startswith(_LIBRARY_DIRS)
        if not _inside_knit(name) and not library:
            return True
        tb = tb.tb_next
    return False


def _converted(api_name: str, e: Exception) -> NkiValidationError | None:
    """The public error for bare error `e` that an argument caused in `api_name`, at the user's
    line; None when `e` is already Knit's or comes from the user's own code."""
    if isinstance(e, KnitError) or _from_user_code(e.__traceback__):
        return None
    cls = next(c for base, c in _CONVERTED.items() if isinstance(e, base))
    text = str(e) if not isinstance(e, KeyError) else repr(e.args[0]) if e.args else "KeyError"
    if "Unable to cast" in text or "incompatible function arguments" in text:  # pybind11's words
        text = "an argument's value is out of range or of the wrong kind for Knit's core"
    return user_error("argument", f"{api_name}(): {text}", user_location(), cls)


def argument_boundary(api_name: str, check_keywords: Callable[[dict[str, Any]], None] | None = None
                      ) -> Callable[[F], F]:
    """Decorator: a bare error of argument conversion escaping the function (not one from the
    user's own callback) becomes ArgumentTypeError / ArgumentValueError at the kernel's line.
    `check_keywords` sees (and may edit) the keyword arguments first. One wrapper frame, so the
    API's warnings keep their stacklevel."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            if check_keywords is not None and kwargs:
                check_keywords(kwargs)
            try:
                return fn(*args, **kwargs)
            except _BARE as e:
                if (public := _converted(api_name, e)) is None:
                    raise
                raise public from e

        return call  # type: ignore[return-value]

    return decorate


def _valid_names(fn: Callable[..., Any]) -> frozenset[str]:
    params = inspect.signature(fn).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        raise AssertionError(f"{fn.__qualname__} takes **kwargs; list its keywords instead")
    keyword_kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return frozenset(p.name for p in params if p.kind in keyword_kinds)


def unknown_keyword(api_name: str, bad: str, valid: frozenset[str]) -> UnknownKeywordError:
    """The error for keyword `bad` of `api_name` (e.g. "nisa.tensor_scalar"), at the user's line."""
    close = difflib.get_close_matches(bad, sorted(valid), n=1)
    hint = f"; did you mean '{close[0]}'?" if close else f" (it takes: {', '.join(sorted(valid)) or 'none'})"
    message = f"{api_name}() got an unexpected keyword argument '{bad}'{hint}"
    return user_error("unknown-keyword", message, user_location(), UnknownKeywordError)


def _legacy_keyword(api_name: str, name: str) -> NkiValidationError:
    return user_error("unsupported", f"{api_name.rpartition('.')[2]}({name}=...) is the legacy (neuronxcc.nki) API; "
                      "use knit.legacy / knit.compat for it, or slice the operands", user_location())


def checked(prefix: str, current_api: bool = True) -> Callable[[F], F]:
    """Decorator: calls with a keyword `fn` does not take raise UnknownKeywordError first.
    `prefix` is the module name users write ("nisa"); `current_api` adds the LEGACY_ONLY
    keywords (accepted only as None)."""

    def decorate(fn: F) -> F:
        api_name = f"{prefix}.{fn.__name__.lstrip('_')}"  # _copy is the function of nl.copy
        ignored = frozenset(IGNORED.get(api_name, ()))
        legacy = frozenset(LEGACY_ONLY) if current_api else frozenset()
        valid = _valid_names(fn)
        extra = ignored | legacy

        def check_keywords(kwargs: dict[str, Any]) -> None:
            if not valid.issuperset(kwargs):
                for name in [k for k in kwargs if k not in valid]:
                    if name not in extra:
                        raise unknown_keyword(api_name, name, valid)
                    if name in legacy and kwargs[name] is not None:
                        raise _legacy_keyword(api_name, name)
                    del kwargs[name]

        call = argument_boundary(api_name, check_keywords)(fn)
        call.__knit_keywords__ = valid | extra  # type: ignore[attr-defined]
        return call

    return decorate
