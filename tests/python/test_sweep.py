"""knit.sweep (docs/sweep.md): grid expansion, failed configs as rows, ranking, CSV / JSON round
trips, the executors agreeing point for point, worker-death retry, resume, the progress bar and
the plot. The tunable kernel is the blocked matmul of examples/kernels/python/matmul/stages.py at
small shapes, whose DMA bytes are counted by hand from its loops."""
import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import knit
import knit.typing as nt
from knit import _sweep_exec, cli
from knit._sweep_plot import pareto_front
from knit.sweep import SweepPoint, SweepResult, expand

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
STAGES_DIR = os.path.join(REPO, "examples", "kernels", "python", "matmul")
sys.path.insert(0, STAGES_DIR)
import stages  # noqa: E402

K, M, N = 512, 512, 1024
BF16 = "bfloat16"
INPUTS = (nt.tensor[[K, M], BF16], nt.tensor[[K, N], BF16])
SPACE = {"tiles_m": [1, 2, 3, 4], "tiles_n": [1, 2]}


def assert_line():
    """The line of blocked_mn's block-size assert (counted from the file, not from Knit)."""
    with open(stages.__file__) as f:
        lines = f.read().splitlines()
    start = next(i for i, text in enumerate(lines) if text.startswith("def blocked_mn"))
    return next(i for i in range(start, len(lines)) if "assert M % BM == 0" in lines[i]) + 1


def blocked_mn_dma_bytes(k, m, n, tiles_n, itemsize=2):
    """blocked_mn's HBM traffic: rhs once, the lhsT strip once per column block, the output once."""
    column_blocks = n // (tiles_n * 512)
    return itemsize * (k * n + column_blocks * k * m + m * n)


@pytest.fixture(scope="module")
def grid():
    return knit.sweep(stages.blocked_mn, SPACE, INPUTS, target="trn2", executor="inline")


# ---- the space ---------------------------------------------------------------------------------


def test_a_grid_is_the_cartesian_product_with_the_last_key_fastest():
    assert expand({"a": [1, 2], "b": (3, 4, 5)}) == [
        {"a": 1, "b": 3}, {"a": 1, "b": 4}, {"a": 1, "b": 5}, {"a": 2, "b": 3}, {"a": 2, "b": 4}, {"a": 2, "b": 5}]
    assert expand({"a": range(2), "fixed": "x"}) == [{"a": 0, "fixed": "x"}, {"a": 1, "fixed": "x"}]
    assert expand([{"a": 2}, {"a": 1, "b": 0}]) == [{"a": 2}, {"a": 1, "b": 0}]
    assert expand({}) == [{}]


def test_bad_spaces_and_unknown_parameters_are_clear_errors():
    with pytest.raises(TypeError, match="dict of lists"):
        expand(42)
    with pytest.raises(ValueError, match="identifiers"):
        expand({"latency_us": [1]})  # would collide with a result column
    with pytest.raises(TypeError, match="has no parameter tile_m"):
        knit.sweep(stages.blocked_mn, {"tile_m": [1]}, INPUTS)  # misspelt tunable
    with pytest.raises(ValueError, match="metric"):
        knit.sweep(stages.blocked_mn, {"tiles_m": [1]}, INPUTS, metric="speed")
    with pytest.raises(ValueError, match="executor"):
        knit.sweep(stages.blocked_mn, {"tiles_m": [1]}, INPUTS, executor="threads")


# ---- points --------------------------------------------------------------------------------------


def test_every_config_is_a_point_and_failed_ones_carry_their_error(grid):
    assert [p.config for p in grid.points] == expand(SPACE)
    assert [p.index for p in grid.points] == list(range(8))
    failed = [p for p in grid.points if not p.ok]
    assert [p.config["tiles_m"] for p in failed] == [3, 3]  # 512 rows do not split into blocks of 384
    line = assert_line()
    for p in failed:
        assert p.latency_us is None and p.mfu is None and p.sbuf_high_water is None
        assert p.error_file == os.path.abspath(stages.__file__) and p.error_line == line
        assert p.error.startswith(f"stages.py:{line}: AssertionError: assert M % BM == 0")
    for p in grid.points:
        if p.ok:
            assert p.dma_bytes == blocked_mn_dma_bytes(K, M, N, p.config["tiles_n"])
            assert 0 < p.mfu <= 1 and 0 < p.hfu <= 1 and p.latency_us > 0
            assert set(p.utilization) >= {"pe", "act", "dve", "pool", "dma0"}
            assert p.instructions > 0 and p.compile_s >= 0 and p.simulate_s >= 0


