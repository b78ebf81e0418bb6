"""nisa.exponential (NKI 0.6, trn3): dst = exp(src - max_value) with optional row sums into the
Vector Engine accumulators, against NumPy and the additions reference's worked example, on the
reference and native backends (identical bytes)."""
import numpy as np
import pytest

import knit as nki
import knit.isa as nisa
import knit.language as nl


@nki.jit(platform_target="trn3")
def exp_rows(x, m, cmd, src2=None):
    p, f = x.shape
    t = nl.ndarray((p, f), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    mx = nl.ndarray((p, 1), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=mx, src=m)
    y = nl.ndarray((p, f), nl.float32, buffer=nl.sbuf)
    res = nl.ndarray((p, 1), nl.float32, buffer=nl.sbuf)
    nisa.exponential(dst=y, src=t, max_value=mx, reduce_cmd=cmd)
    if src2 is not None:  # a second call adds on top of the accumulators
        t2 = nl.ndarray((p, f), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t2, src=src2)
        y2 = nl.ndarray((p, f), nl.float32, buffer=nl.sbuf)
        nisa.exponential(dst=y2, src=t2, max_value=mx, reduce_res=res, reduce_cmd=nisa.reduce_cmd.reduce)
    else:
        nisa.memset(dst=res, value=0.0)
    out = nl.ndarray((p, f), nl.float32, buffer=nl.shared_hbm)
    sums = nl.ndarray((p, 1), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=y)
    nisa.dma_copy(dst=sums, src=res)
    return out, sums


@pytest.fixture(params=["reference", "jit-strict"])
def backend(request, monkeypatch):
    monkeypatch.setenv("KNIT_BACKEND", request.param)
    return request.param


def test_the_documented_example(backend):
    # src [[1, 2, 3], [0, 0, -inf]], max [[3], [0]], reset_reduce; then src2 with reduce.
    x = np.array([[1, 2, 3], [0, 0, -np.inf]], np.float32)
    m = np.array([[3], [0]], np.float32)
    src2 = np.array([[3, 3, 3], [0, 0, 0]], np.float32)
    y, r = exp_rows(x, m, nisa.reduce_cmd.reset_reduce, src2)
    np.testing.assert_allclose(y, [[0.135335, 0.367879, 1.0], [1, 1, 0]], rtol=1e-5)
    np.testing.assert_allclose(r, [[4.503215], [5.0]], rtol=1e-5)


def test_matches_numpy_on_a_tile(backend):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((128, 96)).astype(np.float32)
    m = x.max(axis=1, keepdims=True)
    y, _ = exp_rows(x, m, nisa.reduce_cmd.idle)
    np.testing.assert_allclose(y, np.exp(x.astype(np.float64) - m), rtol=2e-6)


def test_native_and_reference_bytes_are_identical(monkeypatch):
    rng = np.random.default_rng(8)
    x = (rng.standard_normal((64, 40)) * 10).astype(np.float32)
    m = rng.standard_normal((64, 1)).astype(np.float32)
    src2 = rng.standard_normal((64, 40)).astype(np.float32)
    results = {}
    for b in ("reference", "jit-strict"):
        monkeypatch.setenv("KNIT_BACKEND", b)
        results[b] = exp_rows(x, m, nisa.reduce_cmd.reset_reduce, src2)
        if b == "jit-strict":
            assert exp_rows.compile(x, m, nisa.reduce_cmd.reset_reduce, src2).last_run["native"] > 0
    for got, want in zip(results["jit-strict"], results["reference"]):
        assert got.tobytes() == want.tobytes()


def test_load_reduce_seeds_the_accumulators_with_reduce_init():
    @nki.jit(platform_target="trn3")
    def seeded(x):
        t = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        y = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        res = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
        nisa.exponential(dst=y, src=t, reduce_res=res, reduce_cmd=nisa.reduce_cmd.load_reduce, reduce_init=10.0)
        out = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=res)
        return out

    x = np.zeros((4, 3), np.float32)
    np.testing.assert_array_equal(seeded(x), np.full((4, 1), 13.0, np.float32))  # 10 + 3 * exp(0)


def test_rules():
    @nki.jit(platform_target="trn2")
    def on_trn2(x):
        t = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.exponential(dst=t, src=t)
        return None

    with pytest.raises(nki.NkiValidationError, match="gen4"):
        on_trn2(np.zeros((4, 3), np.float32))

    @nki.jit(platform_target="trn3")
    def stray_init(x):
        t = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.exponential(dst=t, src=t, reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_init=1.0)
        return None

    with pytest.raises(nki.NkiValidationError, match="load_reduce"):
        stray_init(np.zeros((4, 3), np.float32))
