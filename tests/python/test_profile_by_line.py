"""Profile.by_line() and `knit profile --by-line` (docs/profiling.md).

The per-line figures must add up to the Profile's own totals (instructions and busy time per
queue, DMA bytes), and the counts and bytes per line must be what the kernels' loop structure gives
when worked out by hand. The critical path is checked against what holds by construction (its
steps cover the run from 0 to the last instruction's end) and against hand-built chains whose
order is known."""
import json
import re
from pathlib import Path

import pytest

import knit
import knit.isa as nisa
import knit.language as nl
import knit.lnc
import knit.typing as nt
from kernel_test_util import EXAMPLES, load_example, source_line
from knit import _annotate, cli

BF16_BYTES, FP32_BYTES = 2, 4
PE_GHZ_TRN2 = 2.4  # TensorE clock, NKI architecture guide (a bf16 matmul of N=512 takes 512 cycles)
PEAK_DMA_B_PER_NS_TRN2 = 362  # docs/simulator.md: trn2's per-core HBM bandwidth limits the DMA peak
STAGES = f"{EXAMPLES}/matmul/stages.py"
ATTENTION = f"{EXAMPLES}/attention.py"


def line_of(path, marker):
    return source_line(path, marker)


def tiled_profile(K=256, M=256, N=1024):
    kernel = load_example("matmul/stages.py").tiled
    return knit.profile(kernel, nt.tensor[[K, M], nl.bfloat16], nt.tensor[[K, N], nl.bfloat16], target="trn2")


def attention_profile():
    kernel = load_example("attention.py").attention_kernel
    return knit.profile(kernel, *[nt.tensor[[512, 128], nl.float32]] * 3, target="trn2")  # its knit-run shape


def blocked_profile():
    kernel = load_example("matmul/stages.py").blocked_mn
    return knit.profile(kernel, nt.tensor[[256, 256], nl.bfloat16], nt.tensor[[256, 1024], nl.bfloat16],
                        target="trn2", tiles_m=2)


def assert_lines_add_up_to_the_profile(prof, by_line):
    rows = by_line.rows
    for q, stats in prof.engines.items():
        assert sum(s.queue_instructions.get(q, 0) for s in rows) == stats.instructions, q
        assert sum(s.busy_ns.get(q, 0.0) for s in rows) == pytest.approx(stats.busy_ns, rel=1e-12, abs=1e-9), q
    assert sum(s.instructions for s in rows) == sum(e.instructions for e in prof.engines.values())
    assert sum(s.dma_bytes for s in rows) == prof.dma_bytes
    assert sum(s.share for s in rows) == pytest.approx(1.0)
    waits = {}
    for (waiter, producer), ns in prof.stalls.items():
        waits[producer] = waits.get(producer, 0.0) + ns
    for q, ns in waits.items():
        assert sum(s.wait_ns.get(q, 0.0) for s in rows) == pytest.approx(ns, rel=1e-12), q


def checked_by_line(kernel, *args, **kwargs):
    """The kernel's Profile on trn2 and its by_line(), after checking the sums and the path."""
    prof = knit.profile(kernel, *args, target="trn2", **kwargs)
    by_line = prof.by_line()
    assert_lines_add_up_to_the_profile(prof, by_line)
    assert_path_covers_the_run(prof, by_line)
    return prof, by_line


def source_row(text, ending):
    """The annotated source row (gutter | line number, text) whose text ends with `ending`."""
    return next(r for r in text.splitlines() if "|" in r and r.endswith(ending))


def gutter(row):
    """The figures left of an annotated row's `|`, the hot-line marker dropped."""
    return row.partition("|")[0].replace(_annotate.HOT_MARK, "").split()


