"""The disk cache of traced and lowered kernels (docs/jit.md, "The disk cache").

A kernel called in a new process with the same argument shapes, dtypes and constants loads its
engine program (which carries the traced IR) from `<cache dir>/programs` instead of running the
kernel's Python again and lowering it. An entry is valid only while everything it came from is
unchanged: Knit itself (its Python files and the compiled core), the kernel's own source file and
every source file an instruction of the trace comes from (each checked by content hash). Constant
arguments must be plain values (numbers, strings, bools, None, dtypes, tuples of those); a kernel
called with anything else is traced every time. Entries are read and written by Knit's one disk
cache module (codegen/jit/disk_cache.h, through knit._core): atomic writes, a checksum, and the key
each entry was written for, so a corrupt, swapped or copied entry is a miss, never a result.
"""
import glob
import hashlib
import inspect
import io
import json
import os
import sys

import numpy as np

from . import _core
from ._version import __version__

_SUFFIX = ".knp"
_SIMPLE = (int, float, bool, str, type(None), np.dtype, np.generic)


def directory():
    """`<cache dir>/programs`, or None when the cache is off (same rules as the native cache) or
    KNIT_DEBUG asks for the lowering passes' dumps (a loaded program would skip them)."""
    if os.environ.get("KNIT_DEBUG", "0") not in ("", "0"):
        return None
    objects = _core.native_cache_stats()["directory"]
    return os.path.join(os.path.dirname(objects), "programs") if objects else None


def _plain(value):
    if isinstance(value, (tuple, list)):
        return all(_plain(v) for v in value)
    return isinstance(value, _SIMPLE) or (isinstance(value, type) and issubclass(value, np.generic))


def key(fn, memory_key):
    """The entry name for a kernel function and its in-memory compile key, or None when the key
    or the function's free values hold something whose text does not identify it."""
    consts = [k for k in memory_key[3] if k[0] == "const"] + [v for _, v in memory_key[4] if v[0] == "const"]
    if not all(_plain(c[2]) for c in consts):
        return None
    free = _free_values(fn)
    if free is None:
        return None
    text = repr((_knit_identity(), fn.__module__, fn.__qualname__, fn.__code__.co_filename,
                 _file_hash(fn.__code__.co_filename), memory_key, free))
    return hashlib.sha256(text.encode()).hexdigest()


def compiled_key(code_key, name, memory_key):
    """The entry name for kernel `name` of compiled code (a C++ kernel file) whose own cache key
    is `code_key`, and its in-memory compile key; None when the code has no key (cache off). The
    C++ compiler extension's build joins Knit's identity: it holds the IR builder the trace runs."""
    if not code_key:
        return None
    from . import _cppc

    st = os.stat(_cppc.__file__)
    text = repr((_knit_identity(), (st.st_size, st.st_mtime_ns), code_key, name, memory_key))
    return hashlib.sha256(text.encode()).hexdigest()


def _free_values(fn, seen=None):
    """What the kernel's code reads besides its arguments and its own file's text: closure cells,
    default values and the module globals its code names. Plain values enter the key as text;
    functions (and kernels) by their code (bytecode, line, defining file's content hash) and, in
    turn, their own free values; modules not at all. Anything else (an array, an object) makes
    the kernel uncacheable (None)."""
    if not inspect.isfunction(fn):
        return None
    seen = set() if seen is None else seen
    if fn in seen:
        return []
    seen.add(fn)
    code = fn.__code__
    items: list[tuple] = [(code.co_firstlineno, hashlib.sha256(code.co_code).hexdigest())]

    def describe(name, value):
        if _plain(value):
            items.append((name, repr(value)))
            return True
        target = getattr(value, "fn", value)  # a @knit.jit Kernel wraps its function
        if inspect.isfunction(target):
            inner = _free_values(target, seen)
            items.append((name, target.__qualname__, _file_hash(target.__code__.co_filename), inner))
            return inner is not None
        if isinstance(value, type):  # a class: by its defining file
            try:
                items.append((name, value.__qualname__, _file_hash(inspect.getsourcefile(value))))
            except TypeError:  # a built-in class
                items.append((name, value.__qualname__))
            return True
        return inspect.ismodule(value) or inspect.isbuiltin(value)

    for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell (a name assigned later in the enclosing function)
            return None
        if not describe(name, value):
            return None
    for i, value in enumerate(fn.__defaults__ or ()):
        if not describe(f"default{i}", value):
            return None
    for name, value in sorted((fn.__kwdefaults__ or {}).items()):
        if not describe(name, value):
            return None
    for name in sorted(_global_names(code)):
        if name in fn.__globals__ and not describe(name, fn.__globals__[name]):
            return None
    return items


