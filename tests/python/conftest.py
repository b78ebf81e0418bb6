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
    # `./dev test fast` keeps the JIT's compiled objects between sessions ($KNIT_TEST_OBJECT_CACHE):
    # an object is found by a hash of everything that shapes it (the body's IR, the core's own
    # code, the host), so reusing one changes no result. Traced programs, which tests count, and
    # precompiled headers still start empty.
    if os.environ.get("KNIT_TEST_OBJECT_CACHE"):
        os.makedirs(os.environ["KNIT_TEST_OBJECT_CACHE"], exist_ok=True)
        os.symlink(os.path.abspath(os.environ["KNIT_TEST_OBJECT_CACHE"]),
                   os.path.join(os.environ["KNIT_CACHE_DIR"], "objects"))


# ---- the fast tier: `./dev test fast` runs `-m "not slow"` -------------------------------------
# Tests that take seconds on their own (a subprocess, a C++ compile, a realistic size) carry
# @pytest.mark.slow where they are defined. The large parametrized families below test one piece
# of code on many inputs: the fast tier keeps a slice of each that still reaches every example or
# instruction, and `./dev test` runs them all. Each predicate gets a case's id and says "slow".
_SLOW_CASES = {
    # Every example, lowered for trn2 and run under a random schedule (not 3 targets x 5 schedules).
    "test_codegen.py::test_example_engine_program_matches_reference_interpreter": lambda id: "trn2-random-1" not in id,
    # Every swept instruction in bf16 and int32, and the mixed-dtype case (not every dtype and value
    # kind).
    "test_native.py::test_sweep":
        lambda id: not ("-bfloat16-" in id or "-int32-" in id or id == "mixed_dtypes-float32-finite"),
    # Every example natively, first seed, in fp32 (mx_matmul, which has no fp32 case, in bf16).
    "test_native.py::test_example": lambda id: not (id.endswith("-float32-0") or id == "mx_matmul-bfloat16-0"),
    # Profiles on trn2 (trn1 and trn3 share the code).
    "test_timing.py::test_profile_outputs_are_the_reference_interpreters_and_timing_only_times_the_same":
        lambda id: "trn2" not in id,
    # Attention at seq 512 (not 1024 and 2048); from torch in fp32 only.
    "test_examples_python.py::test_example_numpy": lambda id: "attention_1024" in id or "attention_2048" in id,
    "test_examples_python.py::test_example_torch": lambda id: "bfloat16" in id,
}


def pytest_collection_modifyitems(config, items):
    import pytest

    for item in items:
        slow = _SLOW_CASES.get(f"{item.path.name}::{getattr(item, 'originalname', item.name)}")
        callspec = getattr(item, "callspec", None)  # None: the test is no longer parametrized
        if slow is not None and (callspec is None or slow(callspec.id)):
            item.add_marker(pytest.mark.slow)
