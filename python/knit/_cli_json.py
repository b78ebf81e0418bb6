"""`knit COMMAND ... --json`: one JSON document on stdout, the command's result or its error
(docs/cli.md documents every document's keys).

With --json, whatever the text mode would print on stdout (the report, progress lines, a
kernel's own print()s) goes to stderr instead, so stdout holds the one document and nothing else.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import traceback
from collections.abc import Iterator
from typing import Any, NoReturn

from ._kernel_file import UsageError
from .errors import KnitError

SCHEMA_VERSION = 1  # of every document `knit ... --json` prints; docs/cli.md says when it changes


class ArgumentError(UsageError):
    """A command line argparse rejects: its message, and the usage line of the (sub)command."""

    def __init__(self, message: str, prog: str, usage: str):
        super().__init__(message)
        self.prog, self.usage = prog, usage


class Parser(argparse.ArgumentParser):
    """An ArgumentParser that raises ArgumentError instead of printing and exiting, so that
    `--json` can report a bad command line as a JSON error (print_argument_error prints it as
    argparse would)."""

    def error(self, message: str) -> NoReturn:
        raise ArgumentError(message, self.prog, self.format_usage())


def print_argument_error(e: ArgumentError) -> None:
    """What argparse itself prints for a bad command line."""
    sys.stderr.write(e.usage)
    print(f"{e.prog}: error: {e}", file=sys.stderr)


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send Python's and the C++ core's writes to stdout to stderr while the command runs."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no file descriptor 1: nothing below Python to redirect
        saved = None
    if saved is not None:
        os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)


def _known(value: Any) -> Any:
    """None for the core's "unknown" line / column (0) or file ("<unknown>", "")."""
    return None if value in (0, "", "<unknown>") else value


def error_fields(e: BaseException) -> dict[str, Any]:
    """The `error` object of a failed command: kind, rule, message, file, line, column, hint."""
    if isinstance(e, ArgumentError):
        return {"kind": "usage", "rule": "arguments", "message": str(e), "file": None, "line": None, "column": None,
                "hint": e.usage.strip()}
    if isinstance(e, UsageError):
        return {"kind": "usage", "rule": "usage", "message": str(e), "file": None, "line": None, "column": None,
                "hint": None}
    if isinstance(e, KnitError):
        message = getattr(e, "message", None) or str(e)
        return {"kind": getattr(e, "kind", None) or "user", "rule": getattr(e, "rule", None), "message": message,
                "file": _known(getattr(e, "file", None)), "line": _known(getattr(e, "line", None)),
                "column": _known(getattr(e, "column", None)), "hint": None}
    frames = traceback.extract_tb(e.__traceback__)
    where = frames[-1] if frames else None
    return {"kind": "python", "rule": type(e).__name__, "message": str(e),
            "file": where.filename if where else None, "line": where.lineno if where else None,
            "column": None, "hint": None}


def document(command: str | None, report: dict[str, Any], error: BaseException | None) -> str:
    """The command's JSON document: schema_version, command, then its report or its error."""
    head: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "command": command}
    body = {"error": error_fields(error)} if error is not None else report
    return json.dumps(_finite({**head, **body}), indent=2, default=_jsonable, allow_nan=False)


def _finite(value: Any) -> Any:
    """`value` with NaN and infinities as null: JSON has no such numbers (json.dumps would write
    NaN / Infinity, which strict readers reject)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _jsonable(value: Any) -> Any:
    """NumPy scalars and arrays, tuples of a --param value and the like, as JSON can hold them."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return repr(value)
