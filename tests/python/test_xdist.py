"""pytest-xdist runs Knit's kernel test suites: the example kernel tests (examples/tests) pass
with two workers sharing one disk cache folder, as `pytest -n auto` would run them."""
import os
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.mark.slow
def test_the_example_kernel_tests_pass_on_two_xdist_workers(tmp_path):
    pytest.importorskip("xdist", reason="pytest-xdist is not installed (pip install pytest-xdist)")
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"), KNIT_CACHE_DIR=str(tmp_path / "cache"),
               KNIT_PROGRESS="0")
    done = subprocess.run([sys.executable, "-m", "pytest", os.path.join(REPO, "examples", "tests"), "-q", "-n", "2",
                           "-p", "knit.pytest_plugin", "-p", "no:cacheprovider"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    summary = done.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary and "error" not in summary, summary
    assert "bringing up nodes" in done.stdout  # it did run on xdist workers
