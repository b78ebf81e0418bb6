"""Where in the user's kernel a call came from, and Knit errors re-raised at that line."""
import contextlib
import contextvars
import functools
import os
import sys
import types

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

# A location pinned by `located_at` (the innermost one wins), or _UNPINNED.
_UNPINNED = object()
_pinned = contextvars.ContextVar("knit_pinned_location", default=_UNPINNED)


@functools.lru_cache(maxsize=4096)
def _inside_knit(code_filename: str) -> bool:
    """Whether a code object's file is in the knit package (cached: called for every frame of
    every traced instruction, and abspath is a system call's worth of string work)."""
    return os.path.abspath(code_filename).startswith(_PACKAGE_DIR + os.sep)


def user_frame():
    """The innermost frame outside the knit package: the kernel's own code (None if there is none)."""
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        if not _inside_knit(frame.f_code.co_filename):
            return frame
        frame = frame.f_back
    return None


def user_location():
    """(file, line, 0) of the kernel's own line: the location pinned by `located_at`, else the
    innermost frame outside the knit package."""
    loc = _pinned.get()
    if loc is not _UNPINNED:
        return loc
    frame = user_frame()
    return None if frame is None else (frame.f_code.co_filename, frame.f_lineno, 0)


@contextlib.contextmanager
def located_at(loc):
    """Inside the block, user_location() is `loc`. A call whose instruction is emitted after it
    returned (a deferred legacy result) pins the line of the user's call while it emits, so the
    instruction and its errors name that line, not the line that happened to trigger the emission."""
    token = _pinned.set(loc)
    try:
        yield
    finally:
        _pinned.reset(token)


def call_at(loc, fn, *args, **kwargs):
    """fn(*args, **kwargs) with user_location() pinned to `loc`: located_at without a context
    manager's cost, for the legacy facade's one-instruction calls."""
    token = _pinned.set(loc)
    try:
        return fn(*args, **kwargs)
    finally:
        _pinned.reset(token)