def _global_names(code):
    names = set(code.co_names)
    for const in code.co_consts:  # nested functions, comprehensions
        if inspect.iscode(const):
            names |= _global_names(const)
    return names


def load(name):
    """(program, metadata, constants) of a valid entry, else None. The disk cache module
    (codegen/jit/disk_cache.h) reads the entry: only a regular file of bounded size, whose
    checksum holds and which was written for `name`; anything else is removed with a warning."""
    folder = directory()
    if not folder or not name:
        return None
    body = _core.cache_load(folder, _SUFFIX, name)
    if body is None:
        return None
    try:
        meta_len = int.from_bytes(body[:8], "little")
        meta = json.loads(body[8:8 + meta_len])
        if any(_file_hash(p) != h for p, h in meta["sources"].items()):
            return None  # a source file changed since: trace again (the new entry replaces this one)
        program_end = 8 + meta_len + meta["program_bytes"]
        program = _core.EngineProgram.from_text(body[8 + meta_len:program_end])
        arrays = np.load(io.BytesIO(body[program_end:]), allow_pickle=False) if meta["constants"] else {}
        constants = [(tid, arrays[f"c{i}"]) for i, tid in enumerate(meta["constants"])]
        return program, meta, constants
    except Exception as e:  # noqa: BLE001 - an unreadable entry is a cache miss, never an error
        path = os.path.join(folder, name + _SUFFIX)
        _remove(path)
        sys.stderr.write(f"knit: warning: ignored and removed the cache entry {path}: {e}; it will be rebuilt\n")
        return None


def store(name, program, meta, constants):
    """Write an entry atomically (through the disk cache module); failures only cost speed."""
    folder = directory()
    if not folder or not name:
        return
    text = program.to_text().encode()
    meta = dict(meta, program_bytes=len(text), constants=[tid for tid, _ in constants],
                sources={p: _file_hash(p) for p in program.source_files})
    arrays = io.BytesIO()
    if constants:
        named = {f"c{i}": np.asarray(a) for i, (_, a) in enumerate(constants)}
        np.savez(arrays, **named)  # type: ignore[arg-type]  # numpy's stub takes **kwds as allow_pickle
    meta_bytes = json.dumps(meta).encode()
    # In pieces: the program text (170 bytes an instruction) is written as it is, never copied.
    _core.cache_store(folder, _SUFFIX, name, [len(meta_bytes).to_bytes(8, "little") + meta_bytes, text,
                                              arrays.getvalue()])




_hashes: dict[tuple[str, int, int], str] = {}  # (path, size, mtime) -> sha256


def _file_hash(path):
    """Content hash of a file, memoized by (size, mtime) so a process hashes each file once."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    stamp = (path, st.st_size, st.st_mtime_ns)
    if stamp not in _hashes:
        with open(path, "rb") as f:
            _hashes[stamp] = hashlib.sha256(f.read()).hexdigest()
    return _hashes[stamp]


_identity = None


def _knit_identity():
    """What identifies this Knit build: its version and the size and modification time of its
    Python files and compiled core (a stat each, like Python's own .pyc check: hashing the 2 MB
    core on every start would cost more than the cache saves for small kernels)."""
    global _identity
    if _identity is None:
        here = os.path.dirname(os.path.abspath(__file__))
        files = sorted(glob.glob(os.path.join(here, "*.py"))) + [_core.__file__]
        stamps = []
        for f in files:
            st = os.stat(f)
            stamps.append((os.path.basename(f), st.st_size, st.st_mtime_ns))
        _identity = (__version__, stamps)
    return _identity


def _remove(path):
    try:
        os.remove(path)
    except OSError:
        pass
