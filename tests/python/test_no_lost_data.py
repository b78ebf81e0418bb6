"""The caller's data is safe (issue 26, item 6): inputs a kernel does not write are never
modified, a failing run leaves every argument as it was, and returned outputs are the caller's
own arrays (no later call, on any backend, changes them)."""
import numpy as np
import pytest
import torch

import knit
import knit.isa as nisa
import knit.language as nl

BACKENDS = ["jit", "reference"]


@knit.jit
def double_into_param_then_read_row(a, idx):
    """Writes 2 * a back into the parameter a, then reads row idx[0, 0] of it: out of range (a
    runtime error after a was written) when idx names a row a does not have."""
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=a, src=t)
    r = nisa.register_alloc(0)
    nisa.register_load(r, idx)
    row = nl.ndarray((1, a.shape[1]), a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=row, src=a[nl.ds(r, 1), :])
    out = nl.ndarray((1, a.shape[1]), a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=row)
    return out


@knit.jit
def add_one(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
    nisa.dma_copy(dst=out, src=t)
    return out


def run(kernel, backend, *args):
    return knit.compile(kernel, *args).run(*args, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_run_that_fails_midway_leaves_every_argument_as_it_was(backend):
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    before = a.copy()
    with pytest.raises(knit.KnitRuntimeError, match="view-out-of-range"):
        run(double_into_param_then_read_row, backend, a, np.array([[5]], np.int32))
    np.testing.assert_array_equal(a, before)  # the kernel's write into a never reached the caller


def test_a_failing_run_leaves_a_torch_argument_as_it_was():
    a = torch.arange(8, dtype=torch.float32).reshape(2, 4)
    before = a.clone()
    with pytest.raises(knit.KnitRuntimeError):
        double_into_param_then_read_row(a, torch.tensor([[5]], dtype=torch.int32))
    assert torch.equal(a, before)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_successful_run_writes_a_written_parameter_and_nothing_else(backend):
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    idx = np.array([[1]], np.int32)
    out = run(double_into_param_then_read_row, backend, a, idx)
    np.testing.assert_array_equal(a, 2 * np.arange(8, dtype=np.float32).reshape(2, 4))  # NKI: params are HBM
    np.testing.assert_array_equal(out, a[1:2])
    np.testing.assert_array_equal(idx, [[1]])  # only read: untouched


@pytest.mark.parametrize("backend", BACKENDS)
def test_inputs_a_kernel_only_reads_are_never_modified(backend):
    x = np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32)
    before = x.copy()
    np.testing.assert_array_equal(run(add_one, backend, x), before + 1)
    np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("backend", BACKENDS)
def test_returned_outputs_are_the_callers_own_arrays(backend):
    x = np.ones((128, 64), np.float32)
    first = run(add_one, backend, x)
    first_copy = first.copy()
    second = run(add_one, backend, 3 * x)  # the same compiled shapes: any reused buffer would show
    np.testing.assert_array_equal(first, first_copy)
    assert not np.shares_memory(first, second)
    second[:] = -7  # writing into a result changes no later result
    np.testing.assert_array_equal(run(add_one, backend, x), first_copy)