def test_a_point_measures_what_profile_and_the_compiled_program_report(grid):
    p = grid.points[7]  # tiles_m=4, tiles_n=2
    prof = knit.profile(stages.blocked_mn, *INPUTS, target="trn2", tiles_m=4, tiles_n=2)
    stats = knit.compile(stages.blocked_mn, *INPUTS, target="trn2", tiles_m=4, tiles_n=2).stats
    assert p.latency_us == prof.latency_us and p.mfu == prof.mfu
    assert (p.sbuf_high_water, p.psum_high_water) == (stats["sbuf_high_water"], stats["psum_high_water"])
    assert p.instructions == sum(prof.instructions.values())


def test_best_is_the_fastest_and_ranked_puts_failures_last(grid):
    ok = [p for p in grid.points if p.ok]
    fastest = min(ok, key=lambda p: p.latency_us)
    assert grid.best() is fastest
    ranked = grid.ranked()
    assert [p.latency_us for p in ranked[:6]] == sorted(p.latency_us for p in ok)
    assert all(not p.ok for p in ranked[6:])
    by_mfu = SweepResult(grid.points, "blocked_mn", "trn2", metric="mfu")
    assert by_mfu.best().mfu == max(p.mfu for p in ok)
    table = grid.table().splitlines()
    assert "8 points, 2 failed" in table[0]
    assert table[2].split()[:3] == ["1", str(fastest.config["tiles_m"]), str(fastest.config["tiles_n"])]
    assert "AssertionError" in table[-1]


def test_best_of_a_sweep_where_nothing_ran_says_why():
    result = knit.sweep(stages.blocked_mn, {"tiles_m": [3]}, INPUTS, executor="inline")
    with pytest.raises(ValueError, match="no configuration ran.*AssertionError"):
        result.best()


def test_an_inputs_function_sweeps_shapes_and_its_keys_are_not_passed_to_the_kernel():
    def inputs(config):
        return nt.tensor[[K, config["m"]], BF16], nt.tensor[[K, N], BF16]

    result = knit.sweep(stages.blocked_mn, {"m": [256, 512], "tiles_m": [1], "tiles_n": [2]}, inputs, executor="inline")
    assert all(p.ok for p in result.points)
    assert [p.dma_bytes for p in result.points] == [blocked_mn_dma_bytes(K, m, N, 2) for m in (256, 512)]


def test_an_inputs_function_that_raises_fails_only_its_point():
    def inputs(config):
        if config["tiles_m"] == 2:
            raise ValueError("no such shape")
        return INPUTS

    result = knit.sweep(stages.blocked_mn, {"tiles_m": [1, 2]}, inputs, executor="inline")
    assert result.points[0].ok
    assert "inputs(config) failed" in result.points[1].error and "no such shape" in result.points[1].error


# ---- functional checks ---------------------------------------------------------------------------


def matmul_close(outputs, inputs):
    lhsT, rhs = (a.astype(np.float64) for a in inputs)
    return np.allclose(outputs, lhsT.T @ rhs, rtol=1e-4, atol=1e-4)


def always_wrong(outputs, inputs):
    return False


def raises_in_check(outputs, inputs):
    raise RuntimeError("reference unavailable")


def small_arrays():
    rng = np.random.default_rng(0)
    return rng.standard_normal((256, 256)).astype(np.float32), rng.standard_normal((256, 1024)).astype(np.float32)


def test_check_runs_each_point_functionally_against_a_numpy_reference():
    result = knit.sweep(stages.blocked_mn, {"tiles_m": [1, 2], "tiles_n": [1, 2]}, small_arrays(),
                        check=matmul_close, executor="inline")
    assert all(p.ok and p.check is True for p in result.points)
    timing_only = knit.sweep(stages.blocked_mn, {"tiles_m": [1, 2], "tiles_n": [1, 2]}, small_arrays(),
                             executor="inline")
    assert [p.latency_us for p in result.points] == [p.latency_us for p in timing_only.points]
    assert all(p.check is None for p in timing_only.points)