def assert_path_covers_the_run(prof, by_line):
    path = by_line.critical_path
    last_end = max(t[4] for t in prof._timeline)
    # Each step is credited from its predecessor's end to its own end, from the run's start (0):
    # the steps add up to the last end exactly; what follows it (the last result's pipeline
    # latency) and the launch overhead make up the rest of the latency.
    assert path.total_ns == pytest.approx(last_end, rel=1e-12)
    assert sum(ns for _, _, ns in path.steps) == pytest.approx(path.total_ns, rel=1e-12)
    assert sum(p.ns for p in path.lines) == pytest.approx(path.total_ns, rel=1e-12)
    assert all(0 <= p.busy_ns <= p.ns * (1 + 1e-12) for p in path.lines)
    assert all(ns >= 0 for _, _, ns in path.steps)
    # tail: pipeline latency + one semaphore, well under a microsecond; it can be a rounding below 0
    # ((end + launch) - launch).
    assert -1e-6 <= path.tail_ns < 1000
    assert path.total_ns + path.tail_ns + prof.launch_ns == pytest.approx(prof.total_ns, rel=1e-12)
    assert sum(s.path_ns for s in by_line.rows) == pytest.approx(path.total_ns, rel=1e-12)


# ---- the tiled matmul -----------------------------------------------------------------------


