"""The multi-rank examples of examples/kernels/python/collectives/ on 2, 4 and 8 simulated ranks.

Each example runs on float32 inputs and is compared with a float64 NumPy computation written
here, on the unsplit data as one device would compute it (not with the example's own
reference). Bounds, per element, with u = 2^-24 the unit roundoff of fp32:

    |out - ref| <= n * u * mag

where mag bounds the sizes of the terms an element accumulates and n counts the fp32 roundings
on the way (a length-K fp32 sum of products is within K * u * sum|terms|):

  tp_mlp        z = x @ W1 (K = D), silu (|silu'| <= 1.1, a few roundings: 16), y_r = h_r @ W2_r
                (K = H/R), the all_reduce sums R partials in fp32 (R roundings):
                n = 1.1 * D + 16 + H/R + R,  mag = (|x| @ |W1|) @ |W2|  (|silu(z)| <= |z|).
  sp_layernorm  LayerNorm within (D + 32) u of (|x| + |mean|) * rstd * |gamma| + |beta| (as for
                layernorm.py), then x @ W1 (K = D), relu (exact, 1-Lipschitz), @ W2_r (K = H/R),
                reduce_scatter's R-term sum and the residual add:
                n = 2 * D + 32 + H/R + R + 2,  mag = ln_mag @ |W1| @ |W2| + |x|.
  moe_dispatch  the all_to_alls and transposes move bits exactly; tokens @ W_j (K = D), relu,
                one rounding for the gate: n = D + 2,  mag = |gate| * (|tokens| @ |W_j|).

The bounds hold for any inputs; measured errors use under 0.2% of them for the MLPs and under
6% for moe_dispatch (one short sum per element, so its bound is tight). Every rank of an
all_reduce receives the same bytes, which is checked bit for bit.
"""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from kernel_test_util import ROOT, load_example  # noqa: E402  (tests/python/conftest.py puts python/ on sys.path)

tp_mlp = load_example("collectives/tp_mlp.py")
sp_layernorm = load_example("collectives/sp_layernorm.py")
moe_dispatch = load_example("collectives/moe_dispatch.py")

U = 2.0 ** -24
RANKS = [2, 4, 8]


def _f64(*arrays):
    return [np.asarray(a, np.float64) for a in arrays]


def _within(out, ref, n, mag):
    bound = n * U * mag
    err = np.abs(np.asarray(out, np.float64) - ref)
    assert np.all(err <= bound), f"worst error / bound = {float(np.max(err / bound)):.3g}"


# ---- tensor-parallel MLP (all_reduce) --------------------------------------------------------

def _silu(z):
    return z / (1.0 + np.exp(-z))


@pytest.mark.parametrize("ranks", RANKS)
def test_tp_mlp_matches_the_unsplit_mlp_on_every_rank(ranks):
    rng = np.random.default_rng(10 + ranks)
    T, D, H, E = 128, 256, 512, 256
    x = rng.standard_normal((T, D)).astype(np.float32)
    w1 = (rng.standard_normal((D, H)) / 16).astype(np.float32)
    w2 = (rng.standard_normal((H, E)) / 16).astype(np.float32)
    h_r = H // ranks
    w1_shards = [np.ascontiguousarray(w1[:, r * h_r:(r + 1) * h_r]) for r in range(ranks)]
    w2_shards = [np.ascontiguousarray(w2[r * h_r:(r + 1) * h_r]) for r in range(ranks)]

    outs = tp_mlp.knit.simulate(tp_mlp.tp_mlp_kernel, ranks=ranks)(x, w1_shards, w2_shards, ranks)

    x64, w1_64, w2_64 = _f64(x, w1, w2)
    ref = _silu(x64 @ w1_64) @ w2_64
    mag = (np.abs(x64) @ np.abs(w1_64)) @ np.abs(w2_64)
    assert len(outs) == ranks
    for out in outs:
        assert out.shape == (T, E) and out.dtype == np.float32
        _within(out, ref, 1.1 * D + 16 + h_r + ranks, mag)
    for out in outs[1:]:
        np.testing.assert_array_equal(out, outs[0])


