"""PSUM pressure: bank reuse by tiles that die, spilling when live tiles do not fit, and the
capacity error when spilling cannot help (docs/codegen.md, "Allocation" and "PSUM spilling").

Facts used, from NKI's hardware docs (docs/hw-model.md): PSUM holds 8 banks of 2 KiB per
partition; one [128, 512] fp32 matmul output fills a bank. Results are checked against NumPy in
float64 (tolerance for fp32 accumulation), and a spilled kernel against the same computation with
fewer tiles live (bit for bit: a spill copies fp32 to fp32 and back).
"""
import re

import numpy as np
import pytest

import knit
import knit.isa as nisa
import knit.language as nl
import knit.legacy as legacy
import knit.legacy.isa as lnisa
import knit.legacy.language as lnl
import knit.typing as nt
import pressure_kernels as pk
from knit.errors import NkiValidationError

BANKS = 8
TILE_N = 512  # fp32 elements of one bank per partition


def _matmul_tile(acc, xT, w, m, n, k_tiles):
    """acc (+)= xT[:, m-tile].T @ w[:, n-tile] over k_tiles chunks of 128 (one accumulation group)."""
    for k in nl.affine_range(k_tiles):
        xt = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=xT[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128])
        wt = nl.ndarray((128, TILE_N), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=wt, src=w[k * 128:(k + 1) * 128, n * TILE_N:(n + 1) * TILE_N])
        nisa.nc_matmul(dst=acc, stationary=xt, moving=wt)


def _evict(out, acc, m, n):
    o = nl.ndarray((128, TILE_N), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=o, src=acc)
    nisa.dma_copy(dst=out[m * 128:(m + 1) * 128, n * TILE_N:(n + 1) * TILE_N], src=o)


