"""Shared helpers of the NKI 0.6 instruction tests: run a kernel on both backends and compare."""
import ml_dtypes
import numpy as np

import knit.isa as nisa
import knit.language as nl

BF16 = np.dtype(ml_dtypes.bfloat16)


def sbuf(x, dtype=None):
    """An SBUF tile holding HBM tensor x (converted to `dtype` on the way when given)."""
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    if dtype is None:
        return t
    u = nl.ndarray(x.shape, dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=u, src=t)
    return u


def to_hbm(t):
    """A kernel output holding tile t."""
    out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def run_both(monkeypatch, kernel, *args):
    """Runs `kernel` on the reference executors and natively (jit-strict: every data instruction on
    the native path, none interpreted), asserts the outputs are the same bytes, and returns them
    (a tuple)."""
    results = {}
    for backend in ("reference", "jit-strict"):
        monkeypatch.setenv("KNIT_BACKEND", backend)
        out = kernel(*args)
        results[backend] = out if isinstance(out, tuple) else (out,)
    last = kernel.compile(*args).last_run
    assert last["native"] > 0 and last["interpreted"] == 0, last
    for got, want in zip(results["jit-strict"], results["reference"]):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()
    return results["reference"]
