"""knit.compare_profiles and `knit profile --compare A.json B.json` (docs/profiling.md).

Expectations come from the kernels' structure worked out by hand (bytes each matmul stage moves,
TensorE clocks per target) and from identities (a profile against itself, a file whose lines
moved but whose code did not)."""
import json

import pytest

import knit
import knit.language as nl
import knit.typing as nt
from kernel_test_util import EXAMPLES, load_example, load_file
from knit import cli
from knit.errors import KnitError
from test_profile_by_line import cli_doc_section

K, M, N, BF16 = 256, 256, 1024, 2
PE_GHZ = {"trn1": 2.8, "trn2": 2.4}  # TensorE clocks, NKI architecture guides
STAGES = f"{EXAMPLES}/matmul/stages.py"


def stage(name, target="trn2"):
    kernel = getattr(load_example("matmul/stages.py"), name)
    return knit.profile(kernel, nt.tensor[[K, M], nl.bfloat16], nt.tensor[[K, N], nl.bfloat16], target=target)


def test_a_profile_against_itself_changes_nothing():
    prof = stage("tiled")
    c = knit.compare_profiles(prof, prof.by_line())
    assert c.speedup == 1.0
    assert all(d.before is not None and d.after is not None for d in c.lines)
    assert all(d.figure(f)[2] == 0 for d in c.lines for f in ("total_busy_ns", "instructions", "dma_bytes"))
    assert all(x == y for x, y in c.engines.values())


def test_tiled_to_hoisted_deltas_are_the_bytes_worked_out_by_hand():
    tiled, hoisted = stage("tiled"), stage("hoisted")
    c = knit.compare_profiles(tiled, hoisted)
    out = M * N * BF16
    tiled_bytes = (M // 128) * (N // 512) * (K // 128) * (128 * 128 + 128 * 512) * BF16 + out
    hoisted_bytes = K * M * BF16 + (M // 128) * (N // 512) * K * 512 * BF16 + out
    assert sum(d.figure("dma_bytes")[2] for d in c.lines) == hoisted_bytes - tiled_bytes
    # Both evict and store the same 4 output tiles from the shared helper: those lines match.
    shared = {d.source: d for d in c.lines if d.before and d.after}
    evict = shared["nisa.tensor_copy(dst=sb, src=psum)"]
    assert evict.figure("instructions") == (4, 4, 0)
    store = next(d for s, d in shared.items() if s.startswith("nisa.dma_copy(dst=result[m0"))
    assert store.figure("dma_bytes") == (out, out, 0)
    # The same 8 matmuls on other lines: TensorE busy does not change.
    pe_before, pe_after = c.engines["pe"]
    assert pe_before == pytest.approx(pe_after) == pytest.approx(8 * 512 / PE_GHZ["trn2"])
    assert c.latency_ns == (tiled.total_ns, hoisted.total_ns)


def test_two_targets_differ_by_the_tensor_engine_clock():
    c = knit.compare_profiles(stage("tiled", "trn1"), stage("tiled", "trn2"))
    pe_trn1, pe_trn2 = c.engines["pe"]
    assert pe_trn1 == pytest.approx(8 * 512 / PE_GHZ["trn1"])
    assert pe_trn2 == pytest.approx(8 * 512 / PE_GHZ["trn2"])
    matmul = next(d for d in c.lines if d.source.startswith("nisa.nc_matmul("))
    assert matmul.figure("total_busy_ns")[2] == pytest.approx(8 * 512 / PE_GHZ["trn2"] - 8 * 512 / PE_GHZ["trn1"])
    assert c.to_json()["before"]["target"] == "trn1" and c.to_json()["after"]["target"] == "trn2"


KERNEL = '''import knit
import knit.isa as nisa
import knit.language as nl
{padding}

@knit.jit
def double(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=out, src=t)
    return out
'''


def test_lines_that_moved_still_match_by_their_text(tmp_path):
    profiles = []
    for name, padding in (("a", ""), ("b", "# a comment\n# and another\n\n")):
        (tmp_path / name).mkdir()
        path = tmp_path / name / "kernel.py"
        path.write_text(KERNEL.format(padding=padding))
        kernel = load_file(str(path)).double
        profiles.append(knit.profile(kernel, nt.tensor[[128, 512], nl.float32], target="trn2"))
    c = knit.compare_profiles(*profiles)
    assert len(c.lines) == 3
    for d in c.lines:
        assert d.before and d.after and d.after["line"] == d.before["line"] + 3
        assert d.figure("total_busy_ns")[2] == 0 and d.figure("instructions")[2] == 0


def test_compare_rejects_what_is_not_a_by_line_profile(tmp_path):
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps(stage("tiled").summary_json()))
    with pytest.raises(KnitError, match=r"summary\.json: not a by-line profile.*--by-line --json"):
        knit.compare_profiles(summary, stage("tiled"))
    old = stage("tiled").by_line().to_json()
    old["schema_version"] = 99
    with pytest.raises(KnitError, match="schema_version 99"):
        knit.compare_profiles(old, old)
    with pytest.raises(TypeError, match="not int"):
        knit.compare_profiles(3, old)


def test_cli_compare_prints_the_deltas_and_its_json_follows_the_docs(capsys, tmp_path):
    paths = []
    for name in ("tiled", "hoisted"):
        code = cli.main(["profile", f"{STAGES}::{name}", "--shape", f"{K}x{M}:bfloat16", "--shape",
                         f"{K}x{N}:bfloat16", "--timing-only", "--by-line", "--json", "--target", "trn2"])
        assert code == 0
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(capsys.readouterr().out)
    code = cli.main(["profile", "--compare", str(paths[0]), str(paths[1])])
    out = capsys.readouterr().out
    assert code == 0
    assert out.splitlines()[0].startswith("tiled (trn2) -> hoisted (trn2): ")
    assert "nisa.tensor_copy(dst=sb, src=psum)" in out
    code = cli.main(["profile", "--compare", str(paths[0]), str(paths[1]), "--json"])
    doc = json.loads(capsys.readouterr().out)
    top, figure, line = cli_doc_section("`knit profile --compare A.json B.json --json`")[1]
    assert doc.keys() == top and doc["schema_version"] == 1
    assert doc["total_ns"].keys() == figure
    for entry in doc["lines"]:
        assert entry.keys() == line
        assert all(entry[f].keys() == figure for f in line if isinstance(entry[f], dict))


def test_cli_compare_of_a_missing_file_exits_2_naming_it(capsys, tmp_path):
    code = cli.main(["profile", "--compare", str(tmp_path / "nope.json"), str(tmp_path / "nope.json")])
    assert code == 2
    assert "nope.json: not a readable by-line profile" in capsys.readouterr().err
