"""knit.jit / simulate / compile: calling conventions, trace caching, launch grids, write-back,
dtypes, environment switches and placeholders, checked against NumPy."""
import os

import ml_dtypes
import numpy as np
import pytest

import knit
import knit as nki
import knit.isa as nisa
import knit.language as nl
import knit.typing as nt

TRACES = []


@nki.jit
def double(a):
    TRACES.append(a.shape)  # Python side effects run once per trace, not per call
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_trace_is_reused_for_same_shapes_dtypes_and_constants():
    TRACES.clear()
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    for _ in range(3):
        np.testing.assert_array_equal(double(a), 2 * a)
    assert TRACES == [(4, 8)]
    double(np.ones((4, 16), np.float32))  # new shape: a new trace
    double(np.ones((4, 8), ml_dtypes.bfloat16))  # new dtype: a new trace
    assert len(TRACES) == 3


def test_jit_with_arguments_ignores_compiler_options():
    @nki.jit(mode="simulation", additional_compile_opt="-O3", compile_config=None)
    def copy(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a)
        return out

    a = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    np.testing.assert_array_equal(copy(a), a)
    np.testing.assert_array_equal(nki.simulate(copy)(a), a)
    np.testing.assert_array_equal(nki.simulate_kernel(copy, a), a)


def test_simulate_wraps_a_plain_function_and_passes_constants():
    def scale(a, factor):
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=factor)
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    a = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(nki.simulate(scale)(a, 3.0), 3 * a)
    np.testing.assert_array_equal(nki.simulate(scale)(a, factor=5.0), 5 * a)


def test_inputs_written_by_the_kernel_are_written_back():
    @nki.jit
    def increment_in_place(a):
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
        nisa.dma_copy(dst=a, src=t)

    a = np.zeros((2, 4), np.float32)
    assert increment_in_place(a) is None
    np.testing.assert_array_equal(a, np.ones((2, 4)))


@pytest.mark.parametrize("backend", ["jit", "reference"])
def test_outputs_are_fresh_writable_arrays_and_inputs_are_not_touched(backend):
    # Inputs are borrowed by the core for the run and outputs wrap the core's own buffers
    # without a copy: each call must still give an independent, writable array.
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    before = a.copy()
    c = knit.compile(double, a)
    first = c.run(a, backend=backend)
    second = c.run(a, backend=backend)
    assert first.flags.writeable and first.flags.owndata is False  # a view of the core's buffer
    first[:] = -1
    np.testing.assert_array_equal(second, 2 * before)
    np.testing.assert_array_equal(a, before)


def test_several_outputs_come_back_as_a_tuple():
    @nki.jit
    def split(a):
        lo = nl.ndarray((2, 4), a.dtype, buffer=nl.shared_hbm)
        hi = nl.ndarray((2, 4), a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=lo, src=a[0:2, :])
        nisa.dma_copy(dst=hi, src=a[2:4, :])
        return lo, hi

    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    lo, hi = split(a)
    np.testing.assert_array_equal(lo, a[:2])
    np.testing.assert_array_equal(hi, a[2:])


def test_launch_grid_runs_every_instance_into_shared_outputs():
    @nki.jit
    def halves(a):
        pid = nl.program_id(0)
        n = nl.num_programs()
        rows = a.shape[0] // n
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm, name="out")  # one tensor across instances
        t = nl.ndarray((rows, a.shape[1]), a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[pid * rows:(pid + 1) * rows, :])
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=float(pid + 1))
        nisa.dma_copy(dst=out[pid * rows:(pid + 1) * rows, :], src=t)
        return out

    a = np.zeros((8, 4), np.float32)
    out = halves[2](a)
    np.testing.assert_array_equal(out[:4], np.ones((4, 4)))
    np.testing.assert_array_equal(out[4:], 2 * np.ones((4, 4)))


def test_compile_gives_ir_text_and_runs():
    a = np.ones((4, 8), np.float32)
    compiled = nki.compile(double, a, target="trn3")
    assert compiled.ir.startswith('kernel "double" target=trn3 {')
    assert "tensor_scalar" in compiled.ir and "op0=multiply" in compiled.ir
    np.testing.assert_array_equal(compiled(a), 2 * a)


def test_compile_accepts_shape_dtype_placeholders():
    compiled = nki.compile(double, nt.tensor[[128, 64], nl.bfloat16])
    assert 'param %0 "a" hbm bfloat16[128, 64]' in compiled.ir