def test_a_failed_or_raising_check_fails_the_point():
    wrong = knit.sweep(stages.blocked_mn, {"tiles_m": [1, 2]}, small_arrays(), check=always_wrong,
                       executor="inline")
    assert all(p.check is False and p.latency_us is None for p in wrong.points)
    assert wrong.points[0].error == "check failed: check(outputs, inputs) returned False"
    raising = knit.sweep(stages.blocked_mn, {"tiles_m": [1]}, small_arrays(), check=raises_in_check,
                         executor="inline")
    p = raising.points[0]
    assert p.error_file == os.path.abspath(__file__) and "check failed: RuntimeError: reference unavailable" in p.error
    with_placeholders = knit.sweep(stages.blocked_mn, {"tiles_m": [1]}, INPUTS, check=matmul_close,
                                   executor="inline")
    assert "needs real arrays" in with_placeholders.points[0].error


# ---- files ---------------------------------------------------------------------------------------


def test_csv_and_json_round_trip_every_field(grid, tmp_path):
    expected = [p.measured() for p in grid.points]
    back = SweepResult.from_csv(grid.to_csv(tmp_path / "r.csv") and tmp_path / "r.csv")
    assert [p.measured() for p in back.points] == expected
    assert [p.measured() for p in SweepResult.from_csv(grid.to_csv()).points] == expected
    again = SweepResult.from_json(grid.to_json(tmp_path / "r.json") and tmp_path / "r.json")
    assert [p.measured() for p in again.points] == expected
    assert (again.kernel_name, again.target, again.metric) == ("blocked_mn", "trn2", "latency")
    assert json.loads(grid.to_json())["schema_version"] == 1  # docs/cli.md
    header = grid.to_csv().splitlines()[0].split(",")
    assert header[:4] == ["index", "tiles_m", "tiles_n", "latency_us"] and "util_pe" in header


def test_to_pandas_has_one_row_per_point(grid):
    pandas = pytest.importorskip("pandas", reason="to_pandas needs pandas (pip install pandas)")
    frame = grid.to_pandas()
    assert isinstance(frame, pandas.DataFrame) and len(frame) == 8
    assert list(frame["tiles_m"]) == [1, 1, 2, 2, 3, 3, 4, 4]
    assert frame["latency_us"].min() == grid.best().latency_us


def test_plot_writes_a_png_and_the_pareto_front_is_the_undominated_points(grid, tmp_path):
    def pt(sbuf, latency):
        return SweepPoint(config={}, latency_us=latency, sbuf_high_water=sbuf)

    a, b, c, d = pt(10, 50.0), pt(20, 40.0), pt(20, 45.0), pt(30, 41.0)
    assert pareto_front([d, c, b, a, SweepPoint(config={}, error="x")]) == [a, b]
    pytest.importorskip("matplotlib", reason="SweepResult.plot needs matplotlib")
    path = grid.plot(tmp_path / "sweep.png")
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


# ---- executors -----------------------------------------------------------------------------------


def test_the_process_pool_gives_the_same_points_as_inline(grid):
    pooled = knit.sweep(stages.blocked_mn, SPACE, INPUTS, target="trn2", executor="process")
    assert pooled.executor == "process"
    assert [p.measured() for p in pooled.points] == [p.measured() for p in grid.points]


def test_no_executor_runs_tiny_sweeps_inline_and_others_on_the_pool(monkeypatch):
    monkeypatch.delenv("KNIT_RAY_ADDRESS", raising=False)
    assert _sweep_exec.choose(None, 3) == "inline" and _sweep_exec.choose(None, 4) == "process"
    monkeypatch.setenv("KNIT_RAY_ADDRESS", "auto")
    assert _sweep_exec.choose(None, 3) == "ray" and _sweep_exec.choose("inline", 100) == "inline"


def test_chunks_cover_every_point_once_about_four_per_worker():
    units = [(i, {}, (), {}) for i in range(100)]
    for workers, count in ((1, 4), (2, 8), (5, 20), (64, 100)):
        work = _sweep_exec.chunks(units, workers)
        assert sorted(u for chunk in work for u in chunk) == units
        assert len(work) == count and max(len(c) for c in work) <= _sweep_exec.MAX_CHUNK
    assert [len(c) for c in _sweep_exec.chunks(units * 10, 1)][:2] == [32, 32]  # 1000 points: 32 chunks of 31-32
    assert _sweep_exec.chunks(units, 5)[0][:3] == [units[0], units[20], units[40]]  # strided: neighbours apart


