"""The random-number instructions and language functions (nki-0.6-additions.md §1.2, §1.6-§1.11,
§2.1-§2.3) against an independent Python model of the generator docs/architecture.md "Random
numbers" documents (xorwow steps, splitmix64 seeding, 4 round-robin Vector Engine states per lane
on trn3), plus the properties a CPU simulator can test: ranges, distributions with bounds that
cannot flake (fixed seeds), determinism, per-lane independence, save/restore round trips, the
dropout invariants, the rules, the legacy API and identical bytes on both backends."""
import numpy as np
import pytest

import knit as nki
import knit.isa as nisa
import knit.language as nl

# ---- the documented generator, written again in Python --------------------------------------------
_M32, _M64, _GOLDEN = 0xFFFFFFFF, (1 << 64) - 1, 0x9E3779B97F4A7C15


def _mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def _seeded(seed, lane, k):
    key = (seed << 32) | (lane << 8) | k
    return [_mix((key + (i + 1) * _GOLDEN) & _M64) >> 32 for i in range(6)]


def _step(s):
    x, y, z, w, v, d = s
    t = x ^ (x >> 2)
    v2 = (v ^ ((v << 4) & _M32)) ^ (t ^ ((t << 1) & _M32))
    d2 = (d + 362437) & _M32
    s[:] = [y, z, w, v, v2, d2]
    return (v2 + d2) & _M32


class Model:
    """One engine's per-lane states: `per_lane` states of six words, state k of lane p seeded with
    hash key k + first_k."""

    def __init__(self, per_lane, first_k, seed=0):
        self.per_lane, self.first_k = per_lane, first_k
        self.seed(seed)

    def seed(self, seed):
        self.states = [[_seeded(seed, p, self.first_k + k) for k in range(self.per_lane)] for p in range(128)]

    def draw(self, P, F):
        return np.array([[_step(self.states[p][j % self.per_lane]) for j in range(F)] for p in range(P)], np.uint32)

    def words(self, P):
        return np.array([sum(self.states[p], []) for p in range(P)], np.uint32)


def vector_model(target, seed=0):
    return Model(4 if target == "trn3" else 1, 0, seed)


def gpsimd_model(seed=0):
    return Model(1, 4, seed)