def test_target_comes_from_the_environment_at_call_time(monkeypatch):
    seen = []

    @nki.jit
    def probe(a):
        seen.append(nisa.get_nc_version())
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a)
        return out

    a = np.ones((2, 2), np.float32)
    probe(a)
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn3")
    probe(a)
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "gen2")
    probe(a)
    assert seen == [nisa.nc_version.gen3, nisa.nc_version.gen4, nisa.nc_version.gen2]


def test_precise_fp_off_keeps_low_precision_in_fp32(monkeypatch):
    a = np.full((2, 2), 1.0 + 2.0 ** -10, np.float32).astype(ml_dtypes.bfloat16)  # 1.0 in bf16
    x = np.full((2, 2), 1.0 + 2.0 ** -10, np.float32)

    @nki.jit
    def through_bf16(a):
        t = nl.ndarray(a.shape, nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    np.testing.assert_array_equal(through_bf16(x), np.ones((2, 2), np.float32))
    monkeypatch.setenv("NKI_PRECISE_FP", "0")
    # The bf16 tile is stored as fp32 now, so the 2^-10 survives.
    assert a.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(through_bf16(x), x)


def test_shared_constant_and_identity_matrix():
    @nki.jit
    def add_constant(a):
        c = nl.shared_constant(np.arange(8, dtype=np.float32).reshape(2, 4))
        eye = nl.shared_identity_matrix(2, dtype=nl.float32)
        t, u = nl.ndarray((2, 4), nl.float32), nl.ndarray((2, 4), nl.float32)
        e = nl.ndarray((2, 2), nl.float32)
        nisa.dma_copy(dst=t, src=a)
        nisa.dma_copy(dst=u, src=c)
        nisa.dma_copy(dst=e, src=eye)
        nisa.tensor_tensor(dst=t, data1=t, data2=u, op=nl.add)
        out = nl.ndarray((2, 4), nl.float32, buffer=nl.shared_hbm)
        eye_out = nl.ndarray((2, 2), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        nisa.dma_copy(dst=eye_out, src=e)
        return out, eye_out

    out, eye = add_constant(np.ones((2, 4), np.float32))
    np.testing.assert_array_equal(out, 1 + np.arange(8).reshape(2, 4))
    np.testing.assert_array_equal(eye, np.eye(2))


def test_device_print_prints_values_at_that_point(capsys):
    @nki.jit
    def show(a):
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nl.device_print("before", t)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=10.0)
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    out = show(np.array([[1.0, 2.0]], np.float32))
    np.testing.assert_array_equal(out, [[10.0, 20.0]])
    assert "before: [[1. 2.]]" in capsys.readouterr().out


def test_dtypes_compare_equal_to_numpy_ml_dtypes_and_names():
    assert nl.bfloat16 == ml_dtypes.bfloat16 == np.dtype(ml_dtypes.bfloat16)
    assert nl.bfloat16 == "bfloat16" and nl.float32 == np.float32 and nl.float32 != np.float16
    assert nl.float8_e4m3 == ml_dtypes.float8_e4m3 and nl.int32 == "int32"
    assert {nl.float32: 1}["float32"] == 1
    assert isinstance(nl.tile_size.pmax, int) and nl.tile_size.pmax == 128


def test_torch_in_torch_out():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    a = torch.arange(8, dtype=torch.float32).reshape(2, 4)
    out = double(a)
    assert isinstance(out, torch.Tensor) and torch.equal(out, 2 * a)
    b = a.to(torch.bfloat16)
    out_b = double(b)
    assert out_b.dtype == torch.bfloat16 and torch.equal(out_b, 2 * b)


def test_isa_call_outside_a_kernel_is_an_error():
    t = None
    with pytest.raises(knit.NkiValidationError) as info:
        nl.ndarray((2, 2), nl.float32)
    assert info.value.rule == "no-kernel"
    assert t is None


def test_rearrange_matches_numpy_reshape_and_transpose():
    @nki.jit
    def swap_hw(a):
        v = a.rearrange(("b", ("h", "w")), ("b", "w", "h"), {"h": 4})
        out = nl.ndarray(v.shape, a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=v)
        return out

    a = np.arange(24, dtype=np.float32).reshape(2, 12)
    np.testing.assert_array_equal(swap_hw(a), a.reshape(2, 4, 3).transpose(0, 2, 1))


def test_unrolled_fori_loop_device_dynamic_range_and_nkiobject():
    class Config(nl.NKIObject):
        def __init__(self, factor):
            self.factor = factor

    @nki.jit
    def accumulate(a, cfg):
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)

        def body(i):
            nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=float(i * cfg.factor))

        nl.fori_loop(0, 4, body, unroll=True)  # adds 0 + 2 + 4 + 6 (i a Python int)
        for _ in nl.dynamic_range(2):
            nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    a = np.ones((2, 2), np.float32)
    np.testing.assert_array_equal(accumulate(a, Config(2)), (1 + 12) * 4 * np.ones((2, 2)))


