"""Keyword arguments of the public API (knit.isa, knit.language and the legacy facade).

A function accepts exactly the keywords of its NKI signature: a misspelled option
(``tensor_scalar(..., revers1=True)``) would otherwise run with a silently different meaning,
so it is a ``TypeError`` naming the keyword, the function and the closest valid name, raised
before the call does any work and pointing at the kernel's line like every Knit user error.

The few keywords NKI itself accepts without a parameter of that name are listed once, in
``IGNORED`` and ``LEGACY_ONLY`` below."""
import difflib
import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from ._source import user_location
from .errors import NkiValidationError, user_error

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
    base = user_error("unknown-keyword", message, user_location())
    err = UnknownKeywordError(str(base))
    for attr in ("kind", "rule", "message", "file", "line", "column"):
        setattr(err, attr, getattr(base, attr))
    return err


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

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            if kwargs and not valid.issuperset(kwargs):
                for name in [k for k in kwargs if k not in valid]:
                    if name not in extra:
                        raise unknown_keyword(api_name, name, valid)
                    if name in legacy and kwargs[name] is not None:
                        raise _legacy_keyword(api_name, name)
                    del kwargs[name]
            return fn(*args, **kwargs)

        call.__knit_keywords__ = valid | extra  # type: ignore[attr-defined]
        return call  # type: ignore[return-value]

    return decorate
