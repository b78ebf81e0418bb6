"""SBUF pressure: block tensors allocated block by block, SBUF tensors spilled to HBM when the
tensors live at once do not fit, and the capacity error when nothing can be spilled
(docs/codegen.md, "Spilling").

Facts used (docs/hw-model.md): trn1's SBUF holds 192 KiB per partition; a [128, F] fp32 tile
takes 4 * F bytes of each partition. Kernels keep data live between phases, as the public
benchmark kernels (LoRA, SwiGLU, GQA, batched softmax) do, at shapes over trn1's capacity.
Results are checked against NumPy in float64 and, bit for bit, against the same computation
written to keep less live (a spill copies fp32 to HBM and back exactly).
"""
import inspect
import re
import time

import numpy as np
import pytest

import knit
import knit.isa as nisa
import knit.language as nl
import knit.legacy as legacy
import knit.legacy.language as lnl
import knit.typing as nt
import pressure_kernels as pk
from knit.errors import NkiValidationError

TARGET = "trn1"
SBUF_BYTES = 192 * 1024  # trn1, per partition
BIG = 32768  # fp32 elements: 128 KiB per partition, so two such tiles overflow trn1's SBUF


def _sbuf_spills(text):
    """(tensor name, declaration line) of each sbuf-spill warning."""
    return re.findall(r"warning: \[sbuf-spill\] SBUF tensor '([^']*)' \([^:]*:(\d+)\)", text)


def _line_of(fn, marker):
    """Line number in this file of the source line of `fn` that contains `marker`."""
    lines, first = inspect.getsourcelines(fn)
    return next(first + i for i, text in enumerate(lines) if marker in text)


# ---- straight-line phases: one big tile kept across another's use -------------------------------


def _phases(reload_a, in_parts=False):
    """out = a * rowsum(b * rowsum(a)): `a` is needed before and after `b` is. Kept in SBUF across
    `b`, 256 KiB are live at once; with `reload_a`, `a` is loaded again instead. With `in_parts`,
    `a` is loaded into its tile in four column blocks (a tile filled in parts can be spilled too)."""

    def kernel(a, b):
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        x = nl.ndarray((128, BIG), nl.float32, buffer=nl.sbuf)  # kept across phase 2
        parts = 4 if in_parts else 1
        for j in range(parts):
            cols = slice(j * BIG // parts, (j + 1) * BIG // parts)
            nisa.dma_copy(dst=x[:, cols], src=a[:, cols])
        sa = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=sa, op=nl.add, data=x, axis=1)
        y = nl.ndarray((128, BIG), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=y, src=b)
        nisa.tensor_scalar(dst=y, data=y, op0=nl.multiply, operand0=sa)
        sb = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=sb, op=nl.add, data=y, axis=1)
        if reload_a:
            x = nl.ndarray((128, BIG), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=x, src=a)
        nisa.tensor_scalar(dst=x, data=x, op0=nl.multiply, operand0=sb)  # phase 3 uses x again
        nisa.dma_copy(dst=out, src=x)
        return out

    kernel.__name__ = "phases_reload" if reload_a else ("phases_in_parts" if in_parts else "phases")
    return knit.jit(kernel)


def _phases_inputs():
    rng = np.random.default_rng(3)
    return [rng.standard_normal((128, BIG)).astype(np.float32) for _ in range(2)]


@pytest.mark.parametrize("in_parts", [False, True], ids=["one_load", "four_loads"])
def test_tile_kept_across_a_phase_is_spilled_and_matches(capsys, in_parts):
    a, b = _phases_inputs()
    spilling, fitting = _phases(False, in_parts), _phases(True)
    c = knit.compile(spilling, a, b, target=TARGET)
    got = c(a, b)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = a64 * (b64 * a64.sum(axis=1, keepdims=True)).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * np.abs(want).max())
    np.testing.assert_array_equal(got, knit.compile(fitting, a, b, target=TARGET)(a, b))
    np.testing.assert_array_equal(got, c.reference(a, b))
    warned = _sbuf_spills(capsys.readouterr().out)
    line = _line_of(_phases, "kept across phase 2")
    assert warned and set(warned) == {(warned[0][0], str(line))}


