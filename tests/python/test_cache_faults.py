"""The disk cache under faults (docs/jit.md "The disk cache", issue 26 item 5): eight processes
filling one empty cache at once all succeed and never read a torn entry; damaged entries (truncated,
corrupted, another version's, another key's) are each removed with one warning and rebuilt; a
read-only or full cache directory costs only speed, with one warning; the size cap holds.

Every run checks its outputs against NumPy (the examples' `reference`) inside the child process."""
import ctypes
import json
import os
import resource
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = textwrap.dedent("""
    import hashlib, json, sys
    import numpy as np
    sys.path.insert(0, "examples/kernels/python")
    import knit
    import softmax, transpose
    x = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)
    report = {"cached": [], "sha": []}
    for module, kernel in ((softmax, softmax.softmax_kernel), (transpose, transpose.transpose_kernel)):
        c = knit.compile(kernel, x)
        out = np.asarray(c(x))
        np.testing.assert_allclose(out, module.reference(x), rtol=2e-2, atol=1e-5)
        assert c.last_run["native"] > 0, c.last_run
        report["cached"].append(c.from_disk_cache)
        report["sha"].append(hashlib.sha256(np.ascontiguousarray(out).tobytes()).hexdigest())
    report["info"] = knit.cache.info()
    print(json.dumps(report))
""")


def environment(cache_dir, **extra):
    return dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), KNIT_CACHE_DIR=str(cache_dir),
                KNIT_JIT_THRESHOLD="0", KNIT_BACKEND="jit", **extra)


def finish(done_code, out, err):
    assert done_code == 0, err
    report = json.loads(out.strip().splitlines()[-1])
    report["warnings"] = [line for line in err.splitlines() if line.startswith("knit: warning:")]
    return report


def run(cache_dir, preexec_fn=None, **extra):
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=environment(cache_dir, **extra),
                          capture_output=True, text=True, timeout=300, preexec_fn=preexec_fn)
    return finish(done.returncode, done.stdout, done.stderr)


def knit_files(cache_dir):
    return sorted(p for p in cache_dir.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """A cache filled by one run, and that run's report (the outputs every later run must match)."""
    cache = tmp_path_factory.mktemp("warm")
    report = run(cache)
    assert report["cached"] == [False, False] and not report["warnings"]
    return cache, report


def copy_of(warm, tmp_path):
    cache = tmp_path / "cache"
    subprocess.run(["cp", "-a", str(warm[0]), str(cache)], check=True)
    return cache


@pytest.mark.slow
def test_eight_processes_fill_one_empty_cache_at_once(tmp_path, warm):
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT], cwd=ROOT, env=environment(tmp_path),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(8)]
    outputs = [p.communicate(timeout=600) for p in procs]
    reports = [finish(p.returncode, *out) for p, out in zip(procs, outputs)]
    for report in reports:
        assert report["sha"] == warm[1]["sha"]
        assert report["warnings"] == []  # a torn or half-written entry would be rejected, with a warning
        assert report["info"]["entries_rejected"] == 0
    assert not [p for p in knit_files(tmp_path) if ".tmp." in p.name]  # no temporary file left behind
    after = run(tmp_path)
    assert after["cached"] == [True, True] and after["info"]["modules_compiled"] == 0 and not after["warnings"]
    assert after["sha"] == warm[1]["sha"]