def test_tiled_matmul_lines_count_what_its_loops_do():
    K, M, N = 256, 256, 1024
    prof = tiled_profile(K, M, N)
    by_line = prof.by_line()
    assert_lines_add_up_to_the_profile(prof, by_line)
    trips = (M // 128) * (N // 512) * (K // 128)  # the innermost loop body: 8 runs
    load_a = by_line.line("stages.py", line_of(STAGES, "nisa.dma_copy(dst=a, src=lhsT["))
    load_b = by_line.line("stages.py", line_of(STAGES, "nisa.dma_copy(dst=b, src=rhs["))
    matmul = by_line.line("stages.py", line_of(STAGES, "nisa.nc_matmul(dst=psum, stationary=a, moving=b)"))
    evict = by_line.line("stages.py", line_of(STAGES, "nisa.tensor_copy(dst=sb, src=psum)"))
    store = by_line.line("stages.py", line_of(STAGES, "nisa.dma_copy(dst=result[m0"))
    for s, n in ((load_a, trips), (load_b, trips), (matmul, trips), (evict, trips // 2), (store, trips // 2)):
        assert (s.instructions, s.trips, s.sites) == (n, n, n), s.where
    assert load_a.dma_bytes == trips * 128 * 128 * BF16_BYTES
    assert load_b.dma_bytes == trips * 128 * 512 * BF16_BYTES
    assert store.dma_bytes == (M // 128) * (N // 512) * 128 * 512 * BF16_BYTES
    assert matmul.busy_ns == pytest.approx({"pe": trips * 512 / PE_GHZ_TRN2}, rel=1e-9)
    assert (matmul.engine, load_b.engine) == ("pe", "dma")
    assert evict.engine in ("dve", "act")  # a PSUM copy whose engine is open: VectorE or, on trn2, ScalarE
    assert matmul.opcodes == {"nc_matmul": trips}


def test_tiled_matmul_hottest_line_is_the_rhs_load():
    """By hand: the rhs load moves 1 MiB (4x the lhsT load, 2x the store); at most 362 B/ns that
    takes >= 2.9 us, more than the 8 matmuls' 1.7 us of TensorE; the store moves half its bytes in
    runs of the same size, so it takes exactly half its time."""
    prof = tiled_profile()
    by_line = prof.by_line()
    hottest = by_line.rows[0]
    assert hottest.line == line_of(STAGES, "nisa.dma_copy(dst=b, src=rhs[")
    assert hottest.dma_bytes == max(s.dma_bytes for s in by_line.rows)
    assert hottest.total_ns >= hottest.dma_bytes / PEAK_DMA_B_PER_NS_TRN2 > 8 * 512 / PE_GHZ_TRN2
    store = by_line.line("stages.py", line_of(STAGES, "nisa.dma_copy(dst=result[m0"))
    assert store.total_ns == pytest.approx(hottest.total_ns / 2, rel=1e-9)
    assert hottest.share == pytest.approx(hottest.total_ns / sum(e.busy_ns for e in prof.engines.values()))


def test_tiled_matmul_critical_path_ends_with_the_last_store():
    prof = tiled_profile()
    by_line = prof.by_line()
    assert_path_covers_the_run(prof, by_line)
    path = by_line.critical_path
    # The run ends when the last output tile is stored: the path's last step is the store, and
    # it starts at a load (nothing can run before the operands arrive).
    assert path.steps[-1][1] == line_of(STAGES, "nisa.dma_copy(dst=result[m0")
    assert path.steps[0][1] in (line_of(STAGES, "dst=a, src=lhsT["), line_of(STAGES, "dst=b, src=rhs["))
    on_path = {p.line for p in path.lines}
    assert line_of(STAGES, "nisa.nc_matmul(dst=psum") in on_path


def test_blocked_matmul_helper_lines_count_every_call():
    """blocked_mn at K=256, M=256, N=1024, tiles_m=2: for each of the 2 column blocks, _load_strip
    loads an rhs strip [256, 512] and the one lhsT strip [256, 256] (M is one block), 2 K tiles
    each; 2 blocks x 2 M tiles x 2 K tiles matmuls."""
    prof = blocked_profile()
    by_line = prof.by_line()
    assert_lines_add_up_to_the_profile(prof, by_line)
    assert_path_covers_the_run(prof, by_line)
    strip = by_line.line("stages.py", line_of(STAGES, "nisa.dma_copy(dst=t[:, k, :]"))
    assert strip.instructions == strip.trips == 8
    assert strip.dma_bytes == 2 * (2 * 128 * 512 + 2 * 128 * 256) * BF16_BYTES
    matmul = by_line.line("stages.py", line_of(STAGES, "nisa.nc_matmul(dst=psum, stationary=a[:, k, tm * TILE_M"))
    assert matmul.instructions == 8


# ---- attention ------------------------------------------------------------------------------


def test_attention_lines_add_up_and_count_the_causal_blocks():
    prof = attention_profile()
    by_line = prof.by_line()
    assert_lines_add_up_to_the_profile(prof, by_line)
    assert_path_covers_the_run(prof, by_line)
    blocks = 512 // 128
    # load_transposed (fp32: DMA, then a TensorE transpose) runs for each k block and each q block.
    load = by_line.line("attention.py", line_of(ATTENTION, "nisa.dma_copy(dst=tile, src=src)"))
    assert (load.instructions, load.dma_bytes) == (2 * blocks, 2 * blocks * 128 * 128 * FP32_BYTES)
    # The causal P @ V loop runs i + 1 times for query block i.
    pv = by_line.line("attention.py", line_of(ATTENTION, "nisa.nc_matmul(dst=out_psum"))
    assert pv.instructions == pv.trips == sum(i + 1 for i in range(blocks))
    v_load = by_line.line("attention.py", line_of(ATTENTION, "nisa.dma_copy(dst=v_sb"))
    assert (v_load.instructions, v_load.dma_bytes) == (1, 512 * 128 * FP32_BYTES)
    assert by_line.critical_path.steps[-1][1] == line_of(ATTENTION, "nisa.dma_copy(dst=out[q0")


# ---- a chain whose critical path is known ---------------------------------------------------


@knit.jit
def chain(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    side = nl.ndarray((128, 8), x.dtype, buffer=nl.sbuf)
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=side, value=1.0)  # LINE side: independent, short
    nisa.dma_copy(dst=t, src=x)  # LINE load
    nisa.activation(dst=t, op=nl.exp, data=t)  # LINE exp
    nisa.dma_copy(dst=out, src=t)  # LINE store
    return out


def test_chain_critical_path_is_load_exp_store_in_order():
    prof, by_line = checked_by_line(chain, nt.tensor[[128, 2048], nl.float32])
    here = __file__
    order = [p.line for p in by_line.critical_path.lines]
    assert order == [source_line(here, f"# LINE {w}") for w in ("load", "exp", "store")]
    exp = by_line.line("test_profile_by_line.py", source_line(here, "# LINE exp"))
    # On the path from the load's end: the semaphore wait, then the activation itself.
    assert exp.path_ns >= exp.total_ns > 0
    assert exp.wait_ns.keys() == {next(q for q, n in prof.instructions.items() if q.startswith("dma") and n)}
    side = by_line.line("test_profile_by_line.py", source_line(here, "# LINE side"))
    assert side.path_ns == 0 and side.total_wait_ns == 0


@knit.jit
def hand_over(a):
    """Core 0 scales a tile into shared HBM; after the core barrier core 1 copies it out."""
    scratch = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm, name="scratch")
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm, name="out")
    if nl.program_id(0) == 0:
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)  # LINE core0 load
        for _ in range(4):
            nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)  # LINE core0 scale
        nisa.dma_copy(dst=scratch, src=t)  # LINE core0 store
    knit.lnc.core_barrier(scratch, (0, 1))
    if nl.program_id(0) == 1:
        u = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=u, src=scratch)  # LINE core1 load
        nisa.dma_copy(dst=out, src=u)  # LINE core1 store
    return out


