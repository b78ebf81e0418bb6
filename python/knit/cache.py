"""Knit's disk cache: JIT-compiled native code and traced, lowered kernels (docs/jit.md).

The directory is $KNIT_CACHE_DIR, else $XDG_CACHE_HOME/knit, else ~/.cache/knit; KNIT_CACHE=0
turns the cache off. Entries are keyed by a content hash of what changes the code (Knit's
version, the instruction-body library, LLVM's version, the host CPU and its features, and the
instruction shapes), written atomically and checked on load, so stale or corrupt entries are
never used. The folders share a size cap, KNIT_CACHE_MAX_MB (default 1024; 0: none): after each
write the least recently used files go. From the shell: ``knit cache info`` / ``knit cache clear``.
"""
import os
from typing import Any

from . import _core


def directory() -> str:
    """The cache directory (the folder holding objects/, programs/ and pch/), "" when off."""
    objects = _core.native_cache_stats()["directory"]
    return os.path.dirname(objects) if objects else ""


def info() -> dict[str, Any]:
    """dict: the compiled-objects directory ("" when off); the number of entries and bytes of
    compiled objects (precompiled C++ headers included) and of cached programs; the whole cache's
    files and bytes and its cap (`cap_bytes`, 0: none); and what this process compiled / loaded
    from the cache / rejected as corrupt."""
    stats = dict(_core.native_cache_stats())
    files = _core.cache_files(directory())
    programs = [f for f in files if os.path.basename(os.path.dirname(f[0])) == "programs"]
    objects = [f for f in files if f not in programs]
    stats["entries"] = len(objects)
    stats["bytes"] = sum(f[1] for f in objects)
    stats["programs"] = len(programs)
    stats["program_bytes"] = sum(f[1] for f in programs)
    stats["total_files"] = len(files)
    stats["total_bytes"] = stats["bytes"] + stats["program_bytes"]
    stats["cap_bytes"] = _core.cache_size_cap() if directory() else 0
    return stats


def clear() -> int:
    """Delete every cache entry (only files Knit wrote); returns how many were removed. Safe while
    other processes run: they recompile what they miss."""
    removed = 0
    for path, *_ in _core.cache_files(directory()):
        try:
            os.remove(path)
            removed += 1
        except FileNotFoundError:  # another process removed it first
            pass
    return removed