def damage(cache):
    """Damages four entries, one each way; returns {path: the reason its warning must give}."""
    programs = sorted((cache / "programs").glob("*.knp"))
    objects = sorted((cache / "objects").glob("*.o"))
    assert len(programs) == 2 and len(objects) >= 4
    truncated, flipped, foreign, copied = programs[0], objects[0], objects[1], objects[2]
    truncated.write_bytes(truncated.read_bytes()[:len(truncated.read_bytes()) // 2])
    data = bytearray(flipped.read_bytes())
    data[len(data) // 2] ^= 0x01
    flipped.write_bytes(bytes(data))
    foreign.write_bytes(b"KNITENT0" + foreign.read_bytes()[8:])  # another (older) entry format
    copied.write_bytes(objects[3].read_bytes())
    return {truncated: "checksum mismatch", flipped: "checksum mismatch",
            foreign: "not a cache entry of this Knit version", copied: "written for another key"}


@pytest.mark.slow
def test_damaged_entries_are_each_removed_with_one_warning_and_rebuilt(tmp_path, warm):
    cache = copy_of(warm, tmp_path)
    expected = damage(cache)
    report = run(cache)
    assert report["sha"] == warm[1]["sha"]
    assert len(report["warnings"]) == len(expected), report["warnings"]
    for path, reason in expected.items():
        (line,) = [w for w in report["warnings"] if str(path) in w]
        assert reason in line and line.endswith("it will be rebuilt"), line
        assert path.is_file()  # rebuilt
    again = run(cache)
    assert again["cached"] == [True, True] and again["info"]["modules_compiled"] == 0 and not again["warnings"]


PR_CAPBSET_DROP, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 24, 1, 2


def without_root_override():
    """Root writes anywhere: the child drops the capabilities that let it ignore permissions (from
    the bounding set, so the exec'd Python has them neither). A non-root child needs nothing."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def test_a_read_only_cache_directory_works_uncached_with_one_warning(tmp_path, warm):
    empty = tmp_path / "empty"
    empty.mkdir()
    filled = copy_of(warm, tmp_path)
    for folder in [empty, filled, *filled.iterdir()]:
        folder.chmod(0o555)
    try:
        cold = run(empty, preexec_fn=without_root_override)
        served = run(filled, preexec_fn=without_root_override)
    finally:
        for folder in [empty, filled, *filled.iterdir()]:
            folder.chmod(0o755)
    assert cold["sha"] == served["sha"] == warm[1]["sha"]
    assert cold["cached"] == [False, False] and knit_files(empty) == []
    (warning,) = cold["warnings"]
    assert f"cannot write the cache directory {empty}" in warning and "without caching" in warning
    assert served["cached"] == [True, True] and served["warnings"] == []  # reading needs no writes


def fill_limit():
    """The child's files may not grow past 1 byte (RLIMIT_FSIZE): every cache write fails the way a
    full disk fails it, midway through (Python ignores SIGXFSZ, so the write returns EFBIG)."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (1, 1))


def test_a_full_cache_directory_works_uncached_with_one_warning(tmp_path, warm):
    report = run(tmp_path, preexec_fn=fill_limit)
    assert report["sha"] == warm[1]["sha"] and report["cached"] == [False, False]
    (warning,) = report["warnings"]
    assert f"cannot write the cache directory {tmp_path}" in warning and "File too large" in warning
    assert knit_files(tmp_path) == []  # no half-written entry or temporary file is left


def test_the_size_cap_evicts_the_least_recently_used_files(tmp_path, warm):
    """Three old 400 KiB entries and a 1 MiB cap: the run's own (newest) entries stay, old ones
    go, oldest first, until the cache is under the cap; files not Knit's are never touched."""
    objects = tmp_path / "objects"
    objects.mkdir()
    old = [objects / (f"{i:064x}" + ".o") for i in range(3)]
    for age, path in enumerate(old):
        path.write_bytes(b"\0" * (400 << 10))
        os.utime(path, (1e9 - age, 1e9 - age))  # 2001: old[2] is the least recently used
    notes = objects / "notes.txt"
    notes.write_bytes(b"\0" * (2 << 20))
    report = run(tmp_path, KNIT_CACHE_MAX_MB="1")
    assert report["sha"] == warm[1]["sha"]
    info = report["info"]
    assert info["cap_bytes"] == 1 << 20
    # 1.2 MiB of old entries and the run's ~20 KiB: removing the oldest brings it under 90% of the cap
    assert [p.exists() for p in old] == [True, True, False]
    assert notes.exists()
    on_disk = sum(p.stat().st_size for p in knit_files(tmp_path) if p != notes)
    assert info["total_bytes"] == on_disk <= 1 << 20
    assert info["programs"] == 2 and info["entries"] == len(list(objects.glob("*.o")))


CPP_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import knit.cpp
    a, b = np.full((130, 64), 1.5, np.float32), np.arange(130 * 64, dtype=np.float32).reshape(130, 64)
    for _ in range(2):  # the second load tries no header build and no write: the folder is known
        kernels = knit.cpp.load("examples/kernels/cpp/tensor_add.cpp")
        np.testing.assert_array_equal(kernels.tensor_add(a, b), a + b)
    print(json.dumps({"from_cache": kernels.from_cache}))
""")


@pytest.mark.slow
def test_a_cpp_kernel_file_in_a_read_only_cache_compiles_with_one_warning(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o555)
    try:
        done = subprocess.run([sys.executable, "-c", CPP_SCRIPT], cwd=ROOT, capture_output=True, text=True,
                              timeout=600, preexec_fn=without_root_override,
                              env=environment(cache, KNIT_PREBUILT_PCH="0"))  # the header goes to the cache too
    finally:
        cache.chmod(0o755)
    report = finish(done.returncode, done.stdout, done.stderr)
    assert report["from_cache"] is False
    (warning,) = report["warnings"]
    assert f"cannot write the cache directory {cache}" in warning
    assert knit_files(cache) == []
