"""Build step (python/CMakeLists.txt): precompile <knit/knit.h> into build/pch for C++ kernel
files. A machine that cannot import knit yet (its Python packages not installed) still builds:
the header is then precompiled by the first compile instead, into the disk cache (docs/cpp.md)."""
import sys

try:
    from knit import _cppc
except ImportError as e:
    print(f"knit: <knit/knit.h> not precompiled at build time ({e}); the first C++ kernel compile will do it")
    sys.exit(0)
if not _cppc.precompile_header():
    print("knit: <knit/knit.h> could not be precompiled at build time; the first C++ kernel compile will try")