# ---- kernels ------------------------------------------------------------------------------------------
def _to_hbm(t):
    out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def _load(x, dtype=None):
    t = nl.ndarray(x.shape, dtype or x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


def draws(target, shape, dtype, engine=nisa.engine.vector, seed=None):
    """rng into `dtype` on `target`, after set_rng_seed(seed) when given."""

    @nki.jit(platform_target=target)
    def kernel(s):
        if seed is not None:
            nisa.set_rng_seed(_load(s))
        t = nl.ndarray(shape, dtype, buffer=nl.sbuf)
        nisa.rng(t, engine=engine)
        return _to_hbm(t)

    return kernel(np.array([[0 if seed is None else seed]], np.uint32))


@pytest.fixture(params=["reference", "jit"])
def backend(request, monkeypatch):
    monkeypatch.setenv("KNIT_BACKEND", request.param)
    monkeypatch.setenv("KNIT_JIT_THRESHOLD", "0")  # jit: compile even these small kernels
    return request.param


# ---- rng ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
def test_rng_draws_are_the_documented_generator(target, backend):
    np.testing.assert_array_equal(draws(target, (8, 11), nl.uint32), vector_model(target).draw(8, 11))
    np.testing.assert_array_equal(draws(target, (8, 11), nl.uint32, seed=1234),
                                  vector_model(target, 1234).draw(8, 11))


def test_rng_on_gpsimd_is_its_own_stream(backend):
    got = draws("trn2", (4, 9), nl.uint32, engine=nisa.engine.gpsimd, seed=99)
    np.testing.assert_array_equal(got, gpsimd_model().draw(4, 9))  # set_rng_seed leaves GpSimd alone
    assert not np.array_equal(got, draws("trn2", (4, 9), nl.uint32, seed=0))


def test_rng_stores_the_low_bits_of_the_same_draws():
    full = draws("trn3", (16, 32), nl.uint32, seed=5)
    for dtype, view in [(nl.uint8, np.uint8), (nl.int8, np.int8), (nl.uint16, np.uint16), (nl.int16, np.int16),
                        (nl.int32, np.int32)]:
        got = draws("trn3", (16, 32), dtype, seed=5)
        bits = np.dtype(view).itemsize * 8
        np.testing.assert_array_equal(got, (full & ((1 << bits) - 1)).astype(np.uint32).astype(view), err_msg=dtype)


def _state_for_draw(word):
    """A state whose next draw is `word`: x = v = 0 keeps v 0, so the draw is d + 362437."""
    return np.array([[0, 0, 0, 0, 0, (word - 362437) & _M32]], np.uint32)


@pytest.mark.parametrize("dtype,expected", [(nl.uint8, 185), (nl.int8, -71), (nl.uint16, 31161),
                                            (nl.int32, -1640531527), (nl.uint32, 0x9E3779B9)])
def test_the_documented_low_bits_example(dtype, expected):
    @nki.jit(platform_target="trn2")
    def kernel(state):
        nisa.rand_set_state(_load(state), engine=nisa.engine.gpsimd)
        t = nl.ndarray((1, 1), dtype, buffer=nl.sbuf)
        nisa.rng(t, engine=nisa.engine.gpsimd)
        return _to_hbm(t)

    assert kernel(_state_for_draw(0x9E3779B9))[0, 0] == expected


def test_rng_bits_are_balanced():
    bits = draws("trn3", (128, 512), nl.uint32, seed=11).astype(np.uint64)
    for b in range(32):  # each bit is 1 in half the 65536 draws: sigma 128, bound 8 sigma
        ones = int(((bits >> b) & 1).sum())
        assert abs(ones - 32768) < 1024, (b, ones)


# ---- seeding, determinism, lanes, save / restore -----------------------------------------------------
def test_same_seed_same_draws_different_seed_different_draws():
    a = draws("trn1", (128, 64), nl.uint32, seed=7)
    np.testing.assert_array_equal(a, draws("trn1", (128, 64), nl.uint32, seed=7))
    assert (a != draws("trn1", (128, 64), nl.uint32, seed=8)).mean() > 0.99
    assert len(np.unique(a[:, 0])) == 128  # lanes differ


def test_the_documented_reseed_example():
    @nki.jit(platform_target="trn1")
    def kernel(s):
        seed = _load(s)
        a = nl.ndarray((128, 16), nl.int32, buffer=nl.sbuf)
        b = nl.ndarray((128, 16), nl.int32, buffer=nl.sbuf)
        nisa.set_rng_seed(seed)
        nisa.rng(a)
        nisa.set_rng_seed(seed)
        nisa.rng(b)
        return _to_hbm(a), _to_hbm(b)

    a, b = kernel(np.array([[1234]], np.int32))
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("target,engine,words", [("trn2", nisa.engine.gpsimd, 6), ("trn3", nisa.engine.vector, 24),
                                                 ("trn3", nisa.engine.gpsimd, 6)])
def test_save_restore_round_trips(target, engine, words, backend):
    @nki.jit(platform_target=target)
    def kernel(s):
        g = nl.ndarray((128, words), nl.uint32, buffer=nl.sbuf)
        nisa.rand_get_state(g, engine=engine)
        a = nl.ndarray((128, 40), nl.uint32, buffer=nl.sbuf)
        nisa.rng(a, engine=engine)
        nisa.rand_set_state(g, engine=engine)
        b = nl.ndarray((128, 40), nl.uint32, buffer=nl.sbuf)
        nisa.rng(b, engine=engine)
        nisa.rand_set_state(_load(s), engine=engine)  # set S, then get: S back
        back = nl.ndarray((128, words), nl.uint32, buffer=nl.sbuf)
        nisa.rand_get_state(back, engine=engine)
        return _to_hbm(g), _to_hbm(a), _to_hbm(b), _to_hbm(back)

    s = np.random.default_rng(3).integers(0, 2**32, (128, words), dtype=np.uint32)
    g, a, b, back = kernel(s)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(back, s)
    model = gpsimd_model() if engine == nisa.engine.gpsimd else vector_model(target)
    np.testing.assert_array_equal(g, model.words(128))  # the unseeded state, word order [x, y, z, w, v, d]


def test_a_lane_depends_only_on_its_own_state():
    @nki.jit(platform_target="trn3")
    def kernel(s):
        nisa.rand_set_state(_load(s), engine=nisa.engine.vector)
        t = nl.ndarray((4, 24), nl.uint32, buffer=nl.sbuf)
        nisa.rng(t)
        return _to_hbm(t)

    rng = np.random.default_rng(4)
    s = rng.integers(0, 2**32, (4, 24), dtype=np.uint32)
    s[1] = s[0]
    t = kernel(s)
    np.testing.assert_array_equal(t[0], t[1])  # equal states, equal streams
    assert len({tuple(r) for r in t[1:]}) == 3
    s2 = s.copy()
    s2[3] = rng.integers(0, 2**32, 24, dtype=np.uint32)
    np.testing.assert_array_equal(kernel(s2)[:3], t[:3])  # changing lane 3 leaves lanes 0..2 alone
    # Round-robin: element j of a row draws from the lane's state j mod 4 (the model says which).
    model = Model(4, 0)
    for k in range(4):
        model.states[0][k] = [int(w) for w in s[0, 6 * k:6 * k + 6]]
    np.testing.assert_array_equal(t[0], model.draw(1, 24)[0])


# ---- rand2 --------------------------------------------------------------------------------------------
def _rand2_model(bits, lo, hi):
    t = (bits >> 8).astype(np.float64) / 16777215.0
    v = (lo + (hi - lo) * t).astype(np.float32)
    return np.clip(v, np.float32(lo), np.float32(hi))


def test_rand2_is_the_documented_mapping_with_per_partition_bounds(backend):
    @nki.jit(platform_target="trn3")
    def kernel(lo, hi):
        t = nl.ndarray((2, 64), nl.float32, buffer=nl.sbuf)
        nisa.rand2(t, min=_load(lo), max=_load(hi))
        return _to_hbm(t)

    lo, hi = np.array([[0.0], [10.0]], np.float32), np.array([[1.0], [20.0]], np.float32)
    got = kernel(lo, hi)
    assert (got[0] >= 0).all() and (got[0] <= 1).all() and (got[1] >= 10).all() and (got[1] <= 20).all()
    np.testing.assert_array_equal(got, _rand2_model(vector_model("trn3").draw(2, 64), lo, hi))


def test_rand2_distribution():
    @nki.jit(platform_target="trn3")
    def kernel(s):
        nisa.set_rng_seed(_load(s))
        t = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
        nisa.rand2(t, -3.0, 5.0)
        return _to_hbm(t)

    u = kernel(np.array([[2024]], np.uint32)).astype(np.float64)
    assert u.min() >= -3 and u.max() <= 5
    n = u.size  # 65536: bounds at 8 standard errors
    assert abs(u.mean() - 1.0) < 8 * np.sqrt(64 / 12 / n)
    assert abs(u.var() - 64 / 12) < 8 * np.sqrt((8**4 / 80 - (64 / 12) ** 2) / n)
    counts = np.histogram(u, bins=16, range=(-3, 5))[0]
    chi2 = ((counts - n / 16) ** 2 / (n / 16)).sum()
    assert chi2 < 60  # 15 degrees of freedom: P(chi2 > 60) ~ 1e-7


def test_rand2_to_integers_gives_half_weight_end_points():
    @nki.jit(platform_target="trn3")
    def kernel():
        t = nl.ndarray((128, 512), nl.int32, buffer=nl.sbuf)
        nisa.rand2(t, 0.0, 6.0)
        return _to_hbm(t)

    counts = np.bincount(kernel().ravel(), minlength=7)
    assert counts.sum() == 65536 and len(counts) == 7
    inner = counts[1:6].mean()  # about 65536 / 6
    assert abs(counts[0] / inner - 0.5) < 0.05 and abs(counts[6] / inner - 0.5) < 0.05


# ---- dropout ------------------------------------------------------------------------------------------
def dropped(target, x, prob, seed=None):
    @nki.jit(platform_target=target)
    def kernel(x, p, s):
        if seed is not None:
            nisa.set_rng_seed(_load(s))
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dropout(out, _load(x), prob if p is None else _load(p))
        return _to_hbm(out)

    p = None if np.isscalar(prob) else prob
    return kernel(x, p, np.array([[seed or 0]], np.uint32))


def test_dropout_keeps_bits_or_zeroes_as_the_generator_says(backend):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((64, 48)).astype(np.float32)
    x[0, :4] = [np.nan, -0.0, np.inf, 1e-45]
    got = dropped("trn2", x, 0.3)
    u = (vector_model("trn2").draw(64, 48) >> 8).astype(np.float32) * np.float32(2.0**-24)
    want = np.where(u < np.float32(0.3), np.float32(0), x)
    assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist()  # bit for bit (NaN included)
    assert ((got.view(np.uint32) == x.view(np.uint32)) | (got.view(np.uint32) == 0)).all()


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8])
def test_dropout_prob_zero_is_identity_and_one_is_zeros(dtype):
    x = (np.arange(32 * 20).reshape(32, 20) % 200 + 1).astype(dtype)
    np.testing.assert_array_equal(dropped("trn1", x, 0.0), x)
    np.testing.assert_array_equal(dropped("trn1", x, 1.0), np.zeros_like(x))
    np.testing.assert_array_equal(dropped("trn1", x, 7.5), np.zeros_like(x))  # clamped to 1
    np.testing.assert_array_equal(dropped("trn1", x, -2.0), x)  # clamped to 0


