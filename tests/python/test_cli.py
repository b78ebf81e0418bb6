"""The knit command line (knit.cli) on Python kernel files: run with its checks, ir / asm,
profile with trace and plot, knit-run lines, usage errors, the cache command. C++ files through
the same commands are in test_cpp.py."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import knit
from knit import cli
from knit.typing import TensorType

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY_EXAMPLES = os.path.join(ROOT, "examples", "kernels", "python")

TWO_KERNELS = '''\
import knit
import knit.language as nl
import knit.isa as nisa


@knit.jit
def double(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=out, src=t)
    return out


@knit.jit
def shift(x, amount=1.0):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=amount)
    nisa.dma_copy(dst=out, src=t)
    return out
'''


@pytest.fixture
def two_kernels(tmp_path):
    path = tmp_path / "two.py"
    path.write_text(TWO_KERNELS)
    return str(path)


def run_main(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def example(name):
    return os.path.join(PY_EXAMPLES, name)


def test_run_checks_against_the_interpreter_and_the_files_reference(capsys, monkeypatch):
    # jit-strict: the kernel compiles however small (the default jit backend would leave one this
    # small on the reference executors, and the check would compare the interpreter with itself).
    monkeypatch.setenv("KNIT_BACKEND", "jit-strict")
    code, out, err = run_main(capsys, "run", example("rmsnorm.py"), "--shape", "200x256", "--shape", "256")
    assert code == 0, out + err
    assert "(jit-strict backend)" in out
    assert "inputs: 200x256 float32, 256 float32 (random, seed 0)" in out
    assert "check vs reference interpreter: PASS, identical bytes" in out
    assert "check output 0 vs reference() of the file: PASS" in out
    # The latency printed is the simulator's for those inputs.
    rng = np.random.default_rng(0)
    x = rng.standard_normal((200, 256)).astype(np.float32)
    w = rng.standard_normal(256).astype(np.float32)
    kernel = sys.modules["knit_cli_rmsnorm"].rmsnorm_kernel  # the module `knit run` imported
    latency = knit.profile(kernel, x, w).latency_us
    assert f": {latency:.2f} us" in out
    # What jit-strict ran for those inputs: every instruction natively.
    c = knit.compile(kernel, x, w)
    c.run(x, w)
    assert c.last_run["backend"] == "jit-strict" and c.last_run["native"] > 0 and c.last_run["interpreted"] == 0


def test_a_wrong_reference_fails_with_the_worst_element(capsys):
    code, out, _ = run_main(capsys, "run", example("tensor_add.py"), "--shape", "130x64", "--shape", "130x64",
                            "--reference", "x0 - x1")
    assert code == 1
    m = re.search(r"check output 0 vs NumPy expression 'x0 - x1': FAIL \(max abs error ([\d.e+-]+) at \((\d+), (\d+)\)",
                  out)
    assert m, out
    rng = np.random.default_rng(0)
    a = rng.standard_normal((130, 64)).astype(np.float32)
    b = rng.standard_normal((130, 64)).astype(np.float32)
    err = np.abs(2 * b.astype(np.float64))  # (a + b) - (a - b)
    worst = np.unravel_index(np.argmax(np.abs((a + b).astype(np.float64) - (a.astype(np.float64) - b))), a.shape)
    assert (int(m.group(2)), int(m.group(3))) == tuple(int(i) for i in worst)
    assert float(m.group(1)) == pytest.approx(err.max(), rel=1e-3)


def test_knit_run_lines_give_defaults_and_the_command_line_overrides_them(capsys):
    code, out, _ = run_main(capsys, "run", example("softmax.py"))
    assert code == 0 and "inputs: 300x1024 float32" in out  # from the file's knit-run line
    code, out, _ = run_main(capsys, "run", example("softmax.py"), "--shape", "64x128:bfloat16")
    assert code == 0 and "inputs: 64x128 bfloat16" in out
    assert "for bfloat16" in out  # bf16 tolerance chosen from the output dtype


def test_pick_a_kernel_and_pass_parameters(capsys, two_kernels):
    code, _, err = run_main(capsys, "run", two_kernels, "--shape", "8x8")
    assert code == 2 and "defines several kernels (double, shift); pick one with" in err
    code, out, _ = run_main(capsys, "run", two_kernels + "::shift", "--shape", "8x8", "--param", "amount=0.5",
                            "--reference", "x0 + 0.5")
    assert code == 0 and "PASS" in out and "::shift on trn2" in out
    code, out, _ = run_main(capsys, "run", two_kernels + "::double", "--shape", "8x8", "--reference", "x0 * 2",
                            "--target", "trn1")
    assert code == 0 and "::double on trn1" in out and "(NC-v2)" in out


@pytest.mark.parametrize("argv, message", [
    (["run", "FILE::double"], "give the kernel's tensor arguments with --shape"),
    (["run", "FILE::double", "--shape", "8by8"], "write dimensions as 256x512"),
    (["run", "FILE::double", "--shape", "8x0"], "dimensions must be positive"),
    (["run", "FILE::double", "--shape", "8x8:float12"], "float12"),
    (["run", "FILE::triple", "--shape", "8x8"], "has no kernel 'triple'; it defines double, shift"),
    (["run", "FILE::shift", "--shape", "8x8", "--param", "amount"], "write NAME=VALUE"),
    (["run", "FILE::double", "--shape", "8x8", "--int-range", "5:1"], "HIGH must be greater than LOW"),
    (["run", "FILE::double", "--shape", "8x8", "--reference", "x7 + 1"], "NameError"),
    (["run", "/no/such/file.py", "--shape", "8x8"], "no such kernel file"),
])
def test_usage_errors_exit_2_with_a_message(capsys, two_kernels, argv, message):
    argv = [a.replace("FILE", two_kernels) for a in argv]
    code, out, err = run_main(capsys, *argv)
    assert code == 2, out + err
    assert err.startswith("knit: error: ") and message in err, err


def test_kernel_errors_exit_1_naming_the_kernel_line(capsys, tmp_path):
    path = tmp_path / "bad.py"
    path.write_text(TWO_KERNELS.replace("nisa.dma_copy(dst=out, src=t)", "nisa.dma_copy(dst=out[0:4], src=t)", 1))
    code, _, err = run_main(capsys, "run", f"{path}::double", "--shape", "8x8")
    assert code == 1
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "out[0:4]" in text)
    assert f"bad.py:{line}: error:" in err and "Traceback" not in err


def test_ir_and_asm_print_what_compile_gives(capsys, two_kernels):
    code, out, _ = run_main(capsys, "ir", two_kernels + "::double", "--shape", "16x32:bfloat16")
    compiled = knit.compile(sys.modules["knit_cli_two"].double, TensorType((16, 32), "bfloat16"))
    assert code == 0 and out.strip() == compiled.ir.strip()
    assert 'param %0 "x" hbm bfloat16[16, 32]' in out
    code, out, _ = run_main(capsys, "asm", two_kernels + "::double", "--shape", "16x32:bfloat16")
    assert code == 0 and out.strip() == compiled.asm.strip()


@pytest.mark.slow
def test_profile_writes_a_perfetto_trace_and_a_plot(capsys, tmp_path):
    trace, plot = tmp_path / "t.json", tmp_path / "t.png"
    code, out, _ = run_main(capsys, "profile", example("matmul.py"), "--trace", str(trace), "--plot", str(plot))
    assert code == 0 and "kernel matmul_kernel on trn2" in out
    events = json.loads(trace.read_text())["traceEvents"]
    ops = {e["name"] for e in events if e["ph"] == "X"}
    assert {"nc_matmul", "dma_copy"} <= ops
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Timing-only (placeholders) gives the same simulated time as the functional run.
    functional = float(re.search(r": ([\d.]+) us", out).group(1))
    code, out, _ = run_main(capsys, "profile", example("matmul.py"), "--timing-only", "--json")
    assert code == 0 and json.loads(out)["total_time"] * 1e6 == pytest.approx(functional, abs=0.006)


def knit_process(*argv, env=None):
    """`python -m knit ARGV` in a fresh process: (returncode, stdout). The cache commands need
    one: a process keeps the cache folder it first used, whatever KNIT_CACHE_DIR says later."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), **(env or {}))
    done = subprocess.run([sys.executable, "-m", "knit", *argv], capture_output=True, text=True, timeout=300,
                          check=False, env=env)
    return done.returncode, done.stdout + done.stderr


