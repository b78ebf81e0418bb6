"""Kernel unit tests as a kernel author writes them: the example kernels against NumPy
references on every target (run with --knit-target all) and a latency bound for each.

    pytest examples/tests --knit-target all            # installed Knit: the plugin is active
    PYTHONPATH=python pytest examples/tests -p knit.pytest_plugin --knit-target all

Latency bounds are the simulated time on trn1 (the slowest target) of these shapes plus about
10%; the simulator is deterministic, so a bound only fails when the kernel or the cost model
changes (docs/testing.md).
"""
import pytest

import knit.typing as nt
from knit.testing import assert_kernel_close, assert_latency, normal, run_on_targets
from matmul import matmul_kernel, reference as matmul_reference
from rmsnorm import reference as rmsnorm_reference, rmsnorm_kernel
from softmax import reference as softmax_reference, softmax_kernel
from tensor_add import reference as add_reference, tensor_add_kernel

DTYPES = ["float32", "bfloat16"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_tensor_add(knit_target, dtype):
    a, b = normal((300, 512), dtype, seed=1), normal((300, 512), dtype, seed=2)  # a ragged last tile
    assert_kernel_close(tensor_add_kernel, add_reference, a, b, target=knit_target)


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax(knit_target, dtype):
    x = normal((256, 512), dtype, seed=3, std=4.0)
    assert_kernel_close(softmax_kernel, softmax_reference, x, target=knit_target)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rmsnorm(knit_target, dtype):
    x, w = normal((256, 512), dtype, seed=4), normal((512,), dtype, seed=5)
    assert_kernel_close(rmsnorm_kernel, rmsnorm_reference, x, w, target=knit_target)


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul(knit_target, dtype):
    lhsT, rhs = normal((256, 128), dtype, seed=6), normal((256, 512), dtype, seed=7)
    assert_kernel_close(matmul_kernel, matmul_reference, lhsT, rhs, target=knit_target)


def test_matmul_same_result_on_every_generation():
    lhsT, rhs = normal((256, 128), "bfloat16", seed=8), normal((256, 512), "bfloat16", seed=9)
    run_on_targets(matmul_kernel, lhsT, rhs, reference=matmul_reference)


@pytest.mark.knit_latency
def test_softmax_latency(knit_target):
    x = normal((256, 512), "bfloat16", seed=10)
    assert_latency(softmax_kernel, x, max_us=28, target=knit_target)


@pytest.mark.knit_latency
def test_matmul_latency(knit_target):
    lhsT, rhs = nt.tensor[[256, 128], "bfloat16"], nt.tensor[[256, 512], "bfloat16"]  # timing only
    assert_latency(matmul_kernel, lhsT, rhs, max_us=26, target=knit_target)
