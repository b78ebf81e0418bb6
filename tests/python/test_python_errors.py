"""User errors reachable from Python: each must raise Knit's public exception type with the
broken rule, point at the kernel's own line (this file, the line of the offending call), show
that line with a caret, and leave the process usable (a correct kernel still runs afterwards).

The expected line of each error is the line carrying the marker comment ``# @<marker>``.
"""
import os
import re

import numpy as np
import pytest

import knit
import knit as nki
import knit.isa as nisa
import knit.language as nl

with open(__file__) as _f:
    _LINES = _f.read().splitlines()


def line_of(marker):
    """Line number (1-based) of the unique line of this file ending in ``# @<marker>``."""
    hits = [i for i, text in enumerate(_LINES, 1) if text.rstrip().endswith(f"# @{marker}")]
    assert len(hits) == 1, f"marker @{marker} found on lines {hits}"
    return hits[0]


@nki.jit
def _copy_kernel(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=a)
    nisa.dma_copy(dst=out, src=tile)
    return out


def assert_knit_still_works():
    """After an error, tracing and running a correct kernel must still work (no stale trace
    state, no crash) and ISA calls outside a kernel must still be rejected."""
    a = np.arange(8 * 16, dtype=np.float32).reshape(8, 16)
    np.testing.assert_array_equal(_copy_kernel(a), a)
    with pytest.raises(knit.NkiValidationError) as info:
        nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf)
    assert info.value.rule == "no-kernel"


def check_error(err, cls, rule, marker):
    """err is a `cls` for `rule`, located at the line marked `# @marker` of this file, and its
    text shows that line with a caret under its first non-blank character."""
    assert isinstance(err, cls), f"{type(err).__name__}: {err}"
    assert isinstance(err, knit.KnitError)
    assert err.rule == rule, str(err)
    assert err.file is not None and os.path.samefile(err.file, __file__), err.file
    line = line_of(marker)
    assert err.line == line, f"error at line {err.line}, expected {line}:\n{err}"
    text = str(err)
    assert f"[{rule}]" in text
    assert re.search(rf"{re.escape(os.path.basename(__file__))}:{line}:", text), text
    # The source line, then a caret under its first non-blank character.
    src = _LINES[line - 1]
    shown = text.splitlines()
    at = [i for i, s in enumerate(shown) if s.strip() == src.strip()]
    assert at, f"source line not shown in:\n{text}"
    assert at[0] + 1 < len(shown), text
    src_shown, caret = shown[at[0]], shown[at[0] + 1]
    assert caret.strip() == "^", f"no caret line under the source line:\n{text}"
    assert caret.index("^") == len(src_shown) - len(src_shown.lstrip()), text
    assert_knit_still_works()


def _f32(*shape):
    return np.zeros(shape, dtype=np.float32)


# ---- tensor declarations -----------------------------------------------------------------------


def test_partition_dim_over_128():
    @nki.jit
    def kernel(a):
        tile = nl.ndarray((256, 64), dtype=a.dtype, buffer=nl.sbuf)  # @partition-limit
        nisa.dma_copy(dst=tile, src=a)
        return tile

    with pytest.raises(knit.NkiValidationError) as info:
        kernel(_f32(256, 64))
    check_error(info.value, knit.NkiValidationError, "partition-limit", "partition-limit")
    assert "128" in info.value.message


# ---- nc_matmul rules ------------------------------------------------------------------------------