def cache_files(folder):
    """{path: size} of every file under `folder`: what the cache commands must account for."""
    return {os.path.join(d, n): os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(folder)
            for n in names}


def cache_info(env):
    code, out = knit_process("cache", "info", env=env)
    assert code == 0, out
    return dict(line.split(": ", 1) for line in out.splitlines())


@pytest.mark.slow
def test_cache_info_and_clear(tmp_path, two_kernels):
    """`cache info` counts what a run wrote (compiled bodies, the program) as the files on disk
    say, and `cache clear` removes exactly those files."""
    folder = tmp_path / "cache"
    env = {"KNIT_CACHE_DIR": str(folder), "KNIT_BACKEND": "jit-strict"}
    info = cache_info(env)
    assert info["directory"].startswith(str(folder)), info
    assert (info["entries"], info["programs"]) == ("0", "0"), info
    code, out = knit_process("run", two_kernels + "::double", "--shape", "8x8", "--reference", "x0 * 2", env=env)
    assert code == 0, out
    files = cache_files(folder)
    info = cache_info(env)
    programs = [p for p in files if p.endswith(".knp")]
    assert int(info["programs"]) == len(programs) == 1, (info, files)
    assert int(info["program_bytes"]) == sum(files[p] for p in programs), (info, files)
    assert int(info["entries"]) == len(files) - len(programs) > 0, (info, files)  # the bodies jit-strict compiled
    assert int(info["bytes"]) == sum(files.values()) - int(info["program_bytes"]), (info, files)
    code, out = knit_process("cache", "clear", env=env)
    assert code == 0 and out.strip() == f"removed {len(files)} cache entries", out
    assert cache_files(folder) == {}
    info = cache_info(env)
    assert (info["entries"], info["programs"]) == ("0", "0"), info


def test_the_module_entry_point_and_help():
    done = subprocess.run([sys.executable, "-m", "knit", "--help"], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python")), timeout=120)
    assert done.returncode == 0
    for command in ("run", "ir", "asm", "profile", "lint", "cache"):
        assert command in done.stdout
