"""pytest setup: import the in-tree knit package (python/knit, with knit._core built into it by
CMake) unless an installed one is requested with KNIT_USE_INSTALLED=1."""
import os
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if os.environ.get("KNIT_USE_INSTALLED") != "1":
    sys.path.insert(0, os.path.join(_REPO, "python"))

# knit's pytest plugin (--knit-target, knit_target, knit_latency). An installed Knit registers it
# through its entry point under this same name, so pytest does not load it twice.
pytest_plugins = ["knit.pytest_plugin"]

# A fresh disk cache for each test session, so results never depend on what an earlier session
# (or another checkout) left in ~/.cache/knit; tests of the cache itself use their own folders.
if "KNIT_CACHE_DIR" not in os.environ:
    import atexit
    import shutil
    import tempfile

    os.environ["KNIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="knit-test-cache-")
    atexit.register(shutil.rmtree, os.environ["KNIT_CACHE_DIR"], ignore_errors=True)