def test_dropout_rate_is_about_prob():
    x = np.ones((128, 512), np.float32)
    zeros = (dropped("trn3", x, 0.2, seed=77) == 0).mean()
    assert abs(zeros - 0.2) < 0.0125  # sigma 0.00156 for 65536 elements: 8 sigma


def test_dropout_per_partition_probabilities():
    x = np.full((4, 4096), 3.0, np.float32)
    prob = np.array([[0.0], [1.0], [0.5], [0.9]], np.float32)
    got = dropped("trn2", x, prob)
    np.testing.assert_array_equal(got[0], x[0])
    np.testing.assert_array_equal(got[1], 0)
    assert abs((got[2] == 0).mean() - 0.5) < 0.04 and abs((got[3] == 0).mean() - 0.9) < 0.03  # > 8 sigma
    assert set(np.unique(got)) <= {0.0, 3.0}


def test_nl_dropout_worked_example():
    @nki.jit(platform_target="trn2")
    def kernel(x, r):
        y = nl.dropout(_load(x), _load(r))
        return _to_hbm(y)

    x = np.array([[4, 4, 4, 4], [8, 8, 8, 8]], np.float32)
    np.testing.assert_array_equal(kernel(x, np.array([[0.0], [1.0]], np.float32)),
                                  [[4, 4, 4, 4], [0, 0, 0, 0]])


