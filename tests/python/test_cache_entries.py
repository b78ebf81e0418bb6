"""Cache entries belong to their key (codegen/jit/disk_cache.h, docs/jit.md "The disk cache").

Two kernels with the same input shapes (the softmax and transpose examples at [256, 256]) have
program-cache entries that would each run if served for the other. Swapped, copied, or replaced
by something that is not a regular file, an entry is a miss: removed with a one-line warning and
rebuilt, never a wrong result, an error or a hang."""
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = textwrap.dedent("""
    import hashlib, json, sys
    import numpy as np
    sys.path.insert(0, "examples/kernels/python")
    import knit
    import softmax, transpose
    x = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)
    report = {}
    for name, module, kernel in (("softmax", softmax, softmax.softmax_kernel),
                                 ("transpose", transpose, transpose.transpose_kernel)):
        c = knit.compile(kernel, x)
        out = np.asarray(c(x))
        np.testing.assert_allclose(out, module.reference(x), rtol=2e-2, atol=1e-5)
        report[name] = {"cached": c.from_disk_cache, "native": c.last_run["native"],
                        "sha": hashlib.sha256(np.ascontiguousarray(out).tobytes()).hexdigest()}
    report["rejected"] = knit.cache.info()["entries_rejected"]
    print(json.dumps(report))
""")


def run(cache_dir, timeout=300):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), KNIT_CACHE_DIR=str(cache_dir),
               KNIT_JIT_THRESHOLD="0", KNIT_BACKEND="jit")
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    report["seconds"] = time.monotonic() - start
    report["warnings"] = [line for line in done.stderr.splitlines() if line.startswith("knit: warning:")]
    return report


def swap(a, b):
    data_a, data_b = a.read_bytes(), b.read_bytes()
    a.write_bytes(data_b)
    b.write_bytes(data_a)


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory):
    """A cache directory filled by one run, and that run's report."""
    cache = tmp_path_factory.mktemp("cache")
    cold = run(cache)
    assert not cold["softmax"]["cached"] and not cold["transpose"]["cached"]
    assert cold["softmax"]["native"] > 0 and cold["transpose"]["native"] > 0
    return cache, cold


def fresh_copy(warm_cache, tmp_path):
    cache, cold = warm_cache
    copy = tmp_path / "cache"
    subprocess.run(["cp", "-r", str(cache), str(copy)], check=True)
    return copy, cold


def test_swapped_program_entries_each_return_their_own_result(warm_cache, tmp_path):
    cache, cold = fresh_copy(warm_cache, tmp_path)
    programs = sorted((cache / "programs").glob("*.knp"))
    assert len(programs) == 2
    swap(*programs)
    swapped = run(cache)
    for name in ("softmax", "transpose"):
        assert swapped[name]["sha"] == cold[name]["sha"], name
        assert not swapped[name]["cached"], name  # rejected, traced again
    assert len(swapped["warnings"]) == 2
    assert all("written for another key" in w and ".knp" in w for w in swapped["warnings"])
    again = run(cache)  # rebuilt entries serve the next process
    assert again["softmax"]["cached"] and again["transpose"]["cached"] and not again["warnings"]
    assert (again["softmax"]["sha"], again["transpose"]["sha"]) == (cold["softmax"]["sha"], cold["transpose"]["sha"])


def test_a_copied_program_entry_is_a_miss(warm_cache, tmp_path):
    cache, cold = fresh_copy(warm_cache, tmp_path)
    first, second = sorted((cache / "programs").glob("*.knp"))
    second.write_bytes(first.read_bytes())
    copied = run(cache)
    assert {copied[n]["sha"] for n in ("softmax", "transpose")} == {cold[n]["sha"] for n in ("softmax", "transpose")}
    assert [w for w in copied["warnings"] if "written for another key" in w] == [
        f"knit: warning: ignored and removed the cache entry {second}: it was written for another key "
        f"(a swapped or copied entry); it will be rebuilt"]


def test_swapped_object_entries_are_a_miss_not_an_error(warm_cache, tmp_path):
    cache, cold = fresh_copy(warm_cache, tmp_path)
    objects = sorted((cache / "objects").glob("*.o"))
    assert len(objects) >= 2
    swap(objects[0], objects[1])
    swapped = run(cache)
    assert swapped["softmax"]["sha"] == cold["softmax"]["sha"]
    assert swapped["transpose"]["sha"] == cold["transpose"]["sha"]
    assert swapped["rejected"] >= 2
    assert sum("written for another key" in w and w.endswith("it will be rebuilt") for w in swapped["warnings"]) == 2


@pytest.mark.parametrize("kind", ["symlink to /dev/zero", "fifo"])
def test_an_entry_that_is_not_a_regular_file_is_ignored_quickly(warm_cache, tmp_path, kind):
    cache, cold = fresh_copy(warm_cache, tmp_path)
    replaced = [sorted((cache / "programs").glob("*.knp"))[0], sorted((cache / "objects").glob("*.o"))[0]]
    for path in replaced:
        path.unlink()
        if kind == "fifo":
            os.mkfifo(path)
        else:
            path.symlink_to("/dev/zero")
    report = run(cache, timeout=120)  # reading either would hang or exhaust memory
    assert (report["softmax"]["sha"], report["transpose"]["sha"]) == (cold["softmax"]["sha"], cold["transpose"]["sha"])
    reason = "it is a symbolic link" if kind != "fifo" else "it is not a regular file"
    for path in replaced:
        assert any(str(path) in w and reason in w for w in report["warnings"]), report["warnings"]
        assert path.is_file() and not path.is_symlink()  # rebuilt as a regular entry
    assert os.path.exists("/dev/zero")


def test_a_payload_given_in_pieces_loads_as_their_concatenation(tmp_path):
    from knit import _core

    folder = str(tmp_path / "programs")
    pieces = [b"meta\x00", b"", b"x" * 100_000, b"arrays"]
    assert _core.cache_store(folder, ".knp", "k" * 64, pieces)
    assert _core.cache_load(folder, ".knp", "k" * 64) == b"".join(pieces)
    with pytest.raises((TypeError, RuntimeError)):
        _core.cache_store(folder, ".knp", "i" * 64, [b"ok", "not bytes"])
