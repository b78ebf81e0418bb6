"""pytest setup: import the in-tree knit package (python/knit, with knit._core built into it by
CMake) unless an installed one is requested with KNIT_USE_INSTALLED=1."""
import os
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if os.environ.get("KNIT_USE_INSTALLED") != "1":
    sys.path.insert(0, os.path.join(_REPO, "python"))