def test_nl_dropout_casts_to_dtype():
    @nki.jit(platform_target="trn1")
    def kernel(x):
        return _to_hbm(nl.dropout(_load(x), 0.0, dtype=nl.int32))

    x = np.array([[1.5, 2.5, -3.0]], np.float32)
    np.testing.assert_array_equal(kernel(x), [[2, 2, -3]])  # RNE cast of the kept values


# ---- nl.rand / nl.random_seed -------------------------------------------------------------------------
@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
@pytest.mark.parametrize("dtype", [nl.float32, nl.bfloat16, nl.float16])
def test_nl_rand_is_in_zero_one_and_reproducible(target, dtype):
    @nki.jit(platform_target=target)
    def kernel(s):
        seed = _load(s)
        nl.random_seed(seed)
        a = nl.rand((128, 512), dtype=dtype)
        nl.random_seed(seed)
        b = nl.rand((128, 512), dtype=dtype)
        return _to_hbm(a), _to_hbm(b)

    a, b = kernel(np.array([[42]], np.int32))
    np.testing.assert_array_equal(a, b)
    a = a.astype(np.float64)
    assert a.min() >= 0 and a.max() < 1
    assert abs(a.mean() - 0.5) < 0.01 and abs(a.var() - 1 / 12) < 0.005
    c, _ = kernel(np.array([[43]], np.int32))
    assert (c != a).mean() > 0.9


