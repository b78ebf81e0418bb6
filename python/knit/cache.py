"""Knit's disk cache: JIT-compiled native code and traced, lowered kernels (docs/jit.md).

The directory is $KNIT_CACHE_DIR, else $XDG_CACHE_HOME/knit, else ~/.cache/knit; KNIT_CACHE=0
turns the cache off. Entries are keyed by a content hash of what changes the code (Knit's
version, the instruction-body library, LLVM's version, the host CPU and its features, and the
instruction shapes), written atomically and checked on load, so stale or corrupt entries are
never used. From the shell: ``python -c "import knit; knit.cache.clear()"``.
"""
import os
import re
from typing import Any

from . import _core, _program_cache

# What Knit writes in the cache directory: <sha256>.o entries in objects/, precompiled headers
# <sha256>.pch in pch/ (C++ kernel files, docs/cpp.md), and their temporary files.
_ENTRY = re.compile(r"^[0-9a-f]{64}\.(o|pch)(\.tmp\.\d+(\.\d+)?)?$")


def info() -> dict[str, Any]:
    """dict: the compiled-objects directory ("" when off), the number of entries and bytes of
    compiled objects (precompiled C++ headers included) and of cached programs, and what this
    process compiled / loaded from the cache / rejected as corrupt."""
    stats = dict(_core.native_cache_stats())
    objects = _entries(stats["directory"]) + _entries(_pch_directory(stats["directory"]))
    programs = _program_cache.entries()
    stats["entries"] = len(objects)
    stats["bytes"] = sum(_size(p) for p in objects)
    stats["programs"] = len(programs)
    stats["program_bytes"] = sum(_size(p) for p in programs)
    return stats


def clear() -> int:
    """Delete every cache entry (only files Knit wrote); returns how many were removed. Safe while
    other processes run: they recompile what they miss."""
    removed = 0
    objects = _core.native_cache_stats()["directory"]
    for path in _entries(objects) + _entries(_pch_directory(objects)) + _program_cache.entries():
        try:
            os.remove(path)
            removed += 1
        except FileNotFoundError:  # another process removed it first
            pass
    return removed


def _size(path):
    try:
        return os.path.getsize(path)
    except OSError:  # removed meanwhile by another process
        return 0


def _pch_directory(objects):
    return os.path.join(os.path.dirname(objects), "pch") if objects else ""


def _entries(directory):
    if not directory or not os.path.isdir(directory):
        return []
    return [os.path.join(directory, n) for n in os.listdir(directory) if _ENTRY.match(n)]
