"""Kernel files for the knit command line: find the kernels of a Python or C++ file, read the
`knit-run:` lines that give a file's default arguments, and make the inputs a run needs.

A file states how it is run with comment lines the CLI reads (like lit's RUN lines):

    // knit-run: --shape 256x512:bfloat16 --shape 512x512:bfloat16      (C++)
    # knit-run: --shape 300x1024 --shape 1024 --reference "reference"   (Python)

Their flags come before the command line's, so the command line overrides them.
"""
import importlib.util
import os
import re
import shlex
import sys

import numpy as np

from ._dtypes import storage_dtype, to_dtype
from ._kernel import Kernel

CPP_SUFFIXES = (".cpp", ".cc", ".cxx", ".c++")
_DIRECTIVE = re.compile(r"^\s*(?://|#)\s*knit-run:(.*)$")


class UsageError(Exception):
    """A mistake on the command line or in a knit-run line (not in a kernel): the CLI prints it
    and exits with status 2."""


def split_target(spec):
    """'file.py::kernel' -> ('file.py', 'kernel'); 'file.py' -> ('file.py', None)."""
    path, sep, kernel = spec.partition("::")
    return path, (kernel if sep else None)


def directive_args(path):
    """The flags of the file's `knit-run:` comment lines, in order, as an argv list."""
    argv = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                m = _DIRECTIVE.match(line)
                if m:
                    try:
                        argv += shlex.split(m.group(1))
                    except ValueError as e:
                        raise UsageError(f"{path}:{number}: cannot split the knit-run line: {e}") from None
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None
    return argv


def load_kernels(path, cxxflags=()):
    """(kernels {name: Kernel}, module or None, how they were loaded): the kernels a Python file
    defines at module level (its @knit.jit functions), or a C++ file's KNIT_KERNEL-marked ones
    (compiled with the extra `cxxflags`; Clang's warnings are issued as CppCompilerWarnings)."""
    if not os.path.isfile(path):
        raise UsageError(f"no such kernel file: {path}")
    if path.endswith(CPP_SUFFIXES):
        from . import cpp
        loaded = cpp.load(path, cxxflags)
        return dict(loaded.kernels), None, ("C++ file from the disk cache" if loaded.from_cache
                                            else "C++ file compiled by Clang")
    if not path.endswith(".py"):
        raise UsageError(f"{path}: kernel files are Python (.py) or C++ ({', '.join(CPP_SUFFIXES)})")
    module = _import_path(path)
    kernels = {name: value for name, value in vars(module).items()
               if isinstance(value, Kernel) and getattr(value.fn, "__module__", None) == module.__name__}
    return kernels, module, "Python file imported"


def _import_path(path):
    """Import a Python file as a module (its directory on sys.path, as `python file.py` would have
    it, so it can import its neighbours); its `if __name__ == "__main__"` block does not run."""
    path = os.path.abspath(path)
    name = "knit_cli_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None  # a path ending in .py always has a loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, os.path.dirname(path))
    spec.loader.exec_module(module)  # errors in the file propagate with its own traceback
    return module


def pick_kernel(kernels, wanted, path):
    if not kernels:
        hint = ("mark kernels with KNIT_KERNEL(fn)" if path.endswith(CPP_SUFFIXES)
                else "decorate kernels with @knit.jit (or @nki.jit) at module level")
        raise UsageError(f"{path} defines no kernels: {hint}")
    if wanted is None:
        if len(kernels) > 1:
            raise UsageError(f"{path} defines several kernels ({', '.join(sorted(kernels))}); "
                             f"pick one with {path}::NAME")
        return next(iter(kernels.items()))
    if wanted not in kernels:
        raise UsageError(f"{path} has no kernel {wanted!r}; it defines {', '.join(sorted(kernels))}")
    return wanted, kernels[wanted]


def parse_shape(text, default_dtype):
    """'256x512' or '256x512:bfloat16' -> ((256, 512), 'bfloat16'). A bare '512' is 1-D."""
    dims, _, dtype = text.partition(":")
    try:
        shape = tuple(int(d) for d in dims.lower().split("x"))
    except ValueError:
        raise UsageError(f"--shape {text!r}: write dimensions as 256x512, optionally "
                         f"with a dtype as 256x512:bfloat16") from None
    if any(d <= 0 for d in shape):
        raise UsageError(f"--shape {text!r}: dimensions must be positive")
    try:
        return shape, to_dtype(dtype or default_dtype, "dtype")
    except TypeError as e:
        raise UsageError(f"--shape {text!r}: {e}") from None


def make_inputs(shapes, seed, int_range):
    """Random inputs: standard normal floats (rounded to their dtype), uniform integers in
    [int_range) for integer dtypes (indices, for instance), booleans half true."""
    rng = np.random.default_rng(seed)
    low, high = int_range
    arrays = []
    for shape, dtype in shapes:
        np_dtype = storage_dtype(dtype).numpy
        if np_dtype.kind in "iu":
            arrays.append(rng.integers(low, high, size=shape).astype(np_dtype))
        elif np_dtype.kind == "b":
            arrays.append(rng.random(shape) < 0.5)
        else:
            arrays.append(rng.standard_normal(shape).astype(np.float32).astype(np_dtype))
    return arrays