@pytest.mark.parametrize("target", ["trn1", "trn3"])
def test_nl_rand_values_are_the_documented_lowering(target):
    @nki.jit(platform_target=target)
    def kernel():
        return _to_hbm(nl.rand((8, 16), dtype=nl.float32))

    bits = vector_model(target).draw(8, 16)
    if target == "trn3":
        want = _rand2_model(bits, 0.0, 1.0 - 2.0**-24)
    else:
        want = np.minimum((bits & 0xFFFF).astype(np.float32) * np.float32(2.0**-16), np.float32(1.0 - 2.0**-24))
    np.testing.assert_array_equal(kernel(), want)


def test_nl_rand_into_hbm():
    @nki.jit(platform_target="trn2")
    def kernel():
        return nl.rand((4, 8), dtype=nl.float32, buffer=nl.shared_hbm)

    a = kernel()
    assert a.shape == (4, 8) and (a >= 0).all() and (a < 1).all()


# ---- rules ----------------------------------------------------------------------------------------------
def _raises(target, body, match, *args):
    @nki.jit(platform_target=target)
    def kernel(x):
        body(x)
        return None

    with pytest.raises(nki.NkiValidationError, match=match):
        kernel(*(args or (np.zeros((4, 24), np.uint32),)))


def _tile(shape, dtype, buffer=nl.sbuf):
    return nl.ndarray(shape, dtype, buffer=buffer)


@pytest.mark.parametrize("target,body,match", [
    ("trn2", lambda x: nisa.rand2(_tile((4, 8), nl.float32), 0.0, 1.0), "gen4"),
    ("trn3", lambda x: nisa.rand2(_tile((4, 8), nl.float32), 1.0, 1.0), "min < max"),
    ("trn3", lambda x: nisa.rand2(_tile((4, 8), nl.float32), _tile((4, 1), nl.bfloat16), 1.0), "dtype"),
    ("trn3", lambda x: nisa.rand2(_tile((4, 8), nl.float32), _tile((4, 2), nl.float32), 1.0), r"\[P, 1\]"),
    ("trn1", lambda x: nisa.rand_set_state(_load(x), engine=nisa.engine.gpsimd), "trn2"),
    ("trn1", lambda x: nisa.rand_get_state(_tile((4, 6), nl.uint32)), "trn2"),
    ("trn2", lambda x: nisa.rand_set_state(_load(x), engine=nisa.engine.vector), "trn3"),
    ("trn2", lambda x: nisa.rand_get_state(_tile((4, 24), nl.uint32), engine=nisa.engine.vector), "trn3"),
    ("trn3", lambda x: nisa.rand_set_state(_load(x), engine=nisa.engine.gpsimd), "6 uint32 words"),
    ("trn3", lambda x: nisa.rand_get_state(_tile((4, 6), nl.uint32), engine=nisa.engine.vector), "24 uint32"),
    ("trn3", lambda x: nisa.rand_get_state(_tile((4, 6), nl.int32)), "dtype"),
    ("trn3", lambda x: nisa.rand_get_state(_tile((4, 2, 3), nl.uint32)), "2-D"),
    ("trn3", lambda x: nisa.rand_set_state(_tile((4, 6), nl.uint32, nl.psum)), "buffer"),
    ("trn2", lambda x: nisa.rand_get_state(_tile((4, 24), nl.uint32, nl.psum), engine=nisa.engine.vector), "trn3"),
    ("trn3", lambda x: nisa.rand_get_state(_tile((4, 6), nl.uint32, nl.psum)), "buffer"),
    ("trn3", lambda x: nisa.rand_set_state(_load(x), engine=nisa.engine.scalar), "engine"),
    ("trn1", lambda x: nisa.rng(_tile((4, 8), nl.int32), engine=nisa.engine.gpsimd), "trn2"),
    ("trn2", lambda x: nisa.rng(_tile((4, 8), nl.int32, nl.psum), engine=nisa.engine.gpsimd), "PSUM"),
    ("trn2", lambda x: nisa.rng(_tile((4, 8), nl.float32)), "dtype"),
    ("trn2", lambda x: nisa.rng(_tile((4, 8), nl.int32), engine=nisa.engine.scalar), "engine"),
    ("trn2", lambda x: nisa.set_rng_seed(_tile((2, 1), nl.int32)), r"\[1, 1\]"),
    ("trn2", lambda x: nisa.set_rng_seed(_tile((1, 1), nl.float32)), "dtype"),
    ("trn2", lambda x: nisa.dropout(_tile((4, 8), nl.float16), _tile((4, 8), nl.float32), 0.5), "dtype"),
    ("trn2", lambda x: nisa.dropout(_tile((4, 8), nl.int32), _tile((4, 8), nl.int32), _tile((4, 1), nl.bfloat16)),
     "dtype"),
    ("trn2", lambda x: nisa.dropout(_tile((4, 8), nl.float32), _tile((4, 8), nl.float32), _tile((2, 1), nl.float32)),
     "partition"),
    ("trn2", lambda x: nl.random_seed(7), "Python int|int"),
    ("trn2", lambda x: nl.rand((4, 8), dtype=nl.int32), "nisa.rng"),
])
def test_rules(target, body, match):
    _raises(target, body, match)


