"""The memory map (docs/profiling.md, "Memory map"): Compiled.memory_map(), the capacity error's
err.memory_map, their text / SVG / PNG, and `knit memory`.

Facts used (docs/hw-model.md): a [128, F] fp32 tile takes 4 * F bytes of each of its 128
partitions; trn1's SBUF holds 192 KiB per partition, PSUM 16 KiB (8 banks of 2 KiB); SBUF offsets
are 64-byte aligned and PSUM tensors start on a bank. A dma_copy or an elementwise instruction is
one body instruction, so the live ranges of the small kernels below are worked out by hand from
their statement order.
"""
import xml.etree.ElementTree as ET

import pytest

import knit
import knit.isa as nisa
import knit.language as nl
import knit.typing as nt
from knit import cli
from knit.errors import NkiValidationError
from test_psum_pressure import TILE_N, k_outer

SVG = "{http://www.w3.org/2000/svg}"
F = 512  # free size of the small tiles: 2 KiB per partition in fp32
BIG = 32768  # fp32 elements: 128 KiB per partition, so two such tiles overflow trn1's SBUF
SBUF_TRN1, PSUM_TRN1 = 192 * 1024, 16 * 1024


def _tile(name, free=F):
    return nl.ndarray((128, free), nl.float32, buffer=nl.sbuf, name=name)


@knit.jit
def in_sequence(a, b):
    """x lives over body 0..1, y over 2..3: never at the same time."""
    out1 = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    out2 = nl.ndarray(b.shape, nl.float32, buffer=nl.shared_hbm)
    x = _tile("x")
    nisa.dma_copy(dst=x, src=a)  # 0
    nisa.dma_copy(dst=out1, src=x)  # 1
    y = _tile("y")
    nisa.dma_copy(dst=y, src=b)  # 2
    nisa.dma_copy(dst=out2, src=y)  # 3
    return out1, out2


@knit.jit
def in_parallel(a, b):
    """x over 0..2, y over 1..2, z over 2..3: all three live at the add."""
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    x = _tile("x")
    nisa.dma_copy(dst=x, src=a)  # 0
    y = _tile("y")
    nisa.dma_copy(dst=y, src=b)  # 1
    z = _tile("z")
    nisa.tensor_tensor(dst=z, data1=x, data2=y, op=nl.add)  # 2
    nisa.dma_copy(dst=out, src=z)  # 3
    return out


@knit.jit
def too_big(a, b):
    """x (128 KiB per partition) and y (as much) are read together: y cannot fit beside x."""
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    x = _tile("x", BIG)
    nisa.dma_copy(dst=x, src=a)  # 0
    y = _tile("y", BIG)
    nisa.dma_copy(dst=y, src=b)  # 1
    z = _tile("z", BIG)
    nisa.tensor_tensor(dst=z, data1=x, data2=y, op=nl.add)  # 2
    nisa.dma_copy(dst=out, src=z)  # 3
    return out


def _args(free=F):
    return [nt.tensor[[128, free], nl.float32]] * 2


def _names(placements):
    return sorted(p.name for p in placements)


def _check_invariants(memory, capacity):
    """Independently of the allocator: every placement is inside its buffer, aligned, and no two
    tensors whose live ranges meet share a byte of a partition (same core and buffer)."""
    for p in memory.tensors:
        assert 0 <= p.offset and p.end <= capacity[p.buffer], p
        assert 0 <= p.partition and p.partition + p.partitions <= 128, p
        assert p.offset % (64 if p.buffer == "sbuf" else 2048) == 0, p
        assert p.first <= p.last, p
    for i, p in enumerate(memory.tensors):
        for q in memory.tensors[i + 1:]:
            if (p.buffer, p.core) != (q.buffer, q.core) or p.last < q.first or q.last < p.first:
                continue
            rows = p.partition < q.partition + q.partitions and q.partition < p.partition + p.partitions
            columns = p.offset < q.end and q.offset < p.end
            assert not (rows and columns), (p, q)