def test_spill_is_two_dmas_in_the_program_and_the_profile():
    """The spill stores the 128 KiB tile to an HBM '.spill' tensor and loads it back: two DMAs and
    2 x 16 MiB more than the kernel that loads `a` again (one DMA, 16 MiB), and more time."""
    a, b = _phases_inputs()
    spilling, fitting = _phases(False), _phases(True)
    spilled = knit.compile(spilling, a, b, target=TARGET)
    direct = knit.compile(fitting, a, b, target=TARGET)
    text = spilled.program.to_text()
    assert len(re.findall(r'tensor %\d+ "[^"]*\.spill" hbm float32\[128, 32768\] spill_of=%', text)) == 1
    assert "spill_of" not in direct.program.to_text()
    tile_bytes = 128 * BIG * 4

    def dmas(c):
        return sum(n for q, n in c.stats["instructions"].items() if q.startswith("dma"))

    assert dmas(spilled) == dmas(direct) + 1
    assert spilled.stats["dma_bytes"] == direct.stats["dma_bytes"] + tile_bytes
    assert spilled.stats["sbuf_high_water"] <= SBUF_BYTES
    slow = knit.profile(spilling, a, b, target=TARGET)
    fast = knit.profile(fitting, a, b, target=TARGET)
    assert slow.total_ns > fast.total_ns


def _load_both(a, b):
    """(output tensor like a, a in SBUF, b in SBUF): 256 KiB of SBUF per partition."""
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    x = nl.ndarray((128, BIG), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    y = nl.ndarray((128, BIG), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=y, src=b)
    return out, x, y


@knit.jit
def three_at_once(a, b):
    """One instruction reads two 128 KiB tiles (and writes a third): nothing can leave SBUF."""
    out, x, y = _load_both(a, b)
    z = nl.ndarray((128, BIG), nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=z, data1=x, data2=y, op=nl.add)
    nisa.dma_copy(dst=out, src=z)
    return out


def test_nothing_spillable_is_a_capacity_error_saying_why():
    a, b = _phases_inputs()
    with pytest.raises(NkiValidationError) as e:
        knit.compile(three_at_once, a, b, target=TARGET).program  # lowering allocates
    msg = str(e.value)
    assert "[capacity]" in msg and "sbuf" in msg and "196608 bytes per partition on trn1" in msg
    assert "none of the tensors live here can be spilled to HBM" in msg
    # y does not fit beside x; x is read with y by the add, so moving x out cannot make room.
    add, x_line = _line_of(three_at_once, "nisa.tensor_tensor"), _line_of(_load_both, "x = nl.ndarray")
    assert re.search(rf"'t\d+' \([^)]*:{x_line}\) is needed again at [^ ]*:{add} together with 't\d+'", msg)
    assert "Use smaller tiles" in msg


@knit.jit
def kept_in_a_device_loop(a, b):
    """`x` is read in every iteration of a device loop while `y` is live: never spilled."""
    out, x, y = _load_both(a, b)

    def body(i):
        nisa.tensor_scalar(dst=y, data=x, op0=nl.multiply, operand0=2.0)

    nl.fori_loop(0, 2, body)  # a device loop
    nisa.dma_copy(dst=out, src=y)
    return out


def test_tiles_used_in_device_loops_are_not_spilled():
    a, b = _phases_inputs()
    with pytest.raises(NkiValidationError) as e:
        knit.compile(kept_in_a_device_loop, a, b, target=TARGET).program
    msg = str(e.value)
    assert "[capacity]" in msg and "used inside a loop or branch" in msg


# ---- legacy block tensors: one row's chunks kept across the phases of a softmax -----------------

CHUNKS, CHUNK = 8, 8192  # 8 x 32 KiB = 256 KiB of chunks per partition


def _chunked_softmax(keep):
    """softmax over each row of x [128, CHUNKS * CHUNK], the row held as a block tensor of chunks
    (as the batched softmax and GQA benchmarks hold a row of scores): phase 1 loads the chunks and
    finds the row max, phase 2 exponentiates and sums, phase 3 normalizes. With `keep`, the chunks
    stay in SBUF from phase to phase (256 KiB); without, each phase loads them again."""

    def kernel(x):
        out = lnl.ndarray(x.shape, dtype=np.float32, buffer=lnl.shared_hbm)
        chunks = lnl.ndarray((CHUNKS, lnl.par_dim(128), CHUNK), dtype=np.float32, buffer=lnl.sbuf)

        def chunk(c):
            if keep:
                return chunks[c]
            return lnl.load(x[:, c * CHUNK:(c + 1) * CHUNK])

        m = None
        for c in lnl.affine_range(CHUNKS):
            if keep:
                chunks[c] = lnl.load(x[:, c * CHUNK:(c + 1) * CHUNK])
            cm = lnl.max(chunk(c), axis=1)
            m = cm if m is None else lnl.maximum(m, cm)
        total = None
        for c in lnl.affine_range(CHUNKS):
            e = lnl.exp(lnl.subtract(chunk(c), m))
            if keep:
                chunks[c] = e
            s = lnl.sum(e, axis=1)
            total = s if total is None else lnl.add(total, s)
        inv = lnl.reciprocal(total)
        for c in lnl.affine_range(CHUNKS):
            e = chunks[c] if keep else lnl.exp(lnl.subtract(chunk(c), m))
            lnl.store(out[:, c * CHUNK:(c + 1) * CHUNK], value=lnl.multiply(e, inv))
        return out

    kernel.__name__ = "chunked_softmax_kept" if keep else "chunked_softmax_reloaded"
    return legacy.jit(kernel)


def test_block_tensor_chunks_spill_one_block_at_a_time(capsys):
    x = np.random.default_rng(5).standard_normal((128, CHUNKS * CHUNK)).astype(np.float32)
    c = knit.compile(_chunked_softmax(True), x, target=TARGET)
    got = c(x)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-9)
    np.testing.assert_array_equal(got, knit.compile(_chunked_softmax(False), x, target=TARGET)(x))
    warned = _sbuf_spills(capsys.readouterr().out)
    assert len(warned) == len({line for _, line in warned})  # one warning per declaration line
    text = c.program.to_text()
    # Each spilled block is its own [128, CHUNK] tile: at least the 64 KiB over capacity goes out.
    assert text.count("spill_of=%") >= (CHUNKS * CHUNK * 4 - SBUF_BYTES) // (CHUNK * 4)
    assert re.search(rf'"[^"]*\.spill" hbm float32\[128, {CHUNK}\] spill_of=%', text)


