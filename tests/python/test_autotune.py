"""@knit.autotune (docs/sweep.md): the choice is the fastest config by simulated latency (checked
against knit.profile of every config), the tuned kernel computes the right matmul, and the
choice is kept in memory and on disk, so that a second process does not sweep again."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import knit
import knit.typing as nt

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
STAGES_DIR = os.path.join(REPO, "examples", "kernels", "python", "matmul")
sys.path.insert(0, STAGES_DIR)
import stages  # noqa: E402

CONFIGS = {"tiles_m": [1, 2, 4], "tiles_n": [1, 2]}


@knit.autotune(configs=CONFIGS, key=["lhsT", "rhs"])
@knit.jit
def tuned_mn(lhsT, rhs, tiles_m=1, tiles_n=1):
    return stages.blocked_mn(lhsT, rhs, tiles_m=tiles_m, tiles_n=tiles_n)


def fastest_by_profile(lhsT, rhs, target):
    """The config with the lowest knit.profile latency, ties to the first (the sweep's order)."""
    timed = [(knit.profile(stages.blocked_mn, lhsT, rhs, target=target, tiles_m=m, tiles_n=n).latency_us, i,
              {"tiles_m": m, "tiles_n": n})
             for i, (m, n) in enumerate((m, n) for m in CONFIGS["tiles_m"] for n in CONFIGS["tiles_n"])]
    return min(timed)[2]


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_best_config_is_the_fastest_config(target):
    a, b = nt.tensor[[512, 512], "bfloat16"], nt.tensor[[512, 1024], "bfloat16"]
    assert tuned_mn.best_config(a, b, target=target) == fastest_by_profile(a, b, target)


def test_the_tuned_kernel_runs_its_best_config_and_computes_the_matmul():
    rng = np.random.default_rng(1)
    lhsT = rng.standard_normal((256, 512)).astype(np.float32)
    rhs = rng.standard_normal((256, 1024)).astype(np.float32)
    before = dict(tuned_mn.stats)
    out = tuned_mn(lhsT, rhs)
    np.testing.assert_allclose(out, lhsT.T.astype(np.float64) @ rhs, rtol=1e-4, atol=1e-4)
    best = tuned_mn.best_config(lhsT, rhs)
    assert best == fastest_by_profile(nt.tensor[[256, 512], "float32"], nt.tensor[[256, 1024], "float32"], "trn2")
    assert tuned_mn.stats["memory_hits"] == before["memory_hits"] + 1  # best_config after the call: no new sweep
    assert tuned_mn.compile(lhsT, rhs) is tuned_mn.base.compile(lhsT, rhs, **best)  # what the call ran
    assert tuned_mn.stats["sweeps"] + tuned_mn.stats["disk_hits"] == before["sweeps"] + before["disk_hits"] + 1


def test_bad_configs_and_keys_are_clear_errors():
    with pytest.raises(ValueError, match="has no parameter tile_m"):
        knit.autotune(configs=[{"tile_m": 1}])(stages.blocked_mn)
    with pytest.raises(ValueError, match="has no parameter shape"):
        knit.autotune(configs=[{"tiles_m": 1}], key=["shape"])(stages.blocked_mn)
    with pytest.raises(ValueError, match="at least one config"):
        knit.autotune(configs=[])(stages.blocked_mn)


def test_when_no_config_runs_the_call_says_why():
    never = knit.autotune(configs=[{"tiles_m": 3}])(stages.blocked_mn)
    with pytest.raises(ValueError, match="no configuration ran.*AssertionError"):
        never.best_config(nt.tensor[[512, 512], "bfloat16"], nt.tensor[[512, 1024], "bfloat16"])


SCRIPT = textwrap.dedent("""\
    import json, sys
    sys.path.insert(0, {stages!r})
    import knit, knit.typing as nt, stages

    @knit.autotune(configs={configs!r}, key=["lhsT", "rhs"])
    @knit.jit
    def tuned(lhsT, rhs, tiles_m=1, tiles_n=1):
        return stages.blocked_mn(lhsT, rhs, tiles_m=tiles_m, tiles_n=tiles_n)

    if __name__ == "__main__":
        n = int(sys.argv[1])
        config = tuned.best_config(nt.tensor[[512, 512], "bfloat16"], nt.tensor[[512, n], "bfloat16"])
        print(json.dumps({{"config": config, "stats": tuned.stats}}))
""")


def run_script(path, n, cache_dir):
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"), KNIT_CACHE_DIR=str(cache_dir), KNIT_PROGRESS="0")
    done = subprocess.run([sys.executable, str(path), str(n)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_second_process_reuses_the_choice_from_the_disk_cache(tmp_path):
    script = tmp_path / "tune.py"
    script.write_text(SCRIPT.format(stages=STAGES_DIR, configs=CONFIGS))
    first = run_script(script, 1024, tmp_path / "cache")
    assert first["stats"] == {"sweeps": 1, "memory_hits": 0, "disk_hits": 0}
    second = run_script(script, 1024, tmp_path / "cache")
    assert second["stats"] == {"sweeps": 0, "memory_hits": 0, "disk_hits": 1}
    assert second["config"] == first["config"]
    other_shape = run_script(script, 2048, tmp_path / "cache")  # another key: a sweep of its own
    assert other_shape["stats"]["sweeps"] == 1
    script.write_text(SCRIPT.format(stages=STAGES_DIR, configs={"tiles_m": [1, 2], "tiles_n": [1]}))
    assert run_script(script, 1024, tmp_path / "cache")["stats"]["sweeps"] == 1  # other configs, other entry


def test_an_autotuned_kernel_is_a_torch_op():
    torch = pytest.importorskip("torch", reason="knit.torch needs PyTorch")
    import knit.torch

    op = knit.torch.op("knit_test_autotune::matmul", tuned_mn)
    rng = np.random.default_rng(2)
    lhsT = torch.from_numpy(rng.standard_normal((256, 512)).astype(np.float32))
    rhs = torch.from_numpy(rng.standard_normal((256, 2048)).astype(np.float32))
    sweeps = tuned_mn.stats["sweeps"]
    out = op(lhsT, rhs)
    assert tuned_mn.stats["sweeps"] == sweeps + 1
    np.testing.assert_allclose(out.numpy(), lhsT.double().T.numpy() @ rhs.double().numpy(), rtol=1e-4, atol=1e-4)
    sweeps = tuned_mn.stats["sweeps"]
    assert tuned_mn.best_config(lhsT, rhs) == fastest_by_profile(
        nt.tensor[[256, 512], "float32"], nt.tensor[[256, 2048], "float32"], "trn2")
    assert tuned_mn.stats["sweeps"] == sweeps  # the op's call chose it already
