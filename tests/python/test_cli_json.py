"""`knit COMMAND ... --json` (docs/cli.md): every command prints one JSON document with exactly
the keys the page documents, errors included, and nothing else on stdout. Figures are checked
against values worked out by hand from the example kernels' shapes."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from knit import cli

ROOT = Path(__file__).resolve().parents[2]
PY = ROOT / "examples" / "kernels" / "python"
TENSOR_ADD = str(PY / "tensor_add.py")  # knit-run: --shape 300x512 --shape 300x512 (float32)
ADD_BYTES = 300 * 512 * 4  # one of its tensors
HBM_GBPS_TRN2 = 362  # the core's HBM bandwidth on trn2 (docs/simulator.md machine table)

TOO_TALL = '''\
import knit
import knit.language as nl
import knit.isa as nisa


@knit.jit
def too_tall(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((256, 64), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out, src=t)
    return out
'''
TOO_TALL_LINE = 9  # the nl.ndarray((256, 64), ... sbuf) line: SBUF has 128 partitions

CHATTY = '''\
import knit
import knit.language as nl
import knit.isa as nisa

# knit-run: --shape 128x64


@knit.jit
def chatty(x):
    print("tracing chatty")  # a kernel's own print goes to stderr under --json
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out, src=t)
    return out


def reference(x):
    return x
'''

LINTED = '''\
#include <knit/knit.h>
using namespace knit;
nl::tensor linted(nl::tensor x) {
  auto out = nl::ndarray(x.shape(), x.dtype(), nl::shared_hbm, "out");
  auto big = nl::ndarray({256, 64}, nl::float32, nl::sbuf, "big");
  return out;
}
KNIT_KERNEL(linted)
'''


def documented(heading):
    """The key sets of the tables of docs/cli.md's section `## heading` (the backticked names in
    each row's first cell), in order."""
    text = (ROOT / "docs" / "cli.md").read_text()
    section = text.split(f"## {heading}\n")[1].split("\n## ")[0]
    tables = [[r for r in block.splitlines() if r.startswith("| `")] for block in section.split("\n\n")]
    return [{k for r in t for k in re.findall(r"`(\w+)`", r.split("|")[1])} for t in tables if t]


def knit_json(capsys, *argv):
    """(exit status, the document) of `knit ARGV --json`; stdout must be that document alone."""
    status = cli.main([*argv, "--json"])
    out = capsys.readouterr().out
    doc = json.loads(out)  # raises on anything before or after the one document
    assert doc["schema_version"] == 1
    return status, doc


def test_run_json_has_the_documented_keys_and_the_checks(capsys):
    status, doc = knit_json(capsys, "run", TENSOR_ADD)
    top, check = documented("`knit run FILE[::KERNEL] --json`")
    (summary_keys,) = documented("`knit profile FILE[::KERNEL] --json`")[1:]
    assert status == 0 and doc.keys() == top and doc["command"] == "run"
    assert doc["inputs"] == [{"shape": [300, 512], "dtype": "float32"}] * 2
    assert doc["outputs"] == [{"shape": [300, 512], "dtype": "float32"}]
    assert [c["against"] for c in doc["checks"]] == ["reference interpreter", "reference() of the file"]
    for c in doc["checks"]:
        assert c.keys() == check and c["passed"] is True
    # fp32 addition rounds once: at most half an ulp of a sum of two standard normals (|sum| < 16).
    assert 0 <= doc["checks"][1]["max_abs_error"] <= 2.0**-20
    assert doc["passed"] is True and doc["summary"].keys() == summary_keys
    assert doc["summary"]["hbm_read_bytes"] == 2 * ADD_BYTES and doc["summary"]["hbm_write_bytes"] == ADD_BYTES
    assert set(doc["engines"]) >= {"dve", "dma0"} and "pe" not in doc["engines"]  # an add: no matmul


def test_a_failed_check_is_passed_false_and_exit_1(capsys):
    status, doc = knit_json(capsys, "run", TENSOR_ADD, "--reference", "x0 - x1")
    assert status == 1 and doc["passed"] is False
    numpy_check = doc["checks"][1]
    assert numpy_check["passed"] is False and numpy_check["output"] == 0 and numpy_check["message"]


def test_ir_and_asm_json_count_what_the_text_shows(capsys):
    status, ir = knit_json(capsys, "ir", TENSOR_ADD)
    assert status == 0 and ir.keys() == documented("`knit ir FILE[::KERNEL] --json`")[0]
    assert (ir["params"], ir["outputs"]) == (2, 1)
    assert ir["text"].startswith('kernel "tensor_add_kernel"')
    status, asm = knit_json(capsys, "asm", TENSOR_ADD)
    assert status == 0 and asm.keys() == documented("`knit asm FILE[::KERNEL] --json`")[0]
    # 300 rows in tiles of 128, 128 and 44: three tiles, each two loads, one add and one store.
    assert asm["opcodes"] == {"dma_copy": 9, "tensor_tensor": 3}
    # The adds leave their engine open: the first goes to VectorE (every engine idle: the default),
    # the others to GpSimd, which stays the less loaded (an fp32 add costs VectorE 2 cycles per
    # element, GpSimd 1 plus its 150-cycle start).
    assert sum(asm["instructions"].values()) == 12
    assert (asm["instructions"]["dve"], asm["instructions"]["pool"]) == (1, 2)
    assert asm["dma_bytes"] == 3 * ADD_BYTES
    assert asm["text"].rstrip("\n") == cli_text(capsys, "asm", TENSOR_ADD)


