"""C++ kernel files compiled in-process (knit.cpp, frontend/cpp): every C++ example through
`knit run`, the disk cache across processes, Clang and kernel diagnostics, kernels used from
Python and as torch ops, and the kernel lint."""
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

import knit
import knit.cpp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CPP_EXAMPLES = os.path.join(ROOT, "examples", "kernels", "cpp")
EXAMPLE_FILES = sorted(f for f in os.listdir(CPP_EXAMPLES) if f.endswith(".cpp"))

ADD_KERNEL = """\
#include <algorithm>
#include <knit/knit.h>
#include "scale.h"

using namespace knit;

nl::tensor scaled_add(nl::tensor a, nl::tensor b) {
  auto out = nl::ndarray(a.shape(), a.dtype(), nl::shared_hbm, "out");
  for (int64_t r = 0; r < a.shape(0); r += nl::tile_size::pmax) {
    const int64_t p = std::min(nl::tile_size::pmax, a.shape(0) - r);
    auto ta = nl::ndarray({p, a.shape(1)}, a.dtype(), nl::sbuf, "ta");
    auto tb = nl::ndarray({p, a.shape(1)}, b.dtype(), nl::sbuf, "tb");
    isa::dma_copy(ta, a(nl::ds(r, p), nl::all));
    isa::dma_copy(tb, b(nl::ds(r, p), nl::all));
    auto sum = nl::ndarray({p, a.shape(1)}, a.dtype(), nl::sbuf, "sum");
    isa::scalar_tensor_tensor(sum, ta, nl::multiply, SCALE, nl::add, tb);
    isa::dma_copy(out(nl::ds(r, p), nl::all), sum);
  }
  return out;
}
KNIT_KERNEL(scaled_add)
"""


def knit_cli(*args, env=None):
    """`python -m knit ARGS` in a fresh process (as a user runs it): (returncode, stdout, stderr)."""
    full_env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), **(env or {}))
    done = subprocess.run([sys.executable, "-m", "knit", *args], capture_output=True, text=True, env=full_env,
                          cwd=ROOT, timeout=600)
    return done.returncode, done.stdout, done.stderr


def write_kernel_dir(tmp_path, scale="2.0f"):
    (tmp_path / "scale.h").write_text(f"#pragma once\nconstexpr float SCALE = {scale};\n")
    path = tmp_path / "scaled_add.cpp"
    path.write_text(ADD_KERNEL)
    return str(path)


@pytest.mark.parametrize("name", EXAMPLE_FILES)
@pytest.mark.slow
def test_every_cpp_example_runs_through_knit_run(name):
    """The file's own knit-run line gives shapes and a NumPy reference; the run must match it
    and the reference interpreter, and print the simulated timing."""
    # On jit-strict whatever the session's backend (--knit-backend): every instruction compiled,
    # or an error, so the check against the interpreter compares native bytes (the default jit
    # backend would leave kernels this small on the reference executors).
    code, out, err = knit_cli("run", os.path.join("examples", "kernels", "cpp", name),
                              env={"KNIT_BACKEND": "jit-strict"})
    assert code == 0, out + err
    assert "(jit-strict backend)" in out
    assert "check vs reference interpreter: PASS, identical bytes" in out
    assert re.search(r"check output 0 vs NumPy expression .*: PASS", out), out
    latency = re.search(r"kernel \w+ on trn2 \(NC-v3\): ([\d.]+) us", out)
    assert latency and float(latency.group(1)) > 15.0, out  # more than the launch overhead alone


@pytest.mark.slow
def test_second_process_loads_the_compiled_file_from_the_cache_and_edits_recompile(tmp_path):
    path = write_kernel_dir(tmp_path)
    env = {"KNIT_CACHE_DIR": str(tmp_path / "cache")}
    args = ("run", path, "--shape", "200x64", "--shape", "200x64", "--reference", "2 * x0 + x1")
    first = knit_cli(*args, env=env)
    second = knit_cli(*args, env=env)
    assert first[0] == 0 and second[0] == 0, first[1] + first[2] + second[2]
    assert "C++ file compiled by Clang" in first[1] and "(program traced and lowered)" in first[1]
    # The second process loads the object and the traced, lowered program from the disk cache.
    assert "C++ file from the disk cache" in second[1] and "(program from the disk cache)" in second[1]
    load_ms = int(re.search(r"load (\d+) ms", second[1]).group(1))
    assert load_ms < 1000, second[1]
    # An edit to a header the file includes changes the key: compiled and traced again, with the
    # new value (SCALE is an operand: no instruction's line moves, yet the program differs).
    (tmp_path / "scale.h").write_text("#pragma once\nconstexpr float SCALE = 3.0f;\n")
    third = knit_cli("run", path, "--shape", "200x64", "--shape", "200x64", "--reference", "3 * x0 + x1", env=env)
    assert third[0] == 0 and "C++ file compiled by Clang" in third[1], third[1] + third[2]
    assert "(program traced and lowered)" in third[1], third[1]


