"""knit.cpp: C++ kernel files compiled in-process (Clang + LLVM ORC), used like @knit.jit kernels.

    import knit.cpp
    kernels = knit.cpp.load("examples/kernels/cpp/rmsnorm.cpp")
    out = kernels.rmsnorm(x, w)                    # NumPy / torch in and out, on the simulator
    knit.compile(kernels.rmsnorm, x, w).asm        # the engine program
    knit.profile(kernels.rmsnorm, x, w).summary()  # simulated timing
    knit.torch.op("my_lib::rmsnorm", kernels.rmsnorm)

A file includes <knit/knit.h> and marks each kernel with KNIT_KERNEL(fn). The first load runs
Clang in-process (about 0.2 s against the <knit/knit.h> a source build precompiles; an
installed package's first compile precompiles it, about 1.4 s more); the object goes to Knit's
disk cache, so later loads of the unchanged file (and headers) take about 15 ms. See docs/cpp.md.
"""
import os
import types
import warnings
from typing import Any

from . import _core, _program_cache, _trace
from ._dtypes import to_dtype
from ._kernel import Compiled, Kernel, tensor_spec
from .errors import user_error

__all__ = ["load", "lint", "CppModule", "CppKernel", "LintFinding", "CppCompilerWarning"]


class CppCompilerWarning(UserWarning):
    """A warning Clang gave while compiling a kernel file (file:line:col: warning: message)."""


def _cppc():
    from . import _cppc as module  # Clang's libraries load only when a C++ file is

    return module


class CppKernel(Kernel):
    """One KNIT_KERNEL-marked kernel of a compiled C++ file: call it, knit.compile / profile /
    benchmark it, or make it a torch op, like a @knit.jit kernel. Its arguments are tensors."""

    default_num_outputs = 1  # for knit.torch.op: a C++ kernel returns one tensor unless told

    def __init__(self, file, path, name, arity, line, params):
        self._file, self.path, self.qualified_name, self.arity, self.line = file, path, name, arity, line
        self.params = list(params)
        short = name.rsplit("::", 1)[-1]
        params = ", ".join(self.params)
        # A stand-in Python function with the kernel's name, arity and file (what knit.torch
        # reads for the op's schema and error locations); it is never called.
        # Its code says it starts at the KNIT_KERNEL line, where errors about the arguments point.
        code = compile("\n" * (line - 1) + f"def {short}({params}):\n    pass\n", path, "exec")
        namespace: dict[str, Any] = {}
        exec(code, namespace)  # noqa: S102 (our own two lines)
        fn = namespace[short]
        fn.__doc__ = f"C++ kernel {name} from {path}"
        super().__init__(fn)

    def __repr__(self):
        return f"<knit.cpp kernel {self.qualified_name}({', '.join(self.params)}) from {self.path}>"

    def __call__(self, *args, **kwargs):
        if _trace.active():
            raise user_error("cpp-kernel", f"C++ kernel {self.qualified_name} called while tracing a Python kernel; "
                                           f"C++ kernels run on their own", None)
        return self.compile(*args, **kwargs)(*args, **kwargs)

    def __getitem__(self, grid):
        raise user_error("cpp-kernel", "C++ kernels have no launch grid in knit.cpp", (self.path, self.line, 0))

    def _disk_name(self, key):
        """The program disk cache's entry for this compile key, as for a Python kernel: named by
        the compiled file's own cache key, which hashes the file and every header it read (a
        constant from a header changes the trace without moving any instruction's line)."""
        return _program_cache.compiled_key(self._file.cache_key, self.qualified_name, key)

    def _trace(self, args, kwargs, target):
        where = (self.path, self.line, 0)
        if kwargs:
            raise user_error("kernel-args", f"C++ kernel {self.qualified_name} takes positional tensors only", where)
        if len(args) != self.arity:
            raise user_error("kernel-args", f"C++ kernel {self.qualified_name} takes {self.arity} tensor(s), "
                                            f"got {len(args)}", where)
        specs = []
        for i, a in enumerate(args):
            spec = tensor_spec(a, where)
            if spec is None:
                raise user_error("kernel-args", f"argument {i} of C++ kernel {self.qualified_name} is "
                                                f"{type(a).__name__}; C++ kernels take tensors", where)
            shape, dt = spec
            specs.append((str(to_dtype(dt)), [int(s) for s in shape], ""))  # "": the C++ parameter's name
        text = _trace.core_call(self._file.trace, self.qualified_name, specs, str(target))
        core_kernel = _trace.core_call(_core.parse_ir, text)
        n = len(core_kernel.output_specs())
        trace = types.SimpleNamespace(constants=[], prints=[])
        return Compiled(self, core_kernel, trace, list(range(len(args))), target, n, n == 1)


class CppModule:
    """The kernels of one C++ file, as attributes (by their unqualified names) and in `kernels`."""

    def __init__(self, path, file):
        self.path = path
        self.from_cache = file.from_cache  # loaded from the disk cache: Clang did not run
        self.kernels = {}
        for name, arity, line, params in file.kernels:
            kernel = CppKernel(file, path, name, arity, line, params)
            self.kernels[name.rsplit("::", 1)[-1]] = kernel
        for short, kernel in self.kernels.items():
            setattr(self, short, kernel)

    def __repr__(self):
        return f"<knit.cpp module {self.path}: {', '.join(self.kernels)}>"


def load(path, extra_args=()):
    """Compile the C++ kernel file `path` in-process (or load it from the disk cache) and return
    its KNIT_KERNEL-marked kernels. extra_args: more compiler flags ("-DN=4", "-I/dir")."""
    path = os.path.abspath(path)
    file = _trace.core_call(_cppc().CppKernelFile.load, path, list(extra_args))
    for text in file.warnings:
        warnings.warn(CppCompilerWarning(text), stacklevel=2)
    return CppModule(path, file)



class LintFinding:
    """One finding of knit.cpp.lint: severity ("error": tracing will fail; "warning": it may
    fail, or be slow), rule, message, and the flagged source range (file, line, column to
    end_line, end_column, 1-based and inclusive). str() is a compiler-style diagnostic."""

    def __init__(self, severity, rule, message, file, line, column, end_line, end_column):
        self.severity, self.rule, self.message = severity, rule, message
        self.file, self.line, self.column, self.end_line, self.end_column = file, line, column, end_line, end_column

    def __repr__(self):
        return f"LintFinding({self.severity} [{self.rule}] at {self.file}:{self.line}:{self.column})"

    def __str__(self):
        text = f"{self.file}:{self.line}:{self.column}: {self.severity}: [{self.rule}] {self.message}"
        try:
            with open(self.file) as f:
                source = f.read().splitlines()[self.line - 1]
        except (OSError, IndexError):
            return text
        last = self.end_column if self.end_line == self.line else len(source)
        marker = " " * (self.column - 1) + "^" + "~" * max(0, last - self.column)
        return f"{text}\n  {source}\n  {marker}"


def lint(path, extra_args=()):
    """Static checks of a C++ kernel file before it runs (Clang AST): partition dimensions that
    exceed or may exceed 128, PSUM tiles larger than a 2 KiB bank, branches on the trace-time
    part of device registers. Returns a list of LintFinding (empty: nothing found)."""
    path = os.path.abspath(path)
    found = _trace.core_call(_cppc().lint, path, list(extra_args))
    return [LintFinding(*f) for f in found]