def test_memory_json_is_the_map_of_the_allocation(capsys):
    status, doc = knit_json(capsys, "memory", TENSOR_ADD)
    top, memory_keys = documented("`knit memory FILE[::KERNEL] --json`")
    assert status == 0 and doc.keys() == top and doc["fits"] is True and doc["capacity_error"] is None
    assert doc["memory_map"].keys() <= memory_keys and {"tensors", "high_water", "capacity"} <= doc["memory_map"].keys()
    # 300 rows in three tiles, each with two loaded inputs and one sum: 9 SBUF tensors of 512 fp32
    # per partition (2048 bytes).
    tensors = doc["memory_map"]["tensors"]
    assert len(tensors) == 9 and all(t["buffer"] == "sbuf" and t["bytes"] == 2048 for t in tensors)


def cli_text(capsys, *argv):
    assert cli.main(list(argv)) == 0
    return capsys.readouterr().out.rstrip("\n")


def test_profile_json_keys_and_mbu_by_hand(capsys, tmp_path):
    trace = tmp_path / "t.json"
    status, doc = knit_json(capsys, "profile", TENSOR_ADD, "--timing-only", "--target", "trn2", "--trace", str(trace))
    head, summary = documented("`knit profile FILE[::KERNEL] --json`")
    assert status == 0 and doc.keys() == head | summary and doc["command"] == "profile"
    assert doc["written"] == {"trace": str(trace)} and json.loads(trace.read_text())["traceEvents"]
    assert doc["dma_transfer_total_bytes"] == 3 * ADD_BYTES
    total_ns = doc["total_time"] * 1e9
    assert doc["mbu_estimated_percent"] == pytest.approx(100 * 3 * ADD_BYTES / (HBM_GBPS_TRN2 * total_ns))


def test_sweep_json_is_the_sweep_result_with_command(capsys):
    status, doc = knit_json(capsys, "sweep", f"{PY}/matmul/stages.py::blocked_mn", "--param", "tiles_m=1,2",
                            "--shape", "1024x512:bfloat16", "--shape", "1024x1024:bfloat16", "--executor", "inline")
    assert status == 0 and doc.keys() == documented("`knit sweep FILE[::KERNEL] ... --json`")[0]
    assert [p["config"] for p in doc["points"]] == [{"tiles_m": 1}, {"tiles_m": 2}] and doc["written"] == {}


def test_lint_json_gives_each_finding_as_an_object(capsys, tmp_path):
    path = tmp_path / "linted.cpp"
    path.write_text(LINTED)
    status, doc = knit_json(capsys, "lint", str(path))
    top, finding = documented("`knit lint FILE --json`")
    assert status == 1 and doc.keys() == top
    (only,) = doc["findings"]
    assert only.keys() == finding
    # `256` in nl::ndarray({256, 64}, ...) on line 5, columns 27 to 29.
    assert (only["severity"], only["rule"], only["line"], only["column"], only["end_column"]) == (
        "error", "partition-dim", 5, 27, 29)
    assert only["file"].endswith("linted.cpp")


