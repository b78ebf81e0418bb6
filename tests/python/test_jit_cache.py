"""The native path's disk cache and backend selection (docs/jit.md): a second process loads the
compiled code instead of compiling it; corrupt entries are detected and rebuilt; concurrent
processes share a directory safely; KNIT_CACHE=0 writes nothing; KNIT_BACKEND picks the backend."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import knit
from kernel_test_util import load_example

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def jit_backend(monkeypatch):
    """These tests are about the JIT backend: they run it (and their child processes do) whatever
    backend the session selects with --knit-backend."""
    monkeypatch.setenv("KNIT_BACKEND", "jit")

# Runs two example kernels on the JIT path and prints the cache statistics and a hash of the
# outputs' bytes as JSON.
SCRIPT = textwrap.dedent("""
    import hashlib, json, sys
    import numpy as np
    sys.path.insert(0, "examples/kernels/python")
    import knit
    from softmax import softmax_kernel
    from matmul import matmul_kernel
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 512)).astype(np.float32)
    a = rng.standard_normal((256, 128)).astype(np.float32)
    b = rng.standard_normal((256, 512)).astype(np.float32)
    digest = hashlib.sha256()
    for kernel, args in ((softmax_kernel, (x,)), (matmul_kernel, (a, b))):
        c = knit.compile(kernel, *args)
        out = c.run(*args)
        assert c.last_run["native"] > 0, c.last_run
        digest.update(np.ascontiguousarray(out).tobytes())
    stats = knit.cache.info()
    stats["outputs"] = digest.hexdigest()
    print(json.dumps(stats))
""")


def run_script(cache_dir, **env):
    environment = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), KNIT_CACHE_DIR=str(cache_dir),
                       KNIT_JIT_THRESHOLD="0", **env)
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=environment, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def entries(cache_dir):
    objects = cache_dir / "objects"
    return sorted(objects.glob("*.o")) if objects.exists() else []


@pytest.mark.slow
def test_second_process_loads_compiled_code_from_the_cache(tmp_path):
    cold = run_script(tmp_path)
    assert cold["modules_compiled"] > 0 and cold["modules_from_cache"] == 0
    assert cold["directory"] == str(tmp_path / "objects") and len(entries(tmp_path)) == cold["entries"] > 0
    warm = run_script(tmp_path)
    assert warm["modules_compiled"] == 0
    assert warm["modules_from_cache"] == cold["modules_compiled"]
    assert warm["outputs"] == cold["outputs"]


@pytest.mark.slow
def test_a_corrupt_entry_is_rejected_and_rebuilt(tmp_path):
    clean = run_script(tmp_path)
    damaged = entries(tmp_path)
    assert len(damaged) >= 2
    for i, path in enumerate(damaged):  # truncated, a flipped bit, emptied: each must be caught
        data = bytearray(path.read_bytes())
        if i % 3 == 0:
            data = data[:len(data) // 2]
        elif i % 3 == 1:
            data[len(data) // 2] ^= 0x40
        else:
            data = bytearray()
        path.write_bytes(bytes(data))
    rebuilt = run_script(tmp_path)
    assert rebuilt["entries_rejected"] == len(damaged)
    assert rebuilt["modules_compiled"] == clean["modules_compiled"] and rebuilt["modules_from_cache"] == 0
    assert rebuilt["outputs"] == clean["outputs"]
    again = run_script(tmp_path)  # the rebuilt entries are good
    assert again["modules_compiled"] == 0 and again["entries_rejected"] == 0


@pytest.mark.slow
def test_concurrent_processes_share_one_directory(tmp_path):
    environment = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), KNIT_CACHE_DIR=str(tmp_path),
                       KNIT_JIT_THRESHOLD="0")
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT], cwd=ROOT, env=environment, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert len({r["outputs"] for r in results}) == 1
    assert not list((tmp_path / "objects").glob("*.tmp.*"))  # no temporary file left behind
    after = run_script(tmp_path)
    assert after["modules_compiled"] == 0 and after["entries_rejected"] == 0
    assert after["outputs"] == results[0]["outputs"]


@pytest.mark.slow
def test_cache_off_writes_nothing(tmp_path):
    stats = run_script(tmp_path, KNIT_CACHE="0")
    assert stats["directory"] == "" and stats["modules_compiled"] > 0
    assert not (tmp_path / "objects").exists()


@pytest.mark.slow
def test_clear_removes_only_cache_entries(tmp_path):
    run_script(tmp_path)
    keep = tmp_path / "objects" / "notes.txt"
    keep.write_text("not Knit's")
    code = ("import knit, json; removed = knit.cache.clear(); info = knit.cache.info(); "
            "print(json.dumps([removed, info['entries'] + info['programs']]))")
    environment = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), KNIT_CACHE_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=120)
    removed, left = json.loads(done.stdout)
    assert removed > 0 and left == 0 and keep.exists()


def test_backend_selection(monkeypatch):
    monkeypatch.setenv("KNIT_JIT_THRESHOLD", "0")  # a small kernel: compile it anyway
    softmax = load_example("softmax.py").softmax_kernel
    x = np.random.default_rng(1).standard_normal((128, 256)).astype(np.float32)
    c = knit.compile(softmax, x)
    jit_out = c.run(x)
    assert c.last_run["backend"] == "jit" and c.last_run["native"] > 0
    monkeypatch.setenv("KNIT_BACKEND", "reference")
    ref_out = c.run(x)
    assert c.last_run == {"backend": "reference", "native": 0, "interpreted": 0, "fallbacks": []}
    assert np.asarray(jit_out).tobytes() == np.asarray(ref_out).tobytes()
    monkeypatch.setenv("KNIT_BACKEND", "fast")
    with pytest.raises(ValueError, match="backend must be"):
        c.run(x)


# ---- when the JIT compiles (docs/jit.md) -------------------------------------------------------

# Runs the RMSNorm example (300 x 1024 bf16: below the work at which compiling pays when it runs
# once) five times, each run through a freshly compiled kernel, and prints each run's native
# instruction count and output hash.
REPEATED = textwrap.dedent("""
    import hashlib, json, sys
    import numpy as np, ml_dtypes
    sys.path.insert(0, "examples/kernels/python")
    import knit
    from rmsnorm import rmsnorm_kernel
    rng = np.random.default_rng(3)
    x = rng.standard_normal((300, 1024)).astype(ml_dtypes.bfloat16)
    w = rng.standard_normal(1024).astype(ml_dtypes.bfloat16)
    runs = []
    for _ in range(5):
        c = knit.compile(rmsnorm_kernel, x, w)
        out = c.run(x, w, check_races=False)
        runs.append([c.last_run["native"], hashlib.sha256(np.ascontiguousarray(out).tobytes()).hexdigest()])
    reference = knit.compile(rmsnorm_kernel, x, w).run(x, w, backend="reference", check_races=False)
    print(json.dumps({"runs": runs, "reference": hashlib.sha256(np.ascontiguousarray(reference).tobytes()).hexdigest(),
                      "compiled": knit.cache.info()["modules_compiled"]}))
