# Type stub for the C++ extension knit._cppc (pybind11, built by CMake). Its functions and classes
# are not described here: every attribute is Any to mypy, and the Python modules that call it
# carry the types of the public API.
from typing import Any

def __getattr__(name: str) -> Any: ...