def knit_process(*argv, env=None):
    """`python -m knit ARGV` in a fresh process: (status, stdout, stderr)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), **(env or {}))
    done = subprocess.run([sys.executable, "-m", "knit", *argv], capture_output=True, text=True, timeout=300,
                          check=False, env=env)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.slow
def test_cache_json_info_and_clear(tmp_path):
    """In fresh processes (a process keeps the cache folder it first used): info counts the
    files a run wrote, clear says how many it removed."""
    env = {"KNIT_CACHE_DIR": str(tmp_path / "cache")}
    status, _, err = knit_process("run", TENSOR_ADD, "--json", env=env)
    assert status == 0, err
    files = [os.path.join(d, n) for d, _, names in os.walk(tmp_path / "cache") for n in names]
    status, out, _ = knit_process("cache", "info", "--json", env=env)
    top, info = documented("`knit cache info --json`")
    doc = json.loads(out)
    assert status == 0 and doc.keys() == top and doc["info"].keys() == info
    assert doc["info"]["total_files"] == len(files) > 0
    status, out, _ = knit_process("cache", "clear", "--json", env=env)
    doc = json.loads(out)
    assert status == 0 and doc.keys() == documented("`knit cache clear --json`")[0]
    assert doc["removed"] == len(files)


def test_a_verifier_error_is_a_json_error_at_the_kernels_line(capsys, tmp_path):
    path = tmp_path / "too_tall.py"
    path.write_text(TOO_TALL)
    for command in ("run", "ir", "asm", "profile"):
        status, doc = knit_json(capsys, command, str(path), "--shape", "256x64")
        top, error = documented("Errors")
        assert status == 1 and doc.keys() == top and doc["command"] == command
        assert doc["error"].keys() == error
        e = doc["error"]
        assert (e["kind"], e["rule"], e["file"], e["line"]) == ("user", "partition-limit", str(path), TOO_TALL_LINE)
        assert "256" in e["message"] and not e["message"].startswith(str(path))


TALL_CPP = """\
#include <knit/knit.h>
using namespace knit;
nl::tensor tall(nl::tensor x) {
  auto out = nl::ndarray(x.shape(), x.dtype(), nl::shared_hbm, "out");
  auto big = nl::ndarray({256, 64}, nl::float32, nl::sbuf, "big");
  isa::dma_copy(big, x);
  isa::dma_copy(out, big);
  return out;
}
KNIT_KERNEL(tall)
"""


def test_a_cpp_kernels_error_names_its_line_and_column(capsys, tmp_path):
    path = tmp_path / "tall.cpp"
    path.write_text(TALL_CPP)
    status, doc = knit_json(capsys, "asm", str(path), "--shape", "256x64")
    e = doc["error"]
    # Line 5, where `nl::ndarray(` starts: after two spaces and `auto big = ` (column 14, 1-based).
    assert status == 1 and (e["rule"], e["file"], e["line"], e["column"]) == ("partition-limit", str(path), 5, 14)


@pytest.mark.parametrize("argv, command", [
    (["run", TENSOR_ADD, "--target", "trn9"], "run"),  # argparse: not a choice
    (["cache", "tidy"], "cache"),
    (["frobnicate"], None),
    (["run", TENSOR_ADD, "--int-range", "5:1"], "run"),  # Knit's own usage check
    (["profile", "--compare", "no-such.json", "no-such.json"], "profile"),
])
def test_a_bad_command_line_is_a_json_error_with_exit_2(capsys, argv, command):
    status, doc = knit_json(capsys, *argv)
    top, error = documented("Errors")
    assert status == 2 and doc.keys() == top and doc["command"] == command
    assert doc["error"].keys() == error and doc["error"]["kind"] == "usage"
    assert doc["error"]["file"] is None and doc["error"]["line"] is None
    if doc["error"]["rule"] == "arguments":
        assert doc["error"]["hint"].startswith("usage: knit")


def test_text_mode_argument_errors_print_as_argparse_does(capsys):
    assert cli.main(["run", TENSOR_ADD, "--target", "trn9"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("usage: knit run") and "knit run: error: argument --target: invalid choice" in err


def test_stdout_holds_the_document_alone_even_with_prints(tmp_path):
    """At the file-descriptor level: a kernel's print() and the run's text report go to stderr."""
    path = tmp_path / "chatty.py"
    path.write_text(CHATTY)
    status, out, err = knit_process("run", str(path), "--json", env={"KNIT_CACHE_DIR": str(tmp_path / "c1")})
    doc = json.loads(out)
    assert status == 0 and doc["command"] == "run" and doc["passed"] is True
    assert "tracing chatty" in err and "check vs reference interpreter: PASS" in err
    # (a fresh cache: the program is traced again, so the kernel prints again)
    status, out, err = knit_process("profile", str(path), "--json", "--by-line",
                                    env={"KNIT_CACHE_DIR": str(tmp_path / "c2")})
    assert status == 0 and json.loads(out)["command"] == "profile"
    assert "tracing chatty" in err


def test_a_knit_run_line_cannot_switch_the_output_to_json(capsys, tmp_path):
    """--json in a file's knit-run line is ignored: the command line alone picks text or JSON."""
    path = tmp_path / "chatty.py"
    path.write_text(CHATTY.replace("--shape 128x64", "--shape 128x64 --json"))
    assert cli.main(["profile", str(path), "--timing-only"]) == 0
    out = capsys.readouterr().out
    assert "kernel chatty on trn2" in out and "{" not in out


INF_OUTPUT = CHATTY.replace("def reference(x):\n    return x", "def reference(x):\n    return x + float('inf')")


def test_an_infinite_error_is_null_and_the_document_strict_json(capsys, tmp_path):
    path = tmp_path / "inf.py"
    path.write_text(INF_OUTPUT)
    status = cli.main(["run", str(path), "--json"])
    out = capsys.readouterr().out
    doc = json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} in the document"))
    assert status == 1 and doc["checks"][1]["passed"] is False
    assert doc["checks"][1]["max_abs_error"] is None  # |x - inf| is infinite