def settle(*folders):
    """Date the folders a minute back: a warm start keys a kernel file by the cache's manifest of
    the files it read, without preprocessing it, but no manifest is written while a folder the
    includes search changed within the last second (the timestamp tick could hide a change)."""
    settled = time.time() - 60
    for d in folders:
        os.utime(d, (settled, settled))


@pytest.mark.slow
def test_a_header_added_where_an_include_now_finds_it_first_recompiles(tmp_path):
    # A new scale.h next to the kernel shadows the one from -I (quoted includes look there
    # first) while every file the manifest lists keeps its contents: only the folder shows it.
    kernel_dir, include_dir = tmp_path / "kernel", tmp_path / "include"
    kernel_dir.mkdir()
    include_dir.mkdir()
    path = write_kernel_dir(kernel_dir)
    (kernel_dir / "scale.h").rename(include_dir / "scale.h")
    settle(kernel_dir, include_dir)
    env = {"KNIT_CACHE_DIR": str(tmp_path / "cache")}
    run = ("run", path, "--cxxflag", f"-I{include_dir}", "--shape", "64x32", "--shape", "64x32", "--reference")
    first, second = knit_cli(*run, "2 * x0 + x1", env=env), knit_cli(*run, "2 * x0 + x1", env=env)
    assert first[0] == 0 and "C++ file compiled by Clang" in first[1], first[1] + first[2]
    assert second[0] == 0 and "C++ file from the disk cache" in second[1], second[1] + second[2]
    (kernel_dir / "scale.h").write_text("#pragma once\nconstexpr float SCALE = 3.0f;\n")
    third = knit_cli(*run, "3 * x0 + x1", env=env)
    assert third[0] == 0 and "C++ file compiled by Clang" in third[1], third[1] + third[2]


@pytest.mark.slow
def test_an_include_added_to_the_file_is_followed_by_later_edits_of_that_header(tmp_path):
    # The edit that adds the #include changes the file's recorded hash, so the file is
    # preprocessed again and the manifest lists extra.h; an edit of extra.h then recompiles.
    kernel_dir = tmp_path / "kernel"  # (the cache beside it: creating it changes no searched folder)
    kernel_dir.mkdir()
    path = write_kernel_dir(kernel_dir)
    (kernel_dir / "extra.h").write_text("#pragma once\nconstexpr float EXTRA = 1.0f;\n")
    settle(kernel_dir)
    env = {"KNIT_CACHE_DIR": str(tmp_path / "cache")}
    run = ("run", path, "--shape", "64x32", "--shape", "64x32", "--reference")
    assert knit_cli(*run, "2 * x0 + x1", env=env)[0] == 0
    with open(path, "r+") as f:  # rewritten in place: the folder's time does not change
        text = f.read().replace('#include "scale.h"', '#include "scale.h"\n#include "extra.h"')
        f.seek(0)
        f.write(text.replace("SCALE, nl::add", "SCALE + EXTRA, nl::add"))
    assert knit_cli(*run, "3 * x0 + x1", env=env)[0] == 0
    with open(kernel_dir / "extra.h", "r+") as f:
        f.write("#pragma once\nconstexpr float EXTRA = 4.0f;\n")
    code, out, err = knit_cli(*run, "6 * x0 + x1", env=env)
    assert code == 0 and "C++ file compiled by Clang" in out, out + err


