"""Bad input handled (issue 26): a tensor too large for 64-bit byte offsets is a verifier error, a
source location naming a device file or with line 0 neither hangs nor is silently dropped."""
import os
import re

import numpy as np
import pytest

import knit as nki
import knit.isa as nisa
import knit.language as nl
from knit import _core


def test_a_tile_whose_bytes_overflow_64_bits_is_a_verifier_error():
    @nki.jit
    def huge(x):
        t = nl.ndarray((2, 2**40, 2**40), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=0.0)
        return None

    with pytest.raises(nki.NkiValidationError, match="64-bit offset") as info:
        huge(np.zeros((2, 2), np.float32))
    assert info.value.rule == "tensor-shape"


KERNEL = '''kernel "k" target=trn2 {
  param %0 "x" hbm float32[128, 4] @ "LOC":LINE
  return
}
'''


def test_a_location_naming_a_device_or_fifo_does_not_hang(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    bad = KERNEL.replace('param %0 "x" hbm float32[128, 4]', 'tensor %0 "t" sbuf float32[256, 4]')
    for path in ("/dev/zero", str(fifo)):
        # The error is at the tensor's location; formatting it reads that file's line 3.
        with pytest.raises(nki.KnitError, match="partition dim 256") as info:
            _core.verify_ir(bad.replace("LOC", path).replace("LINE", "3"))
        assert f"{path}:3: error" in str(info.value)


def test_a_location_with_line_zero_is_a_parse_error_not_a_lost_file():
    with pytest.raises(nki.KnitError, match="count from 1") as info:
        _core.parse_ir(KERNEL.replace("LOC", "f.py").replace("LINE", "0"))
    assert info.value.rule == "ir-parse"
    text = KERNEL.replace("LOC", "f.py").replace("LINE", "7")
    assert _core.roundtrip_ir(text) == _core.roundtrip_ir(_core.roundtrip_ir(text))
    assert '@ "f.py":7' in _core.roundtrip_ir(text)


def test_an_output_never_written_is_named_in_a_warning(capsys):
    @nki.jit
    def forgets(x):
        out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
        half = nl.ndarray((64, 8), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=half, src=x[0:64, :])
        nisa.dma_copy(dst=out[0:64, :], src=half)  # rows 64..127 are never written
        return out

    x = np.ones((128, 8), np.float32)
    got = forgets(x)
    warning = capsys.readouterr().out
    assert re.search(r"\[unwritten-output\] kernel output '\w+': 512 of 1024 elements were never written", warning)
    assert "test_input_limits.py" in warning and "out = nl.ndarray((128, 8)" in warning  # its declaration
    np.testing.assert_array_equal(got[:64], x[:64])
    assert np.isnan(got[64:]).all()


@nki.jit
def copies(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_a_fully_written_output_gives_no_warning(capsys):
    copies(np.ones((128, 8), np.float32))
    assert "unwritten-output" not in capsys.readouterr().out


def test_a_tensor_larger_than_the_devices_hbm_is_a_capacity_error():
    @nki.jit(platform_target="trn2")
    def huge_output(x):
        out = nl.ndarray((1 << 20, 1 << 20), nl.float32, buffer=nl.shared_hbm)  # 4 TiB
        return out

    with pytest.raises(nki.NkiValidationError, match="96 GiB of HBM on trn2") as info:
        huge_output(np.zeros((2, 2), np.float32))
    assert info.value.rule == "capacity" and "4398046511104 bytes" in str(info.value)


def test_tensors_beyond_the_host_memory_cap_are_named_before_allocation(monkeypatch):
    x = np.ones((128, 64), np.float32)
    monkeypatch.setenv("KNIT_HOST_MEMORY_CAP", "40000")  # bytes; the two tensors need 65536
    with pytest.raises(nki.NkiValidationError, match="host memory") as info:
        copies(x)
    assert info.value.rule == "host-memory" and "65536 bytes" in str(info.value)
    monkeypatch.delenv("KNIT_HOST_MEMORY_CAP")
    np.testing.assert_array_equal(copies(x), x)
