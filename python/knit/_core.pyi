# Type stub for the C++ extension knit._core (pybind11, python/src/core_module.cpp). Only what the
# Python layer subclasses is spelled out; every other attribute is Any to mypy, and the Python
# modules that call the core carry the types of the public API.
from typing import Any

class KnitError(RuntimeError):
    """knit::Error from the C++ core (the Python layer re-raises it as its public subclass)."""

    kind: str  # "user" | "runtime" | "internal"
    rule: str
    message: str
    file: str
    line: int
    column: int

def __getattr__(name: str) -> Any: ...
