"""The one Chrome / Perfetto trace writer (simulator/include/knit/sim/trace.h), behind both
Profile.save_trace and knit/testing.h's save_trace: names and source paths holding quotes,
backslashes, control characters and non-ASCII text come back from json.loads unchanged."""
import json
import re

import numpy as np

import knit
import knit.isa as nisa
import knit.language as nl
from knit import _core

# Every character a hand-rolled escaper gets wrong: quote, backslash, the named escapes, the
# other C0 controls, DEL and non-ASCII.
AWKWARD = 'k"q\\b\n\t\r\b\f\x01\x1f\x7f é ✓'


@knit.jit
def add_one(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
    nisa.dma_copy(dst=out, src=t)
    return out


def _renamed_program(name, file):
    """add_one's program, its kernel named `name` and every source location in `file`."""
    a = np.ones((128, 64), np.float32)
    text = knit.compile(add_one, a).program.text

    def quoted(s):
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'

    text = re.sub(r'^kernel "[^"]*"', lambda _: "kernel " + quoted(name), text, count=1)
    text = re.sub(r'@ "[^"]*":', lambda _: "@ " + quoted(file) + ":", text)
    return _core.parse_ir(text).lower(), a


def test_trace_strings_round_trip_through_json():
    program, a = _renamed_program(AWKWARD, "/tmp/" + AWKWARD + ".py")
    data = program.time([("float32", [128, 64], a.tobytes())], True)
    doc = json.loads(program.chrome_trace(data["timeline"]))
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(xs) == len(data["timeline"]) == 3
    assert {e["name"] for e in xs} == {"dma_copy", "tensor_scalar"}
    for e in xs:
        file, _, line = e["args"]["source"].rpartition(":")
        assert file == "/tmp/" + AWKWARD + ".py" and int(line) > 0
    processes = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert processes == {f"{AWKWARD} core 0 ({program.target})"}


def test_json_quote_escapes_every_control_character():
    program, a = _renamed_program("".join(map(chr, range(1, 128))), "f.py")
    data = program.time([("float32", [128, 64], a.tobytes())], True)
    text = program.chrome_trace(data["timeline"])
    assert all(ord(c) >= 0x20 and c != "\x7f" for c in text.replace("\n", "")), "raw control character"
    names = {e["args"]["name"] for e in json.loads(text)["traceEvents"] if e["name"] == "process_name"}
    assert names == {"".join(map(chr, range(1, 128))) + f" core 0 ({program.target})"}


def test_profile_save_trace_is_the_core_writer(tmp_path):
    a = np.ones((128, 64), np.float32)
    prof = knit.profile(add_one, a)
    path = prof.save_trace(str(tmp_path / "t.json"))
    with open(path) as f:
        assert f.read() == prof.trace_json()
    assert json.loads(prof.trace_json())["traceEvents"] == prof.trace_events()