def test_tiles_in_sequence_are_live_apart():
    memory = knit.compile(in_sequence, *_args(), target="trn1").memory_map()
    assert _names(memory.tensors) == ["x", "y"]
    assert [(p.first, p.last) for p in sorted(memory.tensors, key=lambda p: p.name)] == [(0, 1), (2, 3)]
    assert [_names(memory.at(i)) for i in range(4)] == [["x"], ["x"], ["y"], ["y"]]
    for p in memory.tensors:
        assert (p.buffer, p.partition, p.partitions, p.bytes) == ("sbuf", 0, 128, 4 * F)
    assert memory.at(4) == []


def test_tiles_in_parallel_are_live_together_and_apart_in_bytes():
    compiled = knit.compile(in_parallel, *_args(), target="trn1")
    memory = compiled.memory_map()
    assert [_names(memory.at(i)) for i in range(4)] == [["x"], ["x", "y"], ["x", "y", "z"], ["z"]]
    at_add = memory.at(2)
    spans = sorted((p.offset, p.end) for p in at_add)
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:]))  # disjoint bytes
    _check_invariants(memory, {"sbuf": SBUF_TRN1, "psum": PSUM_TRN1})
    assert memory.high_water["sbuf"] >= 3 * 4 * F
    assert memory.high_water == {"sbuf": compiled.stats["sbuf_high_water"], "psum": compiled.stats["psum_high_water"]}
    assert memory.capacity == {"sbuf": SBUF_TRN1, "psum": PSUM_TRN1}


def test_matmul_placements_keep_the_invariants():
    """A tiled matmul: PSUM accumulators and SBUF operand tiles, many live ranges."""
    from test_psum_pressure import evict_each

    compiled = knit.compile(evict_each, nt.tensor[[256, 128], nl.float32], nt.tensor[[256, 4 * TILE_N], nl.float32],
                            target="trn1")
    memory = compiled.memory_map()
    assert {p.buffer for p in memory.tensors} == {"sbuf", "psum"}
    _check_invariants(memory, memory.capacity)
    assert memory.high_water == {"sbuf": compiled.stats["sbuf_high_water"], "psum": compiled.stats["psum_high_water"]}
    for p in memory.tensors:
        if p.buffer == "psum":
            assert (p.partitions, p.bytes) == (128, 4 * TILE_N)


def test_text_is_one_row_per_tensor_sorted_by_offset():
    memory = knit.compile(in_parallel, *_args(), target="trn1").memory_map()
    rows = memory.text().splitlines()
    assert rows[0].split() == ["buffer", "tensor", "partitions", "bytes", "live", "source"]
    body = [r.split() for r in rows[1:1 + len(memory.tensors)]]
    offsets = [int(r[3].split(":")[0]) for r in body]
    assert offsets == sorted(offsets)
    z = next(r for r in body if r[1] == "z")
    assert z[2] == "0:128" and z[4] == "2..3" and z[5].startswith("test_memory_map.py:")
    assert f"sbuf {memory.high_water['sbuf']} of {SBUF_TRN1}" in rows[-1]


def test_svg_is_well_formed_with_one_rect_per_tensor(tmp_path):
    memory = knit.compile(in_parallel, *_args(), target="trn1").memory_map()
    path = memory.save_svg(tmp_path / "map.svg")
    root = ET.parse(path).getroot()
    rects = [r for r in root.iter(SVG + "rect") if r.get("class") == "tensor"]
    assert len(rects) == len(memory.tensors) == 3
    titles = [r.find(SVG + "title").text for r in rects]
    assert sorted(t.split("'")[1] for t in titles) == ["x", "y", "z"]
    assert all("partitions [0, 128)" in t for t in titles)
    # x covers body 0..2 (3 instructions), z 2..3 (2): z starts 2 instructions after x.
    box = {t.split("'")[1]: r for t, r in zip(titles, rects)}
    x0, z0 = float(box["x"].get("x")), float(box["z"].get("x"))
    x_width, z_width = float(box["x"].get("width")), float(box["z"].get("width"))
    assert x_width / z_width == pytest.approx(3 / 2, rel=1e-3)
    assert z0 - x0 == pytest.approx(z_width, abs=0.2)