def test_rand2_column_bounds_are_checked_when_run():
    @nki.jit(platform_target="trn3")
    def kernel(lo, hi):
        t = nl.ndarray((2, 4), nl.float32, buffer=nl.sbuf)
        nisa.rand2(t, _load(lo), _load(hi))
        return _to_hbm(t)

    with pytest.raises(nki.KnitRuntimeError, match="partition 1 has min 5"):
        kernel(np.array([[0.0], [5.0]], np.float32), np.array([[1.0], [2.0]], np.float32))


# ---- backends ---------------------------------------------------------------------------------------------
@nki.jit(platform_target="trn3")
def everything(x, s):
    nisa.set_rng_seed(_load(s))
    a = nl.ndarray((128, 64), nl.uint16, buffer=nl.sbuf)
    nisa.rng(a)
    b = nl.ndarray((128, 64), nl.bfloat16, buffer=nl.sbuf)
    nisa.rand2(b, -1.0, 1.0)
    g = nl.ndarray((128, 6), nl.uint32, buffer=nl.sbuf)
    nisa.rand_get_state(g)
    c = nl.ndarray((128, 64), nl.int8, buffer=nl.sbuf)
    nisa.rng(c, engine=nisa.engine.gpsimd)
    d = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
    nisa.dropout(d, _load(x), 0.4)
    e = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(e, d, nl.multiply, 2.0)  # a native instruction around them
    return _to_hbm(a), _to_hbm(b), _to_hbm(g), _to_hbm(c), _to_hbm(e), _to_hbm(nl.rand((128, 64), nl.float32))


def test_jit_and_reference_give_identical_bytes(monkeypatch):
    x = np.random.default_rng(9).standard_normal((128, 64)).astype(np.float32)
    s = np.array([[31337]], np.uint32)
    results = {}
    for b in ("reference", "jit", "jit-strict"):
        monkeypatch.setenv("KNIT_BACKEND", b)
        results[b] = everything(x, s)
    for b in ("jit", "jit-strict"):
        for got, want in zip(results[b], results["reference"]):
            assert got.tobytes() == want.tobytes(), b
    run = everything.compile(x, s).last_run
    assert run["native"] > 0 and run["interpreted"] >= 7  # the random instructions ran on the reference
    assert not run["fallbacks"]


# ---- the legacy API -------------------------------------------------------------------------------------
def test_legacy_rand_random_seed_and_dropout():
    from knit.legacy import isa as lisa, language as lnl

    @nki.jit(platform_target="trn2")
    def kernel(x, s, r):
        seed = lnl.load(s)
        lnl.random_seed(seed)
        a = lnl.rand((128, 32))  # G1: no dtype, float32
        lnl.random_seed(seed)
        b = lnl.rand((128, 32))
        out_a = lnl.ndarray((128, 32), dtype=lnl.float32, buffer=lnl.shared_hbm)
        out_b = lnl.ndarray((128, 32), dtype=lnl.float32, buffer=lnl.shared_hbm)
        lnl.store(out_a, a)
        lnl.store(out_b, b)
        t = lnl.load(x)
        d = lnl.ndarray((2, 4), dtype=lnl.float32, buffer=lnl.shared_hbm)
        lnl.store(d, lnl.dropout(t, rate=lnl.load(r)))
        e = lnl.ndarray((2, 4), dtype=lnl.float32, buffer=lnl.shared_hbm)
        lnl.store(e, lisa.dropout(t, prob=1.0))
        return out_a, out_b, d, e

    x = np.array([[4, 4, 4, 4], [8, 8, 8, 8]], np.float32)
    a, b, d, e = kernel(x, np.array([[5]], np.int32), np.array([[0.0], [1.0]], np.float32))
    assert a.dtype == np.float32 and (a >= 0).all() and (a < 1).all()
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(d, [[4, 4, 4, 4], [0, 0, 0, 0]])
    np.testing.assert_array_equal(e, np.zeros((2, 4)))