def test_critical_path_crosses_a_core_barrier_to_the_core_it_waited_for():
    """Core 1 has nothing to do before the barrier, which waits for core 0's store: the path runs
    through all of core 0's work, then core 1's copy."""
    _, by_line = checked_by_line(hand_over[2], nt.tensor[[128, 512], nl.float32])
    order = [p.line for p in by_line.critical_path.lines]
    steps = ("core0 load", "core0 scale", "core0 store", "core1 load", "core1 store")
    assert order == [source_line(__file__, f"# LINE {w}") for w in steps]
    scale = by_line.line("test_profile_by_line.py", source_line(__file__, "# LINE core0 scale"))
    assert (scale.instructions, scale.trips) == (4, 4)


@knit.jit
def device_loop(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)

    def body(i):
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)  # LINE device body

    nl.fori_loop(0, 5, body)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_a_device_loop_body_is_one_site_run_once_per_trip():
    _, by_line = checked_by_line(device_loop, nt.tensor[[128, 512], nl.float32])
    body = by_line.line("test_profile_by_line.py", source_line(__file__, "# LINE device body"))
    assert (body.sites, body.instructions, body.trips) == (1, 5, 5)
    row = source_row(by_line.annotate(), "# LINE device body")
    assert gutter(row)[2:4] == ["5", "x5"]


# ---- text and JSON --------------------------------------------------------------------------


def test_annotate_shows_the_source_with_figures_and_marks_the_hottest():
    by_line = tiled_profile().by_line()
    text = by_line.annotate(top=1)
    rows = text.splitlines()
    matmul_line = line_of(STAGES, "nisa.nc_matmul(dst=psum, stationary=a, moving=b)")
    matmul_row = source_row(text, "nisa.nc_matmul(dst=psum, stationary=a, moving=b)")
    assert matmul_row.partition("|")[2].split()[0] == str(matmul_line)
    assert gutter(matmul_row)[2:5] == ["8", "x8", "pe"]
    hot = [r for r in rows if r.startswith(">>")]
    assert len(hot) == 1 and hot[0].endswith("nisa.dma_copy(dst=b, src=rhs[k * TILE_K:(k + 1) * TILE_K, "
                                             "n * TILE_N:(n + 1) * TILE_N])")
    # A line without instructions has a blank gutter; the kernel's def line is shown.
    def_row = source_row(text, "def tiled(lhsT, rhs):")
    assert def_row.partition("|")[0].strip() == ""
    assert rows[1].startswith("critical path:") and "these lines bound the latency" in rows[1]  # the headline
    assert str(by_line).splitlines()[1].startswith("critical path:")


def test_matmul_figures_in_the_gutter_are_the_line_stats():
    by_line = tiled_profile().by_line()
    s = by_line.line("stages.py", line_of(STAGES, "nisa.nc_matmul(dst=psum, stationary=a, moving=b)"))
    row = source_row(by_line.annotate(), "moving=b)")
    fields = gutter(row)
    assert fields[0] == f"{s.total_ns / 1e3:.2f}"
    assert fields[1] == f"{100 * s.share:.1f}%"
    assert fields[2:5] == [str(s.instructions), f"x{s.trips}", "pe"]
    assert fields[5] == f"{s.total_wait_ns / 1e3:.2f}"