@knit.jit
def dies_once(lhsT, rhs, tiles_m=1):
    """blocked_mn, except that the first trace with tiles_m=2 kills its process (when the test
    names a marker file): a worker dying in the middle of a chunk."""
    marker = os.environ.get("KNIT_TEST_SWEEP_DIE_MARKER")
    if marker and tiles_m == 2 and not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(3)
    return stages.blocked_mn(lhsT, rhs, tiles_m=tiles_m)


def test_a_chunk_whose_worker_dies_runs_again(tmp_path, monkeypatch):
    marker = tmp_path / "died"
    monkeypatch.setenv("KNIT_TEST_SWEEP_DIE_MARKER", str(marker))
    result = knit.sweep(dies_once, {"tiles_m": [1, 2, 4, 1, 2, 4]}, INPUTS, executor="process")
    assert marker.exists()  # a worker did die
    assert all(p.ok for p in result.points), result.table()
    inline = knit.sweep(stages.blocked_mn, {"tiles_m": [1, 2, 4, 1, 2, 4]}, INPUTS, executor="inline")
    assert [p.latency_us for p in result.points] == [p.latency_us for p in inline.points]


def test_a_kernel_other_processes_cannot_import_runs_inline_with_a_warning():
    @knit.jit
    def local(lhsT, rhs, tiles_m=1):
        return stages.blocked_mn(lhsT, rhs, tiles_m=tiles_m)

    with pytest.warns(UserWarning, match="not a Python kernel defined at a module's top level"):
        result = knit.sweep(local, {"tiles_m": [1, 2, 4, 1]}, INPUTS)
    assert result.executor == "inline" and all(p.ok for p in result.points)
    with pytest.raises(ValueError, match="executor='process'"):
        knit.sweep(local, {"tiles_m": [1, 2]}, INPUTS, executor="process")


# ---- resume --------------------------------------------------------------------------------------


def test_resume_skips_the_configs_already_in_the_file(grid, tmp_path):
    log = tmp_path / "sweep.jsonl"
    first = knit.sweep(stages.blocked_mn, {"tiles_m": [1, 2], "tiles_n": [1, 2]}, INPUTS, executor="inline",
                       resume=log)
    assert len(log.read_text().splitlines()) == 4
    # An interrupted sweep: the file lost its last record and ends in half a line.
    lines = log.read_text().splitlines()
    log.write_text("\n".join(lines[:3]) + "\n" + lines[3][:20])
    resumed = knit.sweep(stages.blocked_mn, SPACE, INPUTS, executor="inline", resume=log)
    assert [p.measured() for p in resumed.points] == [p.measured() for p in grid.points]
    records = log.read_text().splitlines()[4:]  # after the 3 kept and the broken line
    assert len(records) == 5  # 8 points, 3 were done
    assert [p.measured() for p in first.points] == [resumed.points[i].measured() for i in (0, 1, 2, 3)]
    done = knit.sweep(stages.blocked_mn, SPACE, INPUTS, executor="inline", resume=log)
    assert done.executor == "resume" and [p.measured() for p in done.points] == [p.measured() for p in grid.points]
    other_target = knit.sweep(stages.blocked_mn, {"tiles_m": [1]}, INPUTS, target="trn1", resume=log)
    assert other_target.executor == "inline"  # a record of another target is not this point


# ---- progress ------------------------------------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_progress_bar_shows_points_and_failures_on_a_terminal_only(monkeypatch):
    pytest.importorskip("tqdm", reason="the progress bar needs tqdm (pip install tqdm)")
    for progress, tty, shown in (("1", True, True), ("0", True, False), ("1", False, False)):
        monkeypatch.setenv("KNIT_PROGRESS", progress)
        err = _Terminal() if tty else io.StringIO()
        monkeypatch.setattr(sys, "stderr", err)
        knit.sweep(stages.blocked_mn, {"tiles_m": [1, 3]}, INPUTS, executor="inline")
        text = err.getvalue()
        assert ("knit sweep" in text and "2/2" in text and "failed=1" in text) == shown, text
        assert shown or text == ""