def _matmul_kernel(n, dtype, dst_buffer):
    """A kernel doing one nc_matmul of [128, 128] x [128, n] with inputs of `dtype`."""

    @nki.jit
    def kernel(a, b):
        out = nl.ndarray((128, n), dtype=nl.float32, buffer=nl.shared_hbm)
        stationary = nl.ndarray((128, 128), dtype=dtype, buffer=nl.sbuf)
        moving = nl.ndarray((128, n), dtype=dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=stationary, src=a)
        nisa.dma_copy(dst=moving, src=b)
        acc = nl.ndarray((128, n), dtype=nl.float32, buffer=dst_buffer)
        if n > 512:
            nisa.nc_matmul(dst=acc, stationary=stationary, moving=moving)  # @matmul-n
        elif dtype == nl.int8:
            nisa.nc_matmul(dst=acc, stationary=stationary, moving=moving)  # @matmul-int8
        elif dst_buffer is nl.sbuf:
            nisa.nc_matmul(dst=acc, stationary=stationary, moving=moving)  # @matmul-sbuf
        else:
            nisa.nc_matmul(dst=acc, stationary=stationary, moving=moving)
        res = nl.ndarray((128, n), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        nisa.dma_copy(dst=out, src=res)
        return out

    return kernel


def test_matmul_n_over_512_on_trn2(monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn2")
    kernel = _matmul_kernel(1024, nl.float32, nl.psum)
    a, b = np.ones((128, 128), np.float32), np.ones((128, 1024), np.float32)
    with pytest.raises(knit.NkiValidationError) as info:
        kernel(a, b)
    check_error(info.value, knit.NkiValidationError, "matmul-shape", "matmul-n")
    assert "512" in info.value.message
    # The limit is the target's: trn3 takes N = 1024 in one matmul.
    out = kernel.compile(a, b, target="trn3")(a, b)
    np.testing.assert_array_equal(out, np.full((128, 1024), 128.0, np.float32))


def test_matmul_int8_inputs_rejected():
    kernel = _matmul_kernel(128, nl.int8, nl.psum)
    a, b = np.ones((128, 128), np.int8), np.ones((128, 128), np.int8)
    with pytest.raises(knit.NkiValidationError) as info:
        kernel(a, b)
    check_error(info.value, knit.NkiValidationError, "dtype", "matmul-int8")
    assert "int8" in info.value.message


def test_matmul_dst_in_sbuf():
    kernel = _matmul_kernel(128, nl.float32, nl.sbuf)
    with pytest.raises(knit.NkiValidationError) as info:
        kernel(_f32(128, 128), _f32(128, 128))
    check_error(info.value, knit.NkiValidationError, "buffer", "matmul-sbuf")
    assert "psum" in info.value.message


# ---- views ------------------------------------------------------------------------------------------


def test_view_slice_out_of_range():
    @nki.jit
    def kernel(a):
        out = nl.ndarray((200, 4), dtype=a.dtype, buffer=nl.shared_hbm)
        rows = a[0:200, :]  # @slice-oob
        nisa.dma_copy(dst=out, src=rows)
        return out

    with pytest.raises(knit.NkiValidationError) as info:
        kernel(_f32(128, 4))
    check_error(info.value, knit.NkiValidationError, "view-out-of-range", "slice-oob")


def test_view_index_out_of_range():
    @nki.jit
    def kernel(a):
        out = nl.ndarray((4,), dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a[128])  # @index-oob
        return out

    with pytest.raises(knit.NkiValidationError) as info:
        kernel(_f32(128, 4))
    check_error(info.value, knit.NkiValidationError, "view-out-of-range", "index-oob")


def test_broadcast_on_partition_dim():
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        row = nl.ndarray((1, 8), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=row, src=a)
        wide = row.broadcast(0, 128)  # @broadcast-partition
        nisa.dma_copy(dst=out, src=wide)
        return out

    with pytest.raises(knit.NkiValidationError) as info:
        kernel(_f32(1, 8))
    check_error(info.value, knit.NkiValidationError, "view-partition-dim", "broadcast-partition")


# ---- kernel outputs ---------------------------------------------------------------------------------

@pytest.mark.parametrize("buffer", [nl.hbm, nl.sbuf], ids=["hbm", "sbuf"])
def test_output_not_shared_hbm(buffer):
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=buffer)  # @output-decl
        nisa.dma_copy(dst=out, src=a)
        return out  # @output-return

    with pytest.raises(knit.NkiValidationError) as info:
        kernel(_f32(4, 4))
    err = info.value
    assert err.rule == "kernel-output" and "shared_hbm" in err.message
    # Either line names the culprit; the declaration is where the fix goes.
    marker = "output-decl" if err.line == line_of("output-decl") else "output-return"
    check_error(err, knit.NkiValidationError, "kernel-output", marker)


def test_output_not_shared_hbm_is_reported():
    """Type, rule, file and message of the same error, and Knit keeps working after it."""

    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)
        nisa.dma_copy(dst=out, src=a)
        return out

    with pytest.raises(knit.NkiValidationError) as info:
        kernel(_f32(4, 4))
    assert info.value.rule == "kernel-output"
    assert os.path.samefile(info.value.file, __file__)
    assert "shared_hbm" in str(info.value)
    assert_knit_still_works()


def test_output_not_a_tensor():
    @nki.jit
    def kernel(a):
        return 3

    with pytest.raises(knit.NkiValidationError) as info:
        kernel(_f32(4, 4))
    assert info.value.rule == "kernel-output"


def test_output_tuple_with_non_tensor():
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a)
        return out, 3

    with pytest.raises(knit.NkiValidationError) as info:
        kernel(_f32(4, 4))
    assert info.value.rule == "kernel-output"
    assert_knit_still_works()


# ---- calls outside a kernel, bad operands -------------------------------------------------------------