@pytest.mark.slow
def test_corrupted_cache_entries_are_detected_and_rebuilt(tmp_path, monkeypatch):
    path = write_kernel_dir(tmp_path)
    cache = tmp_path / "cache"
    args = ("run", path, "--shape", "130x32", "--shape", "130x32", "--reference", "2 * x0 + x1")
    env = {"KNIT_CACHE_DIR": str(cache), "KNIT_PREBUILT_PCH": "0"}  # the header precompiled into the cache
    assert knit_cli(*args, env=env)[0] == 0
    objects = sorted((cache / "objects").glob("*.o"), key=lambda p: -p.stat().st_size)
    data = objects[0].read_bytes()  # the largest entry is the compiled file (the other: its kernel list)
    objects[0].write_bytes(data[: len(data) // 2])
    # The precompiled <knit/knit.h> too: Clang refuses it, Knit drops it and compiles without.
    (pch,) = (cache / "pch").glob("*.pch")
    pch.write_bytes(pch.read_bytes()[:1_000_000])
    code, out, err = knit_cli(*args, env=env)
    assert code == 0, out + err
    assert "C++ file compiled by Clang" in out  # the truncated entry was not used
    assert not pch.exists()


@pytest.mark.skipif(os.environ.get("KNIT_USE_INSTALLED") == "1",
                    reason="an installed package has no build folder of precompiled headers")
@pytest.mark.slow
def test_the_first_compile_uses_the_header_the_build_precompiled(tmp_path):
    # A source build precompiles <knit/knit.h> into build/pch (python/CMakeLists.txt): a first
    # compile with an empty cache includes that one and precompiles none of its own.
    path = write_kernel_dir(tmp_path)
    cache = tmp_path / "cache"
    code, out, err = knit_cli("run", path, "--shape", "64x32", "--shape", "64x32", "--reference", "2 * x0 + x1",
                              env={"KNIT_CACHE_DIR": str(cache)})
    assert code == 0 and "C++ file compiled by Clang" in out, out + err
    assert (cache / "objects").is_dir() and not (cache / "pch").exists()


@pytest.mark.slow
def test_cpp_kernels_from_python_match_numpy_and_profile():
    kernels = knit.cpp.load(os.path.join(CPP_EXAMPLES, "rmsnorm.cpp"))
    assert set(kernels.kernels) == {"rmsnorm"}
    rng = np.random.default_rng(1)
    x = rng.standard_normal((200, 256)).astype(np.float32)
    w = rng.standard_normal(256).astype(np.float32)
    got = kernels.rmsnorm(x, w)
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64 * x64).mean(1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    compiled = knit.compile(kernels.rmsnorm, x, w)
    assert 'kernel "rmsnorm"' in compiled.ir and "activation" in compiled.asm
    assert 'param %0 "x" hbm float32[200, 256]' in compiled.ir and 'param %1 "w"' in compiled.ir
    profile = knit.profile(kernels.rmsnorm, x, w, target="trn3")
    assert profile.target == "trn3" and profile.latency_us > 15.0
    np.testing.assert_array_equal(profile.outputs, got)


@pytest.mark.slow
def test_cpp_kernel_as_a_torch_op():
    torch = pytest.importorskip("torch")
    import knit.torch as ktorch

    kernels = knit.cpp.load(os.path.join(CPP_EXAMPLES, "tensor_add.cpp"))
    op = ktorch.op("knit_test_cpp::tensor_add", kernels.tensor_add)
    assert str(op.op._schema) == "knit_test_cpp::tensor_add(Tensor a, Tensor b) -> Tensor"  # the C++ names
    a, b = torch.randn(130, 64), torch.randn(130, 64)
    torch.testing.assert_close(op(a, b), a + b, rtol=0, atol=0)  # one fp32 add, rounded once like torch's
    torch.library.opcheck(op.op, (a, b))


def test_cpp_kernel_with_the_wrong_number_of_tensors_points_at_its_knit_kernel_line():
    kernels = knit.cpp.load(os.path.join(CPP_EXAMPLES, "tensor_add.cpp"))
    with pytest.raises(knit.KnitError) as e:
        kernels.tensor_add(np.zeros((4, 4), np.float32))
    line = next(i for i, text in enumerate(open(os.path.join(CPP_EXAMPLES, "tensor_add.cpp")), 1)
                if text.startswith("KNIT_KERNEL"))
    assert f"tensor_add.cpp:{line}: error: [kernel-args]" in str(e.value)
    assert "takes 2 tensor(s), got 1" in str(e.value)


BROKEN = {
    "syntax": ("#include <knit/knit.h>\nusing namespace knit;\nnl::tensor k(nl::tensor a) {\n"
               "  auto out = nl::ndarray(a.shape(), a.dtype(), nl::shared_hbm, \"out\")\n  return out;\n}\n"
               "KNIT_KERNEL(k)\n",
               r"syntax\.cpp:4:\d+: error: \[cpp-compile\] expected ';'"),
    "missing_include": ("#include <knit/knit.h>\n#include \"no_such_header.h\"\n",
                        r"missing_include\.cpp:2:10: error: \[cpp-compile\] 'no_such_header\.h' file not found"),
    "no_kernels": ("#include <knit/knit.h>\nint unrelated = 1;\n",
                   r"\[cpp-no-kernels\] no kernel is marked in .*no_kernels\.cpp; add KNIT_KERNEL"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_files_give_clang_style_diagnostics(tmp_path, case):
    source, pattern = BROKEN[case]
    path = tmp_path / f"{case}.cpp"
    path.write_text(source)
    with pytest.raises(knit.KnitError) as e:
        knit.cpp.load(str(path))
    assert re.search(pattern, str(e.value)), str(e.value)
    if case != "no_kernels":  # the message quotes the offending source line
        bad_line = int(re.search(rf"{case}\.cpp:(\d+)", str(e.value)).group(1))
        assert source.splitlines()[bad_line - 1].strip() in str(e.value)


def test_kernel_errors_name_the_cpp_line_through_the_cli(tmp_path):
    """A DMA whose sides differ in size is a trace-time error at the kernel's own line."""
    path = tmp_path / "mismatch.cpp"
    path.write_text(ADD_KERNEL.replace('#include "scale.h"\n', "constexpr float SCALE = 1.0f;\n")
                    .replace("isa::dma_copy(tb, b(nl::ds(r, p), nl::all));",
                             "isa::dma_copy(tb, b(nl::ds(0, 1), nl::all));"))
    code, out, err = knit_cli("run", str(path), "--shape", "64x32", "--shape", "64x32")
    assert code == 1, out + err
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "nl::ds(0, 1)" in text)
    assert f"mismatch.cpp:{line}:" in err and "[dma-size]" in err and "isa::dma_copy(tb" in err
    assert "Traceback" not in err


LINTED = """\
#include <algorithm>
#include <knit/knit.h>
using namespace knit;
nl::tensor linted(nl::tensor x) {
  auto out = nl::ndarray(x.shape(), x.dtype(), nl::shared_hbm, "out");
  auto big = nl::ndarray({256, 64}, nl::float32, nl::sbuf, "big");
  auto rows = nl::ndarray({x.shape(0), 64}, nl::float32);
  const int64_t p = std::min(nl::tile_size::pmax, x.shape(0));
  auto fine = nl::ndarray({p, 64}, nl::float32, nl::sbuf);
  auto acc = nl::ndarray({128, 1024}, nl::float32, nl::psum, "acc");
  auto one_bank = nl::ndarray({128, 512}, nl::float32, nl::psum, "one_bank");
  auto hbm = nl::ndarray({4096, 64}, nl::float32, nl::hbm, "scratch");
  nl::dynamic_range(0, 4, [&](nl::reg i) {
    if (i.constant() > 2) isa::dma_copy(fine, x(nl::ds(0, p), nl::ds(0, 64)));
  });
  return out;
}
KNIT_KERNEL(linted)
"""


@pytest.mark.slow
def test_lint_flags_partition_psum_and_device_branch_mistakes_with_ranges(tmp_path):
    path = tmp_path / "linted.cpp"
    path.write_text(LINTED)
    found = knit.cpp.lint(str(path))
    got = [(f.severity, f.rule, f.line, f.column, f.end_line, f.end_column) for f in found]
    assert got == [
        ("error", "partition-dim", 6, 27, 6, 29),      # 256
        ("warning", "partition-dim", 7, 28, 7, 37),    # x.shape(0)
        ("warning", "psum-bank", 10, 26, 10, 36),      # {128, 1024} fp32: 4 KiB
        ("warning", "device-branch", 14, 9, 14, 24),   # i.constant() > 2
    ]
    assert "4096 bytes per partition" in found[2].message
    text = str(found[0])
    assert text.splitlines()[1].strip() == LINTED.splitlines()[5].strip()
    assert text.splitlines()[2].strip() == "^~~"
    code, out, _ = knit_cli("lint", str(path))
    assert code == 1 and "4 finding(s)" in out


@pytest.mark.parametrize("name", ["gather_rows.cpp", "matmul.cpp"])  # parameters, lambdas, PSUM tiles
@pytest.mark.slow
def test_lint_finds_nothing_in_the_examples(name):
    assert knit.cpp.lint(os.path.join(CPP_EXAMPLES, name)) == []


@pytest.mark.slow
def test_installed_headers_are_found_next_to_the_extension(tmp_path):
    """A pip install puts the headers in knit/include beside knit._cppc: then those are the
    compiler's include folders (not the source tree's), and a file compiles with them.
    Simulated with a copy of the package."""
    package = tmp_path / "site" / "knit"
    shutil.copytree(os.path.join(ROOT, "python", "knit"), package, ignore=shutil.ignore_patterns("__pycache__"))
    for part in ("dsl", "ir", "frontend", "simulator", "codegen"):
        shutil.copytree(os.path.join(ROOT, part, "include", "knit"), package / "include" / "knit", dirs_exist_ok=True)
    script = ("import knit.cpp, knit._cppc, sys; k = knit.cpp.load(sys.argv[1]); "
              "print(k.from_cache, sorted(k.kernels), *knit._cppc.include_dirs())")
    # The extension modules this process runs (another build's under KNIT_EXTENSION_DIR), which the
    # copy then imports as an installed package does: from beside its own files.
    from knit import _core, _cppc
    for module in (_core, _cppc):
        shutil.copy(module.__file__, package)
    path = write_kernel_dir(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"), KNIT_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("KNIT_EXTENSION_DIR", None)
    done = subprocess.run([sys.executable, "-c", script, path], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "['scaled_add']", str(package / "include")]


@pytest.mark.slow
def test_cxxflags_warnings_and_errors_from_the_kernels_own_cpp(tmp_path):
    """--cxxflag values that look like options, Clang's warnings on stderr, and a C++ mistake the
    API catches (a dimension the tensor lacks) named at the kernel line; a C++ exception of the
    kernel's own becomes a Knit error at its KNIT_KERNEL line."""
    path = tmp_path / "flags.cpp"
    path.write_text("#include <stdexcept>\n#include <knit/knit.h>\nusing namespace knit;\n"
                    "nl::tensor k(nl::tensor a) {\n  int unused = KSCALE;\n"
                    "  if (a.shape(0) == 3) throw std::runtime_error(\"three rows are bad luck\");\n"
                    "  return nl::ndarray({a.shape(0), a.shape(4)}, a.dtype(), nl::shared_hbm);\n}\n"
                    "KNIT_KERNEL(k)\n")
    code, out, err = knit_cli("run", str(path), "--shape", "4x4", "--cxxflag", "-DKSCALE=4", "--cxxflag", "-Wall")
    assert code == 1, out + err
    assert "flags.cpp:5:7: warning: unused variable 'unused'" in err
    assert "flags.cpp:7:" in err and "[shape-dim] shape(4) of a 2-D tensor" in err
    with pytest.warns(knit.cpp.CppCompilerWarning, match="unused variable"):
        kernels = knit.cpp.load(str(path), ["-DKSCALE=4", "-Wall", "-DFRESH"])  # a new flag: compiled again
    with pytest.raises(knit.KnitError, match=r"flags\.cpp:9: error: \[cpp-exception\] kernel k threw .*bad luck"):
        kernels.k(np.zeros((3, 4), np.float32))


def test_cpp_kernels_work_with_knit_testing():
    """knit.testing takes a C++ kernel like a Python one: correctness on every target, and a
    latency bound that holds at the simulated time itself and fails 10 ns under it."""
    from knit.testing import assert_kernel_close, assert_latency, normal

    kernels = knit.cpp.load(os.path.join(CPP_EXAMPLES, "tensor_add.cpp"))
    a, b = normal((300, 512), "bfloat16", seed=1), normal((300, 512), "bfloat16", seed=2)
    for target in ("trn1", "trn2", "trn3"):
        assert_kernel_close(kernels.tensor_add, lambda x, y: x + y, a, b, target=target)
    latency = knit.profile(kernels.tensor_add, a, b).latency_us
    assert_latency(kernels.tensor_add, a, b, max_us=latency)  # the bound is inclusive and the time deterministic
    with pytest.raises(AssertionError, match=r"kernel tensor_add on trn2 took [\d.]+ us, over the"):
        assert_latency(kernels.tensor_add, a, b, max_us=latency - 0.01)


def test_a_missing_clang_says_what_to_install(tmp_path):
    code, out, err = knit_cli("run", os.path.join("examples", "kernels", "cpp", "tensor_add.cpp"),
                              env={"KNIT_CLANGXX": str(tmp_path / "no-clang++")})
    assert code == 1, out + err
    assert "[cpp-toolchain]" in err and "apt-get install clang-19" in err and "Traceback" not in err