""")


def run_repeated(cache_dir):
    environment = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), KNIT_CACHE_DIR=str(cache_dir),
                       KNIT_THREADS="2")
    environment.pop("KNIT_JIT_THRESHOLD", None)  # the default: compile when it pays
    done = subprocess.run([sys.executable, "-c", REPEATED], cwd=ROOT, env=environment, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_small_kernel_compiles_once_its_runs_would_have_paid_for_it(tmp_path):
    """Run once, the small kernel is interpreted (building its bodies would cost more than it
    saves); its repeated runs add up, a later run compiles and every run after it is native, with
    the same bytes as the reference backend throughout. A second process finds the bodies in the
    disk cache, which costs little to load: its first run is already native."""
    first = run_repeated(tmp_path)
    natives = [native for native, _ in first["runs"]]
    assert natives[0] == 0, first
    hot = next((i for i, n in enumerate(natives) if n > 0), None)
    assert hot is not None and all(n > 0 for n in natives[hot:]), first
    assert all(digest == first["reference"] for _, digest in first["runs"]), first
    assert first["compiled"] > 0
    second = run_repeated(tmp_path)
    assert all(native > 0 for native, _ in second["runs"]) and second["compiled"] == 0, second
    assert all(digest == first["reference"] for _, digest in second["runs"]), second


# ---- the trace + engine program cache ----------------------------------------------------------

KERNEL_FILE = textwrap.dedent("""
    import knit as nki
    import knit.isa as nisa
    import knit.language as nl
    from helper import scale_tile

    @nki.jit
    def scaled_copy(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        scale_tile(t, FACTOR)
        nisa.dma_copy(dst=out, src=t)
        return out
""")

HELPER_FILE = textwrap.dedent("""
    import knit.isa as nisa
    import knit.language as nl

    def scale_tile(t, factor):
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=factor)
""")

RUN_KERNEL = textwrap.dedent("""
    import json, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from kernel import scaled_copy
    x = np.arange(128 * 4, dtype=np.float32).reshape(128, 4)
    c = scaled_copy.compile(x)
    out = c(x)
    print(json.dumps({"cached": c.from_disk_cache, "first": float(np.asarray(out)[1, 0])}))
""")


def run_kernel_file(cache_dir, src_dir):
    environment = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), KNIT_CACHE_DIR=str(cache_dir))
    done = subprocess.run([sys.executable, "-c", RUN_KERNEL, str(src_dir)], env=environment, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def write_kernel(src_dir, factor, helper_op="nl.multiply"):
    (src_dir / "kernel.py").write_text(KERNEL_FILE.replace("FACTOR", repr(factor)))
    (src_dir / "helper.py").write_text(HELPER_FILE.replace("nl.multiply", helper_op))


@pytest.mark.slow
def test_program_cache_reuses_the_trace_until_a_source_changes(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    cache = tmp_path / "cache"
    write_kernel(src, 2.0)
    assert run_kernel_file(cache, src) == {"cached": False, "first": 8.0}
    assert run_kernel_file(cache, src) == {"cached": True, "first": 8.0}
    write_kernel(src, 3.0)  # the kernel's own file changed
    assert run_kernel_file(cache, src) == {"cached": False, "first": 12.0}
    write_kernel(src, 3.0, helper_op="nl.add")  # a file the trace's instructions come from changed
    assert run_kernel_file(cache, src) == {"cached": False, "first": 7.0}
    assert run_kernel_file(cache, src) == {"cached": True, "first": 7.0}


@pytest.mark.slow
def test_a_corrupt_program_entry_is_traced_again(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    cache = tmp_path / "cache"
    write_kernel(src, 2.0)
    run_kernel_file(cache, src)
    (entry,) = (cache / "programs").glob("*.knp")
    data = bytearray(entry.read_bytes())
    data[-10] ^= 0x01
    entry.write_bytes(bytes(data))
    assert run_kernel_file(cache, src) == {"cached": False, "first": 8.0}
    assert run_kernel_file(cache, src) == {"cached": True, "first": 8.0}