# ---- Ray -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray cluster of 2 CPUs for this module's Ray tests, shut down after them. Its workers
    import Knit from this checkout (PYTHONPATH, which they inherit)."""
    ray = pytest.importorskip("ray", reason="Ray is optional (pip install 'knit[ray]'); ./dev installs it")
    before = os.environ.get("PYTHONPATH")
    paths = [os.path.join(REPO, "python"), STAGES_DIR] + ([before] if before else [])
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before


@pytest.mark.slow  # the cluster's start: 3 s
def test_ray_gives_the_same_points_as_inline(ray_cluster, grid):
    on_ray = knit.sweep(stages.blocked_mn, SPACE, INPUTS, target="trn2", executor="ray")
    assert on_ray.executor == "ray"
    assert [p.measured() for p in on_ray.points] == [p.measured() for p in grid.points]


@pytest.mark.slow  # the cluster's start: 3 s
def test_knit_ray_address_sends_an_unnamed_executor_to_ray(ray_cluster, grid, monkeypatch):
    monkeypatch.setenv("KNIT_RAY_ADDRESS", "auto")  # ray.init is done: the sweep uses that cluster
    on_ray = knit.sweep(stages.blocked_mn, SPACE, INPUTS, target="trn2")
    assert on_ray.executor == "ray"
    assert [p.measured() for p in on_ray.points] == [p.measured() for p in grid.points]


# ---- the command line ----------------------------------------------------------------------------

STAGES_FILE = os.path.join(STAGES_DIR, "stages.py")


def test_knit_sweep_prints_the_ranked_table_and_writes_the_points(tmp_path, capsys):
    out = tmp_path / "points.csv"
    code = cli.main(["sweep", f"{STAGES_FILE}::blocked_mn", "--param", "tiles_m=1,3,4", "--param", "tiles_n=1,2",
                     "--shape", f"{K}x{M}:bfloat16", "--shape", f"{K}x{N}:bfloat16", "--target", "trn1",
                     "--executor", "inline", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    saved = SweepResult.from_csv(out)
    expected = knit.sweep(stages.blocked_mn, {"tiles_m": [1, 3, 4], "tiles_n": [1, 2]}, INPUTS, target="trn1",
                          executor="inline")
    assert [p.measured() for p in saved.points] == [p.measured() for p in expected.points]
    lines = printed.splitlines()
    assert lines[0].startswith("knit sweep of blocked_mn on trn1: 6 points, 2 failed")
    best = expected.best()
    assert lines[2].split()[:4] == ["1", str(best.config["tiles_m"]), str(best.config["tiles_n"]),
                                    f"{best.latency_us:.2f}"]


def test_knit_sweep_sweeps_shape_sets_on_the_process_pool(tmp_path):
    out = tmp_path / "points.json"
    done = subprocess.run([sys.executable, "-m", "knit", "sweep", f"{STAGES_FILE}::blocked_mn", "--param",
                           "tiles_m=1,2", "--param", "tiles_n=2", "--shape", "512x256:bfloat16,512x512:bfloat16",
                           "--shape", "512x1024:bfloat16", "--out", str(out)],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"), KNIT_PROGRESS="0"))
    assert done.returncode == 0, done.stderr
    assert "(process)" in done.stdout
    result = SweepResult.from_json(out)
    assert [p.config for p in result.points] == [
        {"tiles_m": m, "tiles_n": 2, "shapes": f"512x{cols}:bfloat16 512x1024:bfloat16"}
        for m in (1, 2) for cols in (256, 512)]
    assert [p.dma_bytes for p in result.points] == [blocked_mn_dma_bytes(512, cols, 1024, 2)
                                                    for m in (1, 2) for cols in (256, 512)]


@pytest.mark.parametrize("argv, message", [
    (["--param", "tiles_m=1,x y"], "not a Python literal"),
    (["--param", "tiles_m"], "write NAME=VALUE"),
    (["--shape", "512x256,512x512", "--shape", "512x1024,512x512,512x128"], "same number"),
    (["--out", "points.txt"], "a .csv or a .json file"),
])
def test_knit_sweep_usage_errors(argv, message, capsys):
    shapes = [] if "--shape" in argv else ["--shape", f"{K}x{M}", "--shape", f"{K}x{N}"]
    code = cli.main(["sweep", f"{STAGES_FILE}::blocked_mn", *shapes, *argv])
    assert code == 2 and message in capsys.readouterr().err


def test_an_error_is_one_line_with_a_normalized_file_so_every_executor_reports_it_alike():
    from knit._sweep_run import error_fields

    error = knit.KnitError("stages.py:62: error: [capacity] no room\n  held by 't2' at /x/../y.py:3")
    error.rule, error.message, error.file, error.line = "capacity", "no room\n  't2' at /x/../y.py:3", "/x/../y.py", 3
    fields = error_fields(error)
    assert fields == {"error": "y.py:3: KnitError [capacity]: no room", "error_rule": "capacity",
                      "error_file": "/y.py", "error_line": 3}


SCRIPT = """\
import sys
sys.path.insert(0, {stages!r})
import knit, knit.typing as nt, stages

