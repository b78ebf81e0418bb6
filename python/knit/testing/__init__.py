"""knit.testing: unit tests of kernels on the simulator (docs/testing.md).

    from knit.testing import assert_kernel_close, assert_latency, normal
    x = normal((256, 512), "bfloat16", seed=1)
    assert_kernel_close(softmax_kernel, softmax_reference, x)     # dtype-aware tolerances
    assert_latency(softmax_kernel, x, max_us=40, target="trn2")   # deterministic simulated time

Correctness failures list the worst elements with their indices and ULP distances; timing
failures carry the profile summary and a saved Perfetto trace. Hypothesis strategies live in
knit.testing.strategies (imported on demand, hypothesis is optional); the pytest plugin in
knit.pytest_plugin.
"""
from .compare import assert_close, assert_kernel_close
from .inputs import edge_values, normal, special_values, uniform
from .targets import ALL_TARGETS, run_on_targets
from .timing import KnitTimingError, assert_engine_utilization, assert_latency
from .tolerances import Tolerance, tolerance, ulp_distance

__all__ = ["assert_close", "assert_kernel_close", "assert_latency", "assert_engine_utilization", "run_on_targets",
           "normal", "uniform", "edge_values", "special_values", "tolerance", "Tolerance", "ulp_distance",
           "KnitTimingError", "ALL_TARGETS"]
