"""``neuronxcc.nki.compiler`` (G1): allocation directives and compiler switches. Knit places
tensors itself, so every directive is accepted and has no effect: ``ncc.sbuf.mod_alloc(...)``
and friends are plain SBUF/PSUM buffers, the decorators return the kernel unchanged."""
import contextlib as _contextlib

from .. import language as _knl


class _Allocator:
    """``ncc.sbuf`` / ``ncc.psum``: ``alloc(func)``, ``mod_alloc(...)`` and ``auto_alloc()`` all
    return the buffer itself (usable as ``buffer=``)."""

    def __init__(self, buffer):
        self._knit_buffer = buffer

    def alloc(self, func=None, *args, **kwargs):
        return self._knit_buffer

    def mod_alloc(self, *args, **kwargs):
        return self._knit_buffer

    def auto_alloc(self, *args, **kwargs):
        return self._knit_buffer

    def __repr__(self):
        return f"ncc.{self._knit_buffer.name}"


sbuf = _Allocator(_knl.sbuf)
psum = _Allocator(_knl.psum)


def _passthrough(func=None, *args, **kwargs):
    if func is None or not callable(func):
        return lambda f: f
    return func


skip_middle_end_transformations = _passthrough
enable_stack_allocator = _passthrough
force_auto_alloc = _passthrough


def multi_buffer(*args, **kwargs):
    return _contextlib.nullcontext()


def no_reorder(*args, **kwargs):
    return _contextlib.nullcontext()


def allocation_scope(*args, **kwargs):
    return _contextlib.nullcontext()