@knit.jit
def own(lhsT, rhs, tiles_m=1):
    return stages.blocked_mn(lhsT, rhs, tiles_m=tiles_m)

def main():
    result = knit.sweep({kernel}, {{"tiles_m": [1, 2, 3, 4]}}, (nt.tensor[[512, 512], "bfloat16"],
                        nt.tensor[[512, 1024], "bfloat16"]), executor={executor!r})
    print(result.executor, [p.ok for p in result.points])
    print(result.points[0].error)
"""


GUARDED = 'if __name__ == "__main__":\n    main()\n'
UNGUARDED = "main()\n"
GUARD_ELSEWHERE = 'if __name__ == "__main__":\n    pass\nmain()\n'


@pytest.mark.parametrize("kernel, tail, executor, expected", [
    ("stages.blocked_mn", UNGUARDED, None, "process [True, True, False, True]"),  # the script is not run again
    ("own", GUARDED, None, "process [True, True, False, True]"),  # a worker imports the script for its kernel
    ("own", UNGUARDED, None, "inline [True, True, False, True]"),  # ... which would sweep again: inline, warned
    ("own", UNGUARDED, "process", "ValueError: executor='process': kernel own is defined in a script without"),
    ("own", GUARD_ELSEWHERE, None, "process [False, False, False, False]"),  # each point says why (below)
])
def test_scripts_that_sweep_on_the_process_pool(tmp_path, kernel, tail, executor, expected):
    script = tmp_path / "sweep_script.py"
    script.write_text(SCRIPT.format(stages=STAGES_DIR, kernel=kernel, executor=executor) + tail)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"), KNIT_PROGRESS="0"))
    assert expected in done.stdout + done.stderr, done.stdout + done.stderr
    assert ("UserWarning: knit.sweep runs in this process" in done.stderr) == expected.startswith("inline")
    if tail is GUARD_ELSEWHERE:
        assert "knit.sweep was called while a sweep worker imported the kernel's file" in done.stdout


@pytest.mark.slow
def test_knit_sweep_on_ray_starts_a_local_cluster_whose_workers_import_knit(tmp_path):
    """No ray.init and no PYTHONPATH naming Knit: the local cluster Knit starts gives its workers
    Knit's folder (and the kernel's file is imported by path)."""
    pytest.importorskip("ray", reason="Ray is optional (pip install 'knit[ray]'); ./dev installs it")
    out = tmp_path / "points.json"
    code = (f"import sys; sys.path.insert(0, {os.path.join(REPO, 'python')!r}); from knit.cli import main; "
            f"sys.exit(main(['sweep', {STAGES_FILE + '::blocked_mn'!r}, '--param', 'tiles_m=1,2,3,4', '--shape', "
            f"'{K}x{M}:bfloat16', '--shape', '{K}x{N}:bfloat16', '--executor', 'ray', '--out', {str(out)!r}]))")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RAY_ADDRESS", "KNIT_RAY_ADDRESS")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=dict(env, KNIT_PROGRESS="0"))
    assert done.returncode == 0, done.stderr
    assert "(ray)" in done.stdout
    expected = knit.sweep(stages.blocked_mn, {"tiles_m": [1, 2, 3, 4]}, INPUTS, executor="inline")
    assert [p.measured() for p in SweepResult.from_json(out).points] == [p.measured() for p in expected.points]


def test_knit_sweep_sweeps_a_cpp_kernel_files_shapes_in_this_process(tmp_path, capsys):
    out = tmp_path / "points.json"
    softmax = os.path.join(REPO, "examples", "kernels", "cpp", "softmax.cpp")
    with pytest.warns(UserWarning, match="not a Python kernel defined at a module's top level"):
        code = cli.main(["sweep", softmax, "--shape", "128x512,256x1024,300x1024,512x2048", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    result = SweepResult.from_json(out)
    assert result.executor == "inline"
    rows_cols = [(128, 512), (256, 1024), (300, 1024), (512, 2048)]
    assert [p.config["shapes"] for p in result.points] == [f"{r}x{c}:float32" for r, c in rows_cols]
    assert [p.dma_bytes for p in result.points] == [2 * 4 * r * c for r, c in rows_cols]  # read x, write out