def cli_doc_section(heading):
    """The text of docs/cli.md's section `## heading` and the key sets of its tables (the
    backticked names in each row's first cell), in order."""
    text = (Path(EXAMPLES).parents[2] / "docs" / "cli.md").read_text()
    section = text.split(f"## {heading}\n")[1].split("\n## ")[0]
    tables = [[row for row in block.splitlines() if row.startswith("| `")] for block in section.split("\n\n")]
    return section, [{k for row in t for k in re.findall(r"`(\w+)`", row.split("|")[1])} for t in tables if t]


def documented_keys():
    """The keys of the three tables of docs/cli.md's `--by-line --json` section (top level,
    critical_path, each line) and of the critical path's `lines` entries, as the page gives them."""
    section, tables = cli_doc_section("`knit profile FILE[::KERNEL] --by-line --json`")
    path_line = re.search(r"`\{(file, line, [\w, ]+)\}` per line on the path", section).group(1)
    return tables, set(path_line.split(", "))


def check_by_line_json(doc):
    """The keys and types docs/cli.md documents for `knit profile --by-line --json`."""
    (top_keys, path_keys, line_keys), path_line_keys = documented_keys()
    assert doc.keys() == top_keys and doc["schema_version"] == 1
    assert doc["critical_path"].keys() == path_keys
    for p in doc["critical_path"]["lines"]:
        assert p.keys() == path_line_keys
    for p in doc["critical_path"]["steps"]:
        assert p.keys() == {"file", "line", "ns"}
    for row in doc["lines"]:
        assert row.keys() == line_keys
        assert isinstance(row["line"], int) and isinstance(row["dma_bytes"], int)
        assert all(isinstance(v, float) for v in row["busy_ns"].values())
        assert row["total_busy_ns"] == pytest.approx(sum(row["busy_ns"].values()))
    busy = [r["total_busy_ns"] for r in doc["lines"]]
    assert busy == sorted(busy, reverse=True)


def test_cli_by_line_prints_the_annotated_source(capsys):
    code = cli.main(["profile", f"{STAGES}::tiled", "--shape", "256x256:bfloat16", "--shape", "256x1024:bfloat16",
                     "--timing-only", "--by-line", "--target", "trn2"])
    out = capsys.readouterr().out
    assert code == 0
    matmul_line = line_of(STAGES, "nisa.nc_matmul(dst=psum, stationary=a, moving=b)")
    row = source_row(out, "nisa.nc_matmul(dst=psum, stationary=a, moving=b)")
    assert row.partition("|")[2].split()[0] == str(matmul_line)
    assert gutter(row)[2:5] == ["8", "x8", "pe"]
    assert "critical path:" in out


def test_cli_by_line_json_follows_the_documented_schema(capsys):
    code = cli.main(["profile", f"{ATTENTION}::attention_kernel", "--timing-only", "--by-line", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    check_by_line_json(doc)
    prof = attention_profile()
    assert doc["total_ns"] == pytest.approx(prof.total_ns)
    assert sum(r["dma_bytes"] for r in doc["lines"]) == prof.dma_bytes
    assert doc["kernel"] == "attention_kernel"


def test_cli_by_line_of_a_cpp_kernel_shows_its_whole_function(capsys):
    """For a C++ file the view runs from the function's signature to its closing brace."""
    softmax = f"{EXAMPLES}/../cpp/softmax.cpp"
    code = cli.main(["profile", softmax, "--timing-only", "--by-line"])
    out = capsys.readouterr().out
    assert code == 0
    signature = source_row(out, "nl::tensor softmax(nl::tensor x) {")
    assert gutter(signature) == [] and signature.partition("|")[2].split()[0] == str(
        source_line(softmax, "nl::tensor softmax(nl::tensor x) {"))
    reduce_row = source_row(out, "isa::tensor_reduce(neg_max, nl::maximum, tile, {1}, {.negate = true});")
    assert gutter(reduce_row)[2:5] == ["3", "x3", "dve"]  # 300 rows: tiles of 128, 128 and 44
    closing = [r for r in out.splitlines() if "|" in r and r.partition("|")[2].split()[1:] == ["}"]]
    assert closing and closing[-1].partition("|")[2].split()[0] == str(source_line(softmax, "KNIT_KERNEL") - 2)
