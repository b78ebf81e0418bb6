"""Property-based kernel fuzzing (issue 26 item 2, docs/reliability.md): random valid kernels
(tests/python/kernel_strategies.py) give the same bytes on the three executions Knit has, the
reference interpreter (`Compiled.reference`), the native path (the default backend) and the
engine program under a random queue schedule with the race checker (`Compiled.run(schedule=
"random")`); random invalid kernels raise NkiValidationError / KnitRuntimeError, never crash or
hang (a device loop is bounded by KNIT_MAX_INSTRUCTIONS).

The reference interpreter is the independent model here: it executes the IR one instruction at a
time in program order, sharing no code with the native bodies or the engine scheduler.
KNIT_FUZZ_EXAMPLES sets the number of kernels per property (default 60: ~15 s)."""
import os
import warnings

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

import knit  # noqa: E402
from kernel_strategies import build_kernel, invalid_kernels, valid_kernels  # noqa: E402

EXAMPLES = int(os.environ.get("KNIT_FUZZ_EXAMPLES", "60"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(autouse=True)
def bounded_and_native(monkeypatch):
    """Device loops bounded; every instruction JIT-compiled however small the kernel (else small
    kernels stay on the reference executors and the native path is not tested)."""
    monkeypatch.setenv("KNIT_MAX_INSTRUCTIONS", "1000000")
    monkeypatch.setenv("KNIT_JIT_THRESHOLD", "0")


def as_bytes(result):
    items = result if isinstance(result, tuple) else (result,)
    return [np.ascontiguousarray(np.asarray(r)).view(np.uint8).tobytes() for r in items]


@SETTINGS
@given(spec=valid_kernels(), schedule_seed=st.integers(0, 2**31 - 1))
def test_three_executions_agree_byte_for_byte(spec, schedule_seed):
    kernel = build_kernel(spec)
    x, y = spec.inputs()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        compiled = knit.compile(kernel, x, y)
    reference = as_bytes(compiled.reference(x, y))
    native = as_bytes(compiled(x, y))
    assert compiled.last_run["native"] > 0
    scheduled = as_bytes(compiled.run(x, y, schedule="random", seed=schedule_seed))
    assert native == reference, f"native path differs from the reference interpreter: {spec}"
    assert scheduled == reference, f"random schedule (seed {schedule_seed}) differs from the reference: {spec}"


@SETTINGS
@given(case=invalid_kernels())
def test_invalid_kernels_raise_knit_errors(case):
    spec, rule = case
    kernel = build_kernel(spec, breaking=rule)
    x, y = spec.inputs()
    os.environ["KNIT_MAX_INSTRUCTIONS"] = "20000"  # (restored by the fixture's monkeypatch)
    with pytest.raises((knit.NkiValidationError, knit.KnitRuntimeError)) as info:
        knit.compile(kernel, x, y).run(x, y, schedule="random")
    assert info.value.file and info.value.file.endswith("kernel_strategies.py"), str(info.value)
    if rule == "runaway-loop":
        assert info.value.rule == "instruction-limit" and "while loop" in str(info.value)