def test_tp_mlp_each_rank_contributes_its_own_hidden_block():
    """With W2 zero outside rank 2's rows, only rank 2's partial sum is non-zero: the result is
    that rank's block alone, so a rank that used another's shard (or missed the reduction) shows."""
    rng = np.random.default_rng(20)
    ranks, T, D, H, E = 4, 128, 128, 256, 128
    x = rng.standard_normal((T, D)).astype(np.float32)
    w1 = (rng.standard_normal((D, H)) / 8).astype(np.float32)
    w2 = np.zeros((H, E), np.float32)
    w2[128:192] = rng.standard_normal((64, E)).astype(np.float32) / 8
    outs = tp_mlp.run(x, w1, w2, ranks)
    x64, w1_64, w2_64 = _f64(x, w1, w2)
    ref = _silu(x64 @ w1_64[:, 128:192]) @ w2_64[128:192]
    mag = (np.abs(x64) @ np.abs(w1_64[:, 128:192])) @ np.abs(w2_64[128:192])
    for out in outs:
        _within(out, ref, 1.1 * D + 16 + 64 + ranks, mag)


@pytest.mark.parametrize("tp", [2, 4])
def test_tp_mlp_in_data_parallel_groups_reduces_within_each_group(tp):
    """8 ranks as 8/tp replicas of a tp-way MLP, each replica with its own x: the replica group
    [[0..tp-1], [tp..2tp-1], ...] must keep the groups' sums apart."""
    rng = np.random.default_rng(70 + tp)
    ranks, T, D, H, E = 8, 64, 128, 256, 128
    xs = [rng.standard_normal((T, D)).astype(np.float32) for _ in range(ranks // tp)]
    w1 = (rng.standard_normal((D, H)) / 11).astype(np.float32)
    w2 = (rng.standard_normal((H, E)) / 16).astype(np.float32)
    h_r = H // tp
    w1_shards = [np.ascontiguousarray(w1[:, (r % tp) * h_r:(r % tp + 1) * h_r]) for r in range(ranks)]
    w2_shards = [np.ascontiguousarray(w2[(r % tp) * h_r:(r % tp + 1) * h_r]) for r in range(ranks)]

    kernel = tp_mlp.knit.simulate(tp_mlp.tp_mlp_kernel, ranks=ranks)
    outs = kernel([xs[r // tp] for r in range(ranks)], w1_shards, w2_shards, ranks, tp_size=tp)

    w1_64, w2_64 = _f64(w1, w2)
    for r, out in enumerate(outs):
        x64 = np.asarray(xs[r // tp], np.float64)
        ref = _silu(x64 @ w1_64) @ w2_64
        _within(out, ref, 1.1 * D + 16 + h_r + tp, (np.abs(x64) @ np.abs(w1_64)) @ np.abs(w2_64))


# ---- sequence-parallel LayerNorm + MLP (all_gather, reduce_scatter) ---------------------------

def _layernorm(x, gamma, beta, eps):
    mean = x.mean(axis=1, keepdims=True)
    rstd = 1.0 / np.sqrt(x.var(axis=1, keepdims=True) + eps)
    return (x - mean) * rstd * gamma + beta, (np.abs(x) + np.abs(mean)) * rstd * np.abs(gamma) + np.abs(beta)


@pytest.mark.parametrize("ranks", RANKS)
def test_sp_block_matches_the_whole_sequence_on_one_device(ranks):
    rng = np.random.default_rng(30 + ranks)
    S, D, H = 256, 128, 256
    x = (2.0 * rng.standard_normal((S, D)) + 0.5).astype(np.float32)
    gamma = (1.0 + 0.2 * rng.standard_normal(D)).astype(np.float32)
    beta = (0.2 * rng.standard_normal(D)).astype(np.float32)
    w1 = (rng.standard_normal((D, H)) / 11).astype(np.float32)
    w2 = (rng.standard_normal((H, D)) / 16).astype(np.float32)
    s_r, h_r = S // ranks, H // ranks
    x_rows = [np.ascontiguousarray(x[r * s_r:(r + 1) * s_r]) for r in range(ranks)]
    w1_shards = [np.ascontiguousarray(w1[:, r * h_r:(r + 1) * h_r]) for r in range(ranks)]
    w2_shards = [np.ascontiguousarray(w2[r * h_r:(r + 1) * h_r]) for r in range(ranks)]

    kernel = sp_layernorm.knit.simulate(sp_layernorm.sp_block_kernel, ranks=ranks)
    outs = kernel(x_rows, gamma, beta, w1_shards, w2_shards, ranks)

    x64, g64, b64, w1_64, w2_64 = _f64(x, gamma, beta, w1, w2)
    ln, ln_mag = _layernorm(x64, g64, b64, sp_layernorm.EPS)
    ref = x64 + np.maximum(ln @ w1_64, 0.0) @ w2_64
    mag = ln_mag @ np.abs(w1_64) @ np.abs(w2_64) + np.abs(x64)
    assert len(outs) == ranks
    for r, out in enumerate(outs):
        assert out.shape == (s_r, D)
        rows = slice(r * s_r, (r + 1) * s_r)
        _within(out, ref[rows], 2 * D + 32 + h_r + ranks + 2, mag[rows])


def test_sp_block_normalises_each_row_with_its_own_statistics():
    """Rows of very different scale and offset: a rank that normalised with another row's (or
    rank's) mean and variance, or got back another rank's rows, is far off."""
    rng = np.random.default_rng(40)
    ranks, S, D, H = 4, 128, 64, 128
    scale = np.exp(rng.uniform(-3, 3, (S, 1)))
    x = (scale * rng.standard_normal((S, D)) + 10 * rng.standard_normal((S, 1))).astype(np.float32)
    gamma, beta = np.ones(D, np.float32), np.zeros(D, np.float32)
    w1 = (rng.standard_normal((D, H)) / 8).astype(np.float32)
    w2 = (rng.standard_normal((H, D)) / 11).astype(np.float32)
    outs = sp_layernorm.run(x, gamma, beta, w1, w2, ranks)
    x64, w1_64, w2_64 = _f64(x, w1, w2)
    ln, ln_mag = _layernorm(x64, 1.0, 0.0, sp_layernorm.EPS)
    ref = x64 + np.maximum(ln @ w1_64, 0.0) @ w2_64
    mag = ln_mag @ np.abs(w1_64) @ np.abs(w2_64) + np.abs(x64)
    _within(np.concatenate(outs), ref, 2 * D + 32 + H // ranks + ranks + 2, mag)


# ---- MoE dispatch / combine (all_to_all twice) -----------------------------------------------

def _moe_inputs(rng, ranks, c, d, f):
    tokens = [rng.standard_normal((ranks * c, d)).astype(np.float32) for _ in range(ranks)]
    gates = [rng.uniform(0.1, 1.0, (ranks * c, 1)).astype(np.float32) for _ in range(ranks)]
    experts = [(rng.standard_normal((d, f)) / 8).astype(np.float32) for _ in range(ranks)]
    return tokens, gates, experts


@pytest.mark.parametrize("ranks", RANKS)
def test_moe_step_sends_each_block_to_its_expert_and_back(ranks):
    rng = np.random.default_rng(50 + ranks)
    c, d, f = 128 // 8, 64, 96
    tokens, gates, experts = _moe_inputs(rng, ranks, c, d, f)

    outs = moe_dispatch.knit.simulate(moe_dispatch.moe_kernel, ranks=ranks)(tokens, gates, experts, ranks)

    assert len(outs) == ranks
    for tok, gate, out in zip(tokens, gates, outs):
        assert out.shape == (ranks * c, f)
        for j, w in enumerate(experts):
            rows = slice(j * c, (j + 1) * c)
            t64, g64, w64 = _f64(tok[rows], gate[rows], w)
            ref = g64 * np.maximum(t64 @ w64, 0.0)
            _within(out[rows], ref, d + 2, g64 * (np.abs(t64) @ np.abs(w64)))


def test_moe_step_moves_tokens_exactly():
    """Expert j multiplies by 2^j (W_j = 2^j * I): each product and sum in the matmul is exact,
    so the output is gate * relu(2^j * token) rounded once, bit for bit, and any token in a
    wrong slot or at a wrong expert shows."""
    ranks, c, d = 4, 8, 32
    rng = np.random.default_rng(60)
    tokens, gates, _ = _moe_inputs(rng, ranks, c, d, d)
    experts = [np.eye(d, dtype=np.float32) * np.float32(2.0 ** j) for j in range(ranks)]
    outs = moe_dispatch.run(tokens, gates, experts, ranks)
    for tok, gate, out in zip(tokens, gates, outs):
        scale = np.repeat(2.0 ** np.arange(ranks, dtype=np.float32), c)[:, None]
        np.testing.assert_array_equal(out, gate * np.maximum(scale * tok, np.float32(0)))


def test_moe_route_fills_expert_blocks_in_token_order():
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    logits = np.array([[0, 5], [5, 0], [0, 5], [0, 5], [0, 5], [5, 0]], np.float64)
    tokens, gates, slots = moe_dispatch.route(x, logits, capacity=2)
    np.testing.assert_array_equal(slots, [2, 0, 3, -1, -1, 1])  # expert 1 is full after 2 tokens
    np.testing.assert_array_equal(tokens, x[[1, 5, 0, 2]])
    np.testing.assert_allclose(gates[:, 0], np.exp(5) / (1 + np.exp(5)), rtol=1e-6)


# ---- a script run as a user would -----------------------------------------------------------

def test_tp_mlp_script_prints_a_small_error_and_identical_ranks():
    path = os.path.join(ROOT, "examples", "kernels", "python", "collectives", "tp_mlp.py")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    run = subprocess.run([sys.executable, path], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    found = re.search(r"tp_mlp on 4 ranks: max abs error (\S+) \(\|y\| up to (\S+)\); ranks agree bit for bit: "
                      r"(\w+)", run.stdout)
    assert found, run.stdout
    error, largest = float(found.group(1)), float(found.group(2))
    # The script's shapes (D = 256, H/R = 128, R = 4, weights scaled by 1/sqrt(fan-in)) give
    # n = 1.1 * 256 + 16 + 128 + 4 ~ 430 roundings of terms no larger than ~|y| * 10.
    assert 0 < largest < 100 and error <= 430 * U * 10 * largest
    assert found.group(3) == "True"


def test_sp_block_native_path_equals_the_reference_interpreter(monkeypatch):
    """The multi-rank kernel on the JIT backend and on the reference interpreter: the same bytes."""
    rng = np.random.default_rng(7)
    ranks, S, D, H = 4, 256, 128, 256
    x = rng.standard_normal((S, D)).astype(np.float32)
    gamma, beta = np.ones(D, np.float32), np.zeros(D, np.float32)
    w1 = (rng.standard_normal((D, H)) / 11).astype(np.float32)
    w2 = (rng.standard_normal((H, D)) / 16).astype(np.float32)
    runs = {}
    for backend in ("jit-strict", "reference"):
        monkeypatch.setenv("KNIT_BACKEND", backend)
        runs[backend] = sp_layernorm.run(x, gamma, beta, w1, w2, ranks)
    for jit, ref in zip(runs["jit-strict"], runs["reference"]):
        assert jit.tobytes() == ref.tobytes()
