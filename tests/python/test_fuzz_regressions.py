"""Regression tests for what the fuzz targets found (docs/reliability.md, "Runs and findings").

Each input here once crashed a target (an exception Knit did not turn into its own error); it
must now give Knit's answer: a cache miss that is rebuilt, or a Knit error naming the rule.
"""
import os

import pytest

import knit
import knit.cpp
from knit import _core
from test_cpp import knit_cli, settle, write_kernel_dir  # noqa: E402

TOO_LONG = "d" * 5000  # a path component longer than any file system's NAME_MAX


def _manifest_entries(objects):
    """(key, payload) of the cache entries that are C++ kernel files' manifests."""
    found = []
    for entry in objects.glob("*.o"):
        payload = _core.cache_load(str(objects), ".o", entry.stem)
        if payload is not None and payload.startswith(b"file "):
            found.append((entry.stem, payload))
    return found


@pytest.mark.slow
def test_a_manifest_naming_a_path_too_long_for_the_file_system_is_stale_not_an_exception(tmp_path):
    """fuzz_kernel_manifest: `std::filesystem::is_regular_file` threw "File name too long" out of
    the manifest reader, so a damaged manifest failed every later load of the file."""
    source = tmp_path / "src"
    source.mkdir()
    path = write_kernel_dir(source)
    # A folder the includes search that changed within the last second gets no manifest: the
    # kernel's folder is dated back, and the cache (created by the run) is not in it.
    settle(source)
    env = {"KNIT_CACHE_DIR": str(tmp_path / "cache")}
    args = ("run", path, "--shape", "64x32", "--shape", "64x32", "--reference", "2 * x0 + x1")
    first = knit_cli(*args, env=env)
    assert first[0] == 0, first[1] + first[2]
    objects = tmp_path / "cache" / "objects"
    (key, payload), = _manifest_entries(objects)
    stamp = payload.split(b" ")[1].decode()
    assert _core.cache_store(str(objects), ".o", key, f"file {stamp} {source}/{TOO_LONG}\n".encode())

    code, out, err = knit_cli(*args, env=env)
    assert code == 0, out + err
    assert "check output 0 vs NumPy expression" in out and "PASS" in out
    # The stale manifest was replaced by one naming the files the compile really read.
    (_, rewritten), = _manifest_entries(objects)
    assert TOO_LONG.encode() not in rewritten and path.encode() in rewritten


@pytest.mark.parametrize("action", [knit.cpp.load, knit.cpp.lint])
def test_a_kernel_file_name_too_long_for_the_file_system_is_a_knit_error(tmp_path, action):
    """The same exception from the file check of knit.cpp.load / knit.cpp.lint."""
    with pytest.raises(knit.KnitError, match=r"\[cpp-file\] no C\+\+ kernel file"):
        action(os.path.join(str(tmp_path), TOO_LONG + ".cpp"))