def grouped(group):
    """A kernel that accumulates `group` output tiles of a 128-row block (each one's K loop
    innermost) and only then evicts them: `group` PSUM tiles live at once, each group finished."""

    def kernel(xT, w):
        K, M = xT.shape
        N = w.shape[1]
        out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
        for m in nl.affine_range(M // 128):
            for g in nl.affine_range(N // TILE_N // group):
                accs = []
                for n in range(g * group, (g + 1) * group):
                    acc = nl.ndarray((128, TILE_N), nl.float32, buffer=nl.psum)
                    _matmul_tile(acc, xT, w, m, n, K // 128)
                    accs.append(acc)
                for i, n in enumerate(range(g * group, (g + 1) * group)):
                    _evict(out, accs[i], m, n)
        return out

    kernel.__name__ = f"grouped_{group}"
    return knit.jit(kernel)


def row_then_evict(xT, w):
    """All N / 512 tiles of a row live until the row's evictions."""
    return grouped(w.shape[1] // TILE_N)(xT, w)


@knit.jit
def evict_each(xT, w):
    """The same computation, each tile evicted as soon as its group ends (one tile live)."""
    K, M = xT.shape
    N = w.shape[1]
    out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // 128):
        for n in nl.affine_range(N // TILE_N):
            acc = nl.ndarray((128, TILE_N), nl.float32, buffer=nl.psum)
            _matmul_tile(acc, xT, w, m, n, K // 128)
            _evict(out, acc, m, n)
    return out


@knit.jit
def k_outer(xT, w):
    """K outermost: every output tile's accumulation group stays open across the whole K loop."""
    K, M = xT.shape
    N = w.shape[1]
    out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
    accs = [nl.ndarray((128, TILE_N), nl.float32, buffer=nl.psum) for _ in range(N // TILE_N)]
    for k in nl.affine_range(K // 128):
        xt = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=xT[k * 128:(k + 1) * 128, 0:128])
        for n in nl.affine_range(N // TILE_N):
            wt = nl.ndarray((128, TILE_N), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=wt, src=w[k * 128:(k + 1) * 128, n * TILE_N:(n + 1) * TILE_N])
            nisa.nc_matmul(dst=accs[n], stationary=xt, moving=wt)
    for n in nl.affine_range(N // TILE_N):
        _evict(out, accs[n], 0, n)
    return out


def _inputs(k, m, n, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((k, m)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32))


def _ref(xT, w):
    return xT.astype(np.float64).T @ w.astype(np.float64)


def _spill_warnings(text):
    return re.findall(r"warning: \[psum-spill\] PSUM tensor '[^']*' \(([^)]*)\)", text)


# ---- (a) per-iteration tiles reuse banks -------------------------------------------------------


def test_tiles_dead_after_their_iteration_reuse_banks(capsys):
    """3 x 8 = 24 PSUM tiles over the unrolled loops, never more than one live: their banks are
    reused (next fit rotates through the 8 banks), nothing is spilled."""
    xT, w = _inputs(256, 384, 8 * TILE_N)
    got = evict_each(xT, w)
    np.testing.assert_allclose(got, _ref(xT, w), rtol=1e-4, atol=1e-3)
    assert not _spill_warnings(capsys.readouterr().out)
    assert "spill_of" not in knit.compile(evict_each, xT, w).program.to_text()


@knit.jit
def dynamic_loop_tiles(xT, w):
    """One PSUM tile per iteration of an on-device loop: one allocation reused by every iteration."""
    K, M = xT.shape
    N = w.shape[1]
    out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
    for n in nl.dynamic_range(N // TILE_N):
        acc = nl.ndarray((128, TILE_N), nl.float32, buffer=nl.psum)
        xt = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt, src=xT[0:128, 0:128])
        wt = nl.ndarray((128, TILE_N), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=wt, src=w[0:128, nl.ds(n * TILE_N, TILE_N)])
        nisa.nc_matmul(dst=acc, stationary=xt, moving=wt, accumulate=False)
        o = nl.ndarray((128, TILE_N), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=o, src=acc)
        nisa.dma_copy(dst=out[0:128, nl.ds(n * TILE_N, TILE_N)], src=o)
    return out


def test_dynamic_loop_tile_is_one_allocation():
    xT, w = _inputs(128, 128, 12 * TILE_N)
    np.testing.assert_allclose(dynamic_loop_tiles(xT, w), _ref(xT, w), rtol=1e-4, atol=1e-3)
    assert knit.compile(dynamic_loop_tiles, xT, w).stats["psum_high_water"] == 2048


# ---- (b) more live tiles than banks: spill -----------------------------------------------------


@pytest.mark.parametrize("tiles", [9, 10, 12])
def test_finished_tiles_spill_and_match_unspilled(capsys, tiles):
    """tiles > 8 finished tiles wait for eviction: each one beyond 8 is spilled once (when the
    next tile starts, a finished tile that waits is copied out; it comes back before its
    eviction), with the same bits as evicting each tile at once."""
    xT, w = _inputs(256, 128, tiles * TILE_N, seed=tiles)
    spilled = row_then_evict(xT, w)
    text = capsys.readouterr().out
    np.testing.assert_allclose(spilled, _ref(xT, w), rtol=1e-4, atol=1e-3)
    np.testing.assert_array_equal(spilled, evict_each(xT, w))
    here = __file__
    warned = _spill_warnings(text)
    assert len(warned) == 1  # one warning per declaration line, counting its spills
    assert (f"the first of {tiles - BANKS} spills of tensors declared on this line" in text) == (tiles - BANKS > 1)
    assert all(w.startswith(here + ":") for w in warned)  # the tensor's declaration line
    decl = next(i for i, line in enumerate(open(here), 1) if "acc = nl.ndarray((128, TILE_N)" in line)
    assert warned[0] == f"{here}:{decl}"
    assert "copied to SBUF after line" in text and "back to PSUM before line" in text


def test_reference_interpreter_spills_the_same_way():
    xT, w = _inputs(256, 128, 10 * TILE_N, seed=3)
    c = knit.compile(grouped(10), xT, w)
    np.testing.assert_array_equal(c(xT, w), c.reference(xT, w))


def test_spill_copies_are_in_the_program_and_timed():
    """Each spill adds two tensor_copy instructions (out and back in), on VectorE or ScalarE (a
    PSUM copy whose engine is open, trn2); the timing model charges them: the same work done five
    tiles at a time (nothing spilled) is faster."""
    tiles = 10
    args = [nt.tensor[[256, 128], nl.float32], nt.tensor[[256, tiles * TILE_N], nl.float32]]
    spilling, fitting = grouped(tiles), grouped(tiles // 2)
    spilled, direct = knit.compile(spilling, *args), knit.compile(fitting, *args)
    spills = tiles - BANKS
    def copies(counts):
        return counts["dve"] + counts["act"]

    assert copies(spilled.stats["instructions"]) == copies(direct.stats["instructions"]) + 2 * spills
    assert spilled.stats["instructions"]["pe"] == direct.stats["instructions"]["pe"]
    text = spilled.program.to_text()
    assert text.count("spill_of=%") == spills and "spill_of" not in direct.program.to_text()
    assert spilled.asm.count("tensor_copy") == direct.asm.count("tensor_copy") + 2 * spills
    slow, fast = knit.profile(spilling, *args), knit.profile(fitting, *args)
    assert copies(slow.instructions) == copies(fast.instructions) + 2 * spills
    busy = sum(slow.engines[e].busy_ns for e in ("dve", "act")), sum(fast.engines[e].busy_ns for e in ("dve", "act"))
    assert busy[0] > busy[1]
    assert slow.total_ns > fast.total_ns


def test_program_text_round_trips_spills():
    args = [nt.tensor[[256, 128], nl.float32], nt.tensor[[256, 9 * TILE_N], nl.float32]]
    text = knit.compile(grouped(9), *args).program.to_text()
    assert knit._core.EngineProgram.from_text(text).to_text() == text


# ---- what spilling cannot fix: capacity errors -------------------------------------------------


def test_open_accumulation_groups_are_never_spilled():
    """With K outermost, all 10 tiles are mid-group at every point: none may be spilled (a copy
    would clear the matmul-written flags the next matmul adds to), so the capacity error stands
    and says why."""
    xT, w = _inputs(256, 128, 10 * TILE_N)
    with pytest.raises(NkiValidationError) as e:
        k_outer(xT, w)
    msg = str(e.value)
    assert "[capacity]" in msg and "psum" in msg
    assert "open matmul accumulation group" in msg
    assert "K loop innermost" in msg


@knit.jit
def sbuf_full_then_spill(xT, w, big):
    """SBUF nearly filled by one tile live to the end, so the spill copies have nowhere to go."""
    K, M = xT.shape
    N = w.shape[1]
    out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
    hold = nl.ndarray((128, big.shape[1]), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=hold, src=big)
    accs = []
    for n in nl.affine_range(N // TILE_N):
        acc = nl.ndarray((128, TILE_N), nl.float32, buffer=nl.psum)
        _matmul_tile(acc, xT, w, 0, n, K // 128)
        accs.append(acc)
    for n in nl.affine_range(N // TILE_N):
        _evict(out, accs[n], 0, n)
    nisa.dma_copy(dst=out[0:128, 0:1], src=hold[:, 0:1])
    return out


def test_spill_without_sbuf_room_goes_to_hbm(capsys):
    """SBUF keeps room for the working tiles but not for the 4 spilled banks (12 tiles - 8): the
    spills go to HBM through short-lived SBUF staging tiles (DMA cannot read PSUM), with the same
    results."""
    sbuf_bytes = 224 * 1024  # trn2 SBUF per partition
    free = 3 * 2048
    rng = np.random.default_rng(11)
    xT, w = rng.standard_normal((128, 128)).astype(np.float32), rng.standard_normal((128, 12 * TILE_N)).astype(
        np.float32)
    big = rng.standard_normal((128, (sbuf_bytes - free) // 4)).astype(np.float32)
    c = knit.compile(sbuf_full_then_spill, xT, w, big)
    text = c.program.to_text()
    assert text.count("spill_of=%") == 4
    assert re.search(r'tensor %\d+ "[^"]*\.spill" hbm float32\[128, 512\] .*spill_of=%', text)
    assert ".stage" in text
    got = c(xT, w, big)
    want = _ref(xT, w)
    want[:, 0:1] = big[:, 0:1]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    out = capsys.readouterr().out
    assert len(_spill_warnings(out)) == 1 and "the first of 4 spills of tensors declared on this line" in out
    assert "copied to HBM (through SBUF: SBUF is full)" in out


# ---- public-benchmark patterns (tests/python/pressure_kernels.py) -------------------------------


def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _silu(x):
    return x / (1 + np.exp(-x))


def _rand(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _case(name, rng, small):
    """(factory, inputs, NumPy reference or None) at a small shape, or placeholders at the
    benchmark's published shape."""
    f64 = lambda a: a.astype(np.float64)  # noqa: E731
    if name == "lora":  # NKIBench lora_M4096_N12288_K5120_R128
        M, K, N, R = (256, 256, 1024, 128) if small else (4096, 5120, 12288, 128)
        shapes = [(K, M), (K, N), (K, R), (R, N)]
        ref = lambda xT, w, a, b: f64(xT).T @ f64(w) + (f64(xT).T @ f64(a)) @ f64(b)  # noqa: E731
        return pk.lora, shapes, ref, 0.1
    if name == "swiglu":  # NKIBench swiglu_M4096_N3072_K1024
        M, K, F = (256, 512, 384) if small else (4096, 1024, 3072)
        shapes = [(K, M), (K, F), (K, F), (F, K)]

        def ref(xT, wg, wu, wd):
            x = f64(xT).T
            return (_silu(x @ f64(wg)) * (x @ f64(wu))) @ f64(wd)

        return pk.swiglu, shapes, ref, 0.05
    if name == "gqa":  # NKIBench gqa_full_B1_N4096_QH16_KH8_D128
        QH, KH, S = (4, 2, 1024) if small else (16, 8, 4096)
        shapes = [(QH, 128, S), (KH, 128, S), (KH, S, 128)]

        def ref(qT, kT, v):
            g = QH // KH
            return np.stack([_softmax(f64(qT[h]).T @ f64(kT[h // g]) / np.sqrt(128)) @ f64(v[h // g])
                             for h in range(QH)])

        return pk.gqa, shapes, ref, 1.0
    # NKIBench bmm_softmax_B16_K64_M4096_N4096
    B, K, M, N = (2, 64, 256, 4096) if small else (16, 64, 4096, 4096)
    shapes = [(B, K, M), (B, K, N)]
    ref = lambda aT, b: _softmax(np.einsum("bkm,bkn->bmn", f64(aT), f64(b)))  # noqa: E731
    return pk.batched_softmax, shapes, ref, 1.0


PATTERNS = ["lora", "swiglu", "gqa", "batched_softmax"]


@pytest.mark.parametrize("dynamic", [False, True], ids=["unrolled", "device_loop"])
@pytest.mark.parametrize("name", PATTERNS)
def test_public_patterns_match_numpy(capsys, name, dynamic):
    rng = np.random.default_rng(7)
    factory, shapes, ref, scale = _case(name, rng, small=True)
    args = [_rand(rng, *s, scale=scale) for s in shapes]
    got = factory(dynamic)(*args)
    np.testing.assert_allclose(got, ref(*args), rtol=2e-3, atol=2e-3)
    assert not _spill_warnings(capsys.readouterr().out)


@pytest.mark.parametrize("name", PATTERNS)
def test_public_patterns_fit_at_published_shapes(name):
    """The published shape, outer row loop on the device: every tile of the loop body that is
    written whole before any read is live only for its uses, so PSUM and SBUF hold the body
    (before, the whole body was live at once: LoRA ran out of SBUF, SwiGLU and GQA of PSUM)."""
    factory, shapes, _, _ = _case(name, None, small=False)
    c = knit.compile(factory(True), *[nt.tensor[list(s), nl.float32] for s in shapes])
    stats = c.stats
    assert stats["psum_high_water"] <= 16 * 1024
    assert "spill_of" not in c.program.to_text()


# ---- legacy block tensors: a block's fill waits for its first use -------------------------------


@legacy.jit
def legacy_blocks(a):
    """Two SBUF block tensors of 64 x 2 KiB each, filled at declaration in the source (256 KiB,
    more than trn2's 224 KiB SBUF per partition), each block used in one iteration only."""
    out = lnl.ndarray((64, 128, 128), dtype=np.float32, buffer=lnl.shared_hbm)
    ones = lnl.full((64, lnl.par_dim(128), 512), fill_value=1.0, dtype=np.float32, buffer=lnl.sbuf)
    acc = lnl.zeros((64, lnl.par_dim(128), 512), dtype=np.float32, buffer=lnl.sbuf, lazy_initialization=True)
    ps = lnl.zeros((64, lnl.par_dim(128), 128), dtype=np.float32, buffer=lnl.psum, lazy_initialization=True)
    t = lnl.ndarray((64, lnl.par_dim(128), 128), dtype=np.float32, buffer=lnl.sbuf)
    i_p, i_f = lnl.arange(128)[:, None], lnl.arange(128)[None, :]
    for i in lnl.affine_range(64):
        t[i, i_p, i_f] = lnl.load(a[i])
        ps[i, i_p, i_f] += lnisa.nc_matmul(t[i], t[i])
        acc[i, i_p, i_f] = lnl.add(acc[i, i_p, i_f], ones[i, i_p, i_f])
        acc[i, i_p, i_f] = lnl.add(acc[i, i_p, i_f], ps[i])
        lnl.store(out[i], value=acc[i, i_p, i_f])
    return out


def test_legacy_block_fills_wait_for_first_use():
    a = np.random.default_rng(5).standard_normal((64, 128, 128)).astype(np.float32)
    want = 1 + np.einsum("ikm,ikn->imn", a.astype(np.float64), a.astype(np.float64))
    np.testing.assert_allclose(legacy_blocks(a), want, rtol=1e-4, atol=1e-3)
