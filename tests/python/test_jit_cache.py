"""The native path's disk cache and backend selection (docs/jit.md): a second process loads the
compiled code instead of compiling it; corrupt entries are detected and rebuilt; concurrent
processes share a directory safely; KNIT_CACHE=0 writes nothing; KNIT_BACKEND picks the backend."""
import hashlib
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
    environment = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), KNIT_CACHE_DIR=str(cache_dir), **env)
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=environment, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def entries(cache_dir):
    objects = cache_dir / "objects"
    return sorted(objects.glob("*.o")) if objects.exists() else []


def test_second_process_loads_compiled_code_from_the_cache(tmp_path):
    cold = run_script(tmp_path)
    assert cold["modules_compiled"] > 0 and cold["modules_from_cache"] == 0
    assert cold["directory"] == str(tmp_path / "objects") and len(entries(tmp_path)) == cold["entries"] > 0
    warm = run_script(tmp_path)
    assert warm["modules_compiled"] == 0
    assert warm["modules_from_cache"] == cold["modules_compiled"]
    assert warm["outputs"] == cold["outputs"]


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


def test_concurrent_processes_share_one_directory(tmp_path):
    environment = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), KNIT_CACHE_DIR=str(tmp_path))
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


def test_cache_off_writes_nothing(tmp_path):
    stats = run_script(tmp_path, KNIT_CACHE="0")
    assert stats["directory"] == "" and stats["modules_compiled"] > 0
    assert not (tmp_path / "objects").exists()


def test_clear_removes_only_cache_entries(tmp_path):
    run_script(tmp_path)
    keep = tmp_path / "objects" / "notes.txt"
    keep.write_text("not Knit's")
    code = "import knit, json; print(json.dumps([knit.cache.clear(), knit.cache.info()['entries']]))"
    environment = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), KNIT_CACHE_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=120)
    removed, left = json.loads(done.stdout)
    assert removed > 0 and left == 0 and keep.exists()


def test_backend_selection(monkeypatch):
    softmax = load_example("softmax.py").softmax_kernel
    x = np.random.default_rng(1).standard_normal((128, 256)).astype(np.float32)
    c = knit.compile(softmax, x)
    jit_out = c.run(x)
    assert c.last_run["backend"] == "jit" and c.last_run["native"] > 0
    monkeypatch.setenv("KNIT_BACKEND", "reference")
    ref_out = c.run(x)
    assert c.last_run == {"backend": "reference", "native": 0, "interpreted": 0}
    assert np.asarray(jit_out).tobytes() == np.asarray(ref_out).tobytes()
    monkeypatch.setenv("KNIT_BACKEND", "fast")
    with pytest.raises(ValueError, match="backend must be"):
        c.run(x)