def test_legacy_random_seed_takes_a_python_int_as_its_32_bits():
    from knit.legacy import language as lnl

    @nki.jit(platform_target="trn1")
    def kernel(s):
        t = lnl.load(s)
        lnl.random_seed(t)
        a = lnl.rand((8, 16))
        lnl.random_seed(0xDEADBEEF)  # G1: a 32-bit scalar
        b = lnl.rand((8, 16))
        out = lnl.ndarray((2, 8, 16), dtype=lnl.float32, buffer=lnl.shared_hbm)
        lnl.store(out[0], a)
        lnl.store(out[1], b)
        return out

    out = kernel(np.array([[0xDEADBEEF]], np.uint32))
    np.testing.assert_array_equal(out[0], out[1])
    bits = vector_model("trn1", 0xDEADBEEF).draw(8, 16)
    np.testing.assert_array_equal(out[0], (bits & 0xFFFF).astype(np.float32) * np.float32(2.0**-16))


def test_each_core_has_its_own_generators():
    @nki.jit(platform_target="trn2")
    def kernel():
        rank = nl.program_id(0)
        out = nl.ndarray((2, 8, 16), nl.uint32, buffer=nl.shared_hbm)
        t = nl.ndarray((8, 16), nl.uint32, buffer=nl.sbuf)
        nisa.rng(t)
        nisa.dma_copy(dst=out[rank], src=t)
        return out

    out = kernel[2]()
    want = vector_model("trn2").draw(8, 16)  # both start at seed 0: core 1 does not continue core 0's stream
    np.testing.assert_array_equal(out[0], want)
    np.testing.assert_array_equal(out[1], want)


def test_legacy_flash_attention_dropout_pattern():
    # G1 flash attention: seed = nl.add(seed tile, offset); nl.random_seed(seed=...);
    # nl.dropout(p, rate=rates[:, 0]); then the 1 / (1 - p) rescale by hand.
    from knit.legacy import language as lnl

    @nki.jit(platform_target="trn2")
    def kernel(x, r, s):
        seed = lnl.add(lnl.load(s), 3, dtype=lnl.int32)
        lnl.random_seed(seed=seed)
        rates = lnl.load(r)
        y = lnl.dropout(lnl.load(x), rate=rates[:, 0])
        out = lnl.ndarray(x.shape, dtype=x.dtype, buffer=lnl.shared_hbm)
        lnl.store(out, lnl.multiply(y, 2.0))
        return out

    x = np.ones((4, 8), np.float32)
    got = kernel(x, np.array([[0.0], [1.0], [0.5], [0.0]], np.float32), np.array([[5]], np.int32))
    u = (vector_model("trn2", 8).draw(4, 8) >> 8).astype(np.float32) * np.float32(2.0**-24)
    np.testing.assert_array_equal(got, np.where(u < np.array([[0.0], [1.0], [0.5], [0.0]], np.float32), 0, 2))


def test_profile_runs_and_times_them_on_their_engines():
    x = np.random.default_rng(9).standard_normal((128, 64)).astype(np.float32)
    s = np.array([[5]], np.uint32)
    functional = nki.profile(everything, x, s, target="trn3")
    timing_only = nki.profile(everything, x, s, target="trn3", timing_only=True)
    want = everything.compile(x, s).reference(x, s)
    for got, ref in zip(functional.outputs, want):
        assert got.tobytes() == ref.tobytes()
    assert timing_only.outputs is None and timing_only.total_ns == functional.total_ns
    assert functional.engines["pool"].busy_ns > 0 and functional.engines["dve"].busy_ns > 0