def test_block_tensor_blocks_used_one_at_a_time_share_sbuf(capsys):
    """The same 256 KiB block tensor, each block used only inside its own phase-1 iteration
    (loaded, reduced, dropped): blocks reuse each other's bytes, nothing is spilled."""

    @legacy.jit
    def row_max(x):
        out = lnl.ndarray((128, 1), dtype=np.float32, buffer=lnl.shared_hbm)
        chunks = lnl.ndarray((CHUNKS, lnl.par_dim(128), CHUNK), dtype=np.float32, buffer=lnl.sbuf)
        m = None
        for c in lnl.affine_range(CHUNKS):
            chunks[c] = lnl.load(x[:, c * CHUNK:(c + 1) * CHUNK])
            cm = lnl.max(chunks[c], axis=1)
            m = cm if m is None else lnl.maximum(m, cm)
        lnl.store(out, value=m)
        return out

    x = np.random.default_rng(6).standard_normal((128, CHUNKS * CHUNK)).astype(np.float32)
    c = knit.compile(row_max, x, target=TARGET)
    np.testing.assert_array_equal(c(x), x.max(axis=1, keepdims=True))
    assert not _sbuf_spills(capsys.readouterr().out)
    assert c.stats["sbuf_high_water"] < CHUNKS * CHUNK * 4


# ---- the batched softmax benchmark's layout (tests/python/pressure_kernels.py) ------------------


def test_batched_softmax_layout_spills_score_blocks_and_matches_numpy(capsys):
    """One batch of 2048 x 4096 scores: 256 KiB of score blocks per partition live from phase 1 to
    phase 3, over trn1's 192 KiB."""
    rng = np.random.default_rng(8)
    aT = rng.standard_normal((1, 64, 2048)).astype(np.float32)
    b = rng.standard_normal((1, 64, 4096)).astype(np.float32)
    c = knit.compile(pk.batched_softmax_phases(), aT, b, target=TARGET)
    got = c(aT, b)
    s = np.einsum("bkm,bkn->bmn", aT.astype(np.float64), b.astype(np.float64))
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(axis=-1, keepdims=True), rtol=1e-4, atol=1e-7)
    warned = _sbuf_spills(capsys.readouterr().out)
    assert warned and len(warned) == len({line for _, line in warned})  # one warning per declaration line
    assert c.program.to_text().count("spill_of=%") >= (2048 * 4096 * 4 // 128 - SBUF_BYTES) // (512 * 4)
    assert c.stats["sbuf_high_water"] <= SBUF_BYTES


@pytest.mark.slow
def test_batched_softmax_layout_compiles_at_its_published_shape():
    """NKIBench bmm_softmax_B16_K64_M4096_N4096: 512 KiB of scores per batch. Placeholders: the
    kernel is traced, spilled and lowered (timing only), not run."""
    start = time.monotonic()
    c = knit.compile(pk.batched_softmax_phases(), nt.tensor[[16, 64, 4096], nl.float32],
                     nt.tensor[[16, 64, 4096], nl.float32], target=TARGET)
    text = c.program.to_text()
    if time.monotonic() - start > 60:
        pytest.skip("lowering took over 60 s on this machine")
    assert c.stats["sbuf_high_water"] <= SBUF_BYTES
    # At least the 320 KiB over capacity of each of the 16 batches leaves SBUF, 2 KiB blocks.
    assert text.count("spill_of=%") >= 16 * (512 * 1024 - SBUF_BYTES) // 2048