def test_png_is_written(tmp_path):
    pytest.importorskip("matplotlib", reason="MemoryMap.save_png needs matplotlib")
    memory = knit.compile(in_sequence, *_args(), target="trn1").memory_map()
    path = memory.save_png(tmp_path / "map.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_sbuf_capacity_error_carries_the_map_at_the_failing_point(tmp_path):
    with pytest.raises(NkiValidationError) as e:
        knit.compile(too_big, *_args(BIG), target="trn1").program
    err = e.value
    assert err.rule == "capacity"
    assert "err.memory_map.save_svg" in str(err) and "knit memory" in str(err)
    memory = err.memory_map
    failing = memory.failing
    assert (failing.name, failing.buffer, failing.offset, failing.bytes) == ("y", "sbuf", -1, 4 * BIG)
    assert (failing.first, failing.last) == (1, 2)
    assert _names(memory.alive) == ["x"] and _names(memory.tensors) == ["x"]
    assert memory.alive[0].bytes + failing.bytes > SBUF_TRN1
    assert memory.capacity == {"sbuf": SBUF_TRN1}
    assert "'x'" in str(err)  # the message names the live tensor too
    text = memory.text()
    assert "did not fit at body instruction 1: 'y'" in text and "alive there: 'x'" in text
    root = ET.parse(memory.save_svg(tmp_path / "fail.svg")).getroot()
    rects = list(root.iter(SVG + "rect"))
    failing_rects = [r for r in rects if r.get("class") == "failing"]
    assert len(failing_rects) == 1 and "'y'" in failing_rects[0].find(SVG + "title").text
    x_rect = next(r for r in rects if r.get("class") == "tensor")
    assert x_rect.get("stroke-width") == "2"  # alive at the failing point: outlined


def test_psum_capacity_error_carries_the_map():
    """Ten PSUM accumulators with open groups (k_outer): the ninth does not fit in 8 banks."""
    with pytest.raises(NkiValidationError) as e:
        knit.compile(k_outer, nt.tensor[[256, 128], nl.float32], nt.tensor[[256, 10 * TILE_N], nl.float32],
                     target="trn1").program
    memory = e.value.memory_map
    assert memory.failing.buffer == "psum" and memory.capacity == {"psum": PSUM_TRN1}
    psum_alive = [p for p in memory.alive if p.buffer == "psum"]
    assert len(psum_alive) == PSUM_TRN1 // (4 * TILE_N) == len(memory.alive)
    assert sum(p.bytes for p in psum_alive) + memory.failing.bytes > PSUM_TRN1
    _check_invariants(memory, {"sbuf": SBUF_TRN1, "psum": PSUM_TRN1})


def test_other_user_errors_have_no_map():
    @knit.jit
    def bad(a):
        t = nl.ndarray((256, 4), nl.float32, buffer=nl.sbuf)  # over 128 partitions
        nisa.dma_copy(dst=t, src=a)
        return t

    with pytest.raises(NkiValidationError) as e:
        knit.compile(bad, nt.tensor[[256, 4], nl.float32]).program
    assert e.value.rule != "capacity" and e.value.memory_map is None


KERNEL_FILE = '''
# knit-run: --shape 128x{free} --shape 128x{free} --target trn1
import knit
import knit.isa as nisa
import knit.language as nl


@knit.jit
def kernel(a, b):
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    x = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf, name="x")
    nisa.dma_copy(dst=x, src=a)
    y = nl.ndarray(b.shape, nl.float32, buffer=nl.sbuf, name="y")
    nisa.dma_copy(dst=y, src=b)
    nisa.tensor_tensor(dst=x, data1=x, data2=y, op=nl.add)
    nisa.dma_copy(dst=out, src=x)
    return out
'''


@pytest.mark.parametrize("free, status", [(F, 0), (BIG, 1)], ids=["fits", "capacity_error"])
def test_knit_memory_prints_the_table_and_writes_the_picture(tmp_path, capsys, free, status):
    path = tmp_path / "k.py"
    path.write_text(KERNEL_FILE.format(free=free))
    svg = tmp_path / "map.svg"
    assert cli.main(["memory", str(path), "--svg", str(svg)]) == status
    out, err = capsys.readouterr()
    assert "buffer  tensor" in out and f"memory map written to {svg}" in out
    rects = [r for r in ET.parse(svg).getroot().iter(SVG + "rect") if r.get("class") in ("tensor", "failing")]
    assert len(rects) == 2  # x and y (placed, or y failing)
    if status:
        assert "[capacity]" in err and "did not fit at body instruction 1: 'y'" in out


def test_html_report_draws_the_placements(tmp_path):
    from knit.profile import profile

    memory = knit.compile(in_parallel, *_args(), target="trn1").memory_map()
    page = profile(in_parallel, *_args(), target="trn1").save_html(tmp_path / "report.html").read_text()
    section = page[page.index('<section id="placements">'):]
    section = section[:section.index("</section>")]
    svg = ET.fromstring(section[section.index("<svg"):section.index("</svg>") + len("</svg>")])
    rects = [r for r in svg.iter(SVG + "rect") if r.get("class") == "tensor"]
    assert sorted(r.find(SVG + "title").text for r in rects) == sorted(p.describe() for p in memory.tensors)


def test_each_core_has_its_own_sbuf():
    """An LNC2 grid (test_lnc.swap_halves): each core's two tiles, placed in its own SBUF."""
    from test_lnc import swap_halves

    memory = knit.compile(swap_halves[2], nt.tensor[[256, 16], nl.float32], target="trn2").memory_map()
    assert sorted(p.core for p in memory.tensors) == [0, 0, 1, 1]
    _check_invariants(memory, memory.capacity)
    for core in (0, 1):  # [128, 16] fp32: 64 bytes per partition each
        assert sorted(p.bytes for p in memory.tensors if p.core == core) == [64, 64]
    assert memory.text().splitlines()[0].split()[:3] == ["buffer", "core", "tensor"]
    panels = ET.fromstring(memory.svg()).findall(f"{SVG}g[@class='panel']")
    assert sorted(g.get("data-core") for g in panels) == ["0", "1"]


def test_a_program_read_back_from_its_text_gives_the_same_map():
    """What the disk cache stores (the program's text form) keeps the placements and live ranges."""
    program = knit.compile(in_parallel, *_args(), target="trn1").program
    assert knit._core.EngineProgram.from_text(program.to_text()).memory_map() == program.memory_map()


def test_calling_the_kernel_raises_the_error_with_its_map():
    import numpy as np

    a = np.zeros((128, BIG), np.float32)
    with pytest.raises(NkiValidationError) as e:
        too_big[1](a, a)  # a fresh Kernel object: not the compile cache of the test above
    assert e.value.memory_map.failing.name == "y" and _names(e.value.memory_map.alive) == ["x"]


def test_json_round_trips():
    import json

    with pytest.raises(NkiValidationError) as e:
        knit.compile(too_big, *_args(BIG), target="trn1").program
    for memory in (knit.compile(in_parallel, *_args(), target="trn1").memory_map(), e.value.memory_map):
        data = json.loads(json.dumps(memory.to_json()))
        assert data["high_water"] == memory.high_water
        del data["high_water"]
        again = knit._memory_map.MemoryMap(**data)
        assert again.text() == memory.text() and again.svg() == memory.svg()