def test_language_call_outside_kernel():
    with pytest.raises(knit.NkiValidationError) as info:
        nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)  # @outside-ndarray
    check_error(info.value, knit.NkiValidationError, "no-kernel", "outside-ndarray")


def test_isa_call_outside_kernel():
    leaked = []

    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        tile = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        leaked.append(tile)
        nisa.dma_copy(dst=tile, src=a)
        nisa.dma_copy(dst=out, src=tile)
        return out

    kernel(_f32(4, 4))
    with pytest.raises(knit.NkiValidationError) as info:
        nisa.memset(dst=leaked[0], value=0.0)  # @outside-isa
    check_error(info.value, knit.NkiValidationError, "no-kernel", "outside-isa")


def test_non_tensor_operand():
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        tile = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=a)
        host = np.ones(a.shape, dtype=np.float32)  # a host array is not an on-chip tile
        nisa.tensor_tensor(dst=tile, data1=tile, data2=host, op=nl.add)  # @non-tensor
        nisa.dma_copy(dst=out, src=tile)
        return out

    with pytest.raises(knit.NkiValidationError) as info:
        kernel(_f32(4, 4))
    check_error(info.value, knit.NkiValidationError, "operand", "non-tensor")
    assert "data2" in info.value.message


# ---- runtime errors -----------------------------------------------------------------------------------


def test_uninitialized_read(monkeypatch):
    monkeypatch.delenv("KNIT_UNINITIALIZED", raising=False)

    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        tile = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile[0:2, :], src=a[0:2, :])  # rows 2..3 are never written
        nisa.dma_copy(dst=out, src=tile)  # @uninit
        return out

    with pytest.raises(knit.KnitRuntimeError) as info:
        kernel(_f32(4, 4))
    # The never-written rows reach the output (test_uninitialized.py has the other cases): the error
    # is at the first never-written read and names it and an output element, both [2, 0].
    check_error(info.value, knit.KnitRuntimeError, "uninitialized-output", "uninit")
    assert not isinstance(info.value, knit.NkiValidationError)
    assert "output 't1' element [2, 0]" in info.value.message, info.value.message
    assert "reads src element [2, 0]" in info.value.message and "never-written" in info.value.message


@pytest.mark.parametrize("backend", ["jit", "reference"])
def test_only_a_whole_first_write_skips_the_fresh_fill(monkeypatch, backend):
    """A fresh tile whose first instruction writes all of it skips the NaN fill and flag clearing
    (that write replaces both); a tile whose first write is partial starts unwritten as before,
    so storing the rest into the output is an error, on both backends."""
    monkeypatch.delenv("KNIT_UNINITIALIZED", raising=False)

    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        first = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=first, src=a)  # written whole; dead after the next line
        nisa.dma_copy(dst=out, src=first)
        second = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=second[0:2, :], src=a[0:2, :])
        nisa.dma_copy(dst=out, src=second)  # @stale
        return out

    compiled = knit.compile(kernel, _f32(4, 4))
    with pytest.raises(knit.KnitRuntimeError) as info:
        compiled.run(_f32(4, 4), backend=backend)
    check_error(info.value, knit.KnitRuntimeError, "uninitialized-output", "stale")
    assert "element [2, 0]" in info.value.message


# ---- Python control flow on tensor values ---------------------------------------------------------------


def test_python_if_on_tensor_raises_type_error():
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        tile = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=a)
        if tile:  # the value is only known when the kernel runs
            pass
        nisa.dma_copy(dst=out, src=tile)
        return out

    with pytest.raises(TypeError, match="runtime data"):
        kernel(_f32(4, 4))
    assert_knit_still_works()


# ---- the process survives ------------------------------------------------------------------------------

_SCRIPT = r'''
import numpy as np
import knit as nki, knit.isa as nisa, knit.language as nl

@nki.jit
def too_many_partitions(a):
    t = nl.ndarray((256, 4), dtype=a.dtype, buffer=nl.sbuf)
    return t

@nki.jit
def reads_garbage(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=out, src=t)
    return out

@nki.jit
def copy(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=a)
    return out

caught = []
for kernel, error in [(too_many_partitions, nki.NkiValidationError), (reads_garbage, nki.KnitRuntimeError)] * 3:
    try:
        kernel(np.zeros((4, 4), np.float32))
    except error as e:
        caught.append(e.rule)
assert copy(np.ones((4, 4), np.float32)).sum() == 16
print(" ".join(caught))
'''


def test_errors_do_not_crash_the_process():
    """Repeated user and runtime errors in a fresh interpreter: every one is a Python exception
    and the interpreter exits normally."""
    import subprocess
    import sys

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(knit.__file__)), env.get("PYTHONPATH", "")])
    run = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["partition-limit", "uninitialized-output"] * 3