def test_nc_stream_shuffle_matches_numpy_per_quadrant():
    mask = [(i + 1) % 32 for i in range(32)]  # rotate each quadrant by one partition
    mask[7] = 255

    @nki.jit
    def rotate(a):
        src = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        dst = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=src, src=a)
        nisa.memset(dst=dst, value=0.0)
        nisa.nc_stream_shuffle(dst=dst, src=src, shuffle_mask=mask)
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=dst)
        return out

    a = np.random.default_rng(3).standard_normal((128, 5)).astype(np.float32)
    want = np.zeros_like(a)
    for q in range(0, 128, 32):
        for i, m in enumerate(mask):
            if m != 255:
                want[q + i] = a[q + m]
    np.testing.assert_array_equal(rotate(a), want)


def test_two_dim_grid_program_ids_and_unnamed_shared_outputs():
    @nki.jit
    def tiles(a):
        i, j = nl.program_id(0), nl.program_id(1)
        assert (nl.num_programs(0), nl.num_programs(1), nl.num_programs(None)) == (2, 3, 6)
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)  # unnamed: shared by creation order
        t = nl.ndarray((1, 1), a.dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=float(10 * i + j))
        nisa.dma_copy(dst=out[i:i + 1, j:j + 1], src=t)
        return out

    out = tiles[2, 3](np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(out, [[0, 1, 2], [10, 11, 12]])


def test_legacy_mask_keyword_is_rejected_in_the_current_api():
    @nki.jit
    def masked(a):
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a, mask=True)
        return t

    with pytest.raises(knit.NkiValidationError) as info:
        masked(np.ones((2, 2), np.float32))
    assert info.value.rule == "unsupported" and "mask=" in str(info.value)


def test_placeholder_without_dtype_is_a_clear_error():
    with pytest.raises(knit.NkiValidationError) as info:
        nki.compile(double, nt.tensor[128, 64])
    assert info.value.rule == "kernel-args"


ONLY_NUMPY_TYPES = """
import sys
import numpy as np
import knit, knit.cli, knit.language as nl
from knit._dtypes import to_dtype

@knit.jit
def double(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    knit.isa.dma_copy(dst=t, src=x)
    knit.isa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    knit.isa.dma_copy(dst=out, src=t)
    return out

x = np.arange(256, dtype=np.float32).reshape(128, 2)
assert (double(x) == 2 * x).all()
assert to_dtype(np.float32) == "float32" and to_dtype(np.dtype(np.int8)) == "int8"
assert nl.bfloat16 != np.float32 and nl.float32 == np.float32
assert knit.testing.tolerances.finfo("float32").eps == np.finfo(np.float32).eps
assert "ml_dtypes" not in sys.modules, "an fp32-only process loaded ml_dtypes"
import ml_dtypes  # the narrow types still resolve once it is there
assert nl.bfloat16.numpy == ml_dtypes.bfloat16 and nl.bfloat16 == ml_dtypes.bfloat16
assert to_dtype(ml_dtypes.float8_e4m3fn) == "float8_e4m3fn"
y = double(x.astype(ml_dtypes.bfloat16))
assert y.dtype == ml_dtypes.bfloat16 and (y.astype(np.float32) == 2 * x).all()
print("ok")
"""


@pytest.mark.slow
def test_a_process_using_only_numpy_types_never_loads_ml_dtypes(tmp_path):
    # Loading ml_dtypes costs about half a second (knit._dtypes), most of `import knit`: an fp32
    # kernel run (and the knit command) must not need it, and bf16 must still work after it.
    import subprocess
    import sys

    script = tmp_path / "only_numpy.py"
    script.write_text(ONLY_NUMPY_TYPES)
    env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), "..", "..", "python"))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
