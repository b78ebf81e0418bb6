"""G1 (neuronxcc.nki) behaviours public kernels rely on, each in a small kernel of our own:
select_reduce into dst=, tensor.reshape(shape=), nl.load of A[c0:c1, i] keeping a partition dim,
and nki.benchmark timing shape placeholders."""
import numpy as np
import pytest

import knit
import knit.legacy as nki
import knit.legacy.isa as nisa
import knit.legacy.language as nl
import knit.typing as nt


def test_select_reduce_writes_its_dst():
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        pred = nl.greater(t, 0.0, dtype=nl.uint8)
        dst = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        back = nisa.select_reduce(dst=dst, predicate=pred, on_true=t, on_false=-1.0)
        assert back is dst
        nl.store(out, dst)
        return out

    a = np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate_kernel(kernel, a), np.where(a > 0, a, np.float32(-1.0)))


def test_reshape_takes_its_shape_by_keyword():
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a.reshape(shape=(128, 64))))
        return out

    a = np.arange(128 * 64, dtype=np.float32).reshape(64, 128)
    np.testing.assert_array_equal(nki.simulate_kernel(kernel, a), a.reshape(128, 64))
    with pytest.raises(TypeError, match="not both"):
        nki.tensor.reshape(None, 2, shape=(2,))


def test_loading_a_column_keeps_a_partition_dim():
    @nki.jit
    def kernel(a):
        out = nl.ndarray((64, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        col = nl.load(a[32:96, 5])  # an int index: a [64, 1] tile, as in NKI
        assert tuple(col.shape) == (64, 1)
        nl.store(out, nl.multiply(col, 2.0))
        return out

    a = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    np.testing.assert_array_equal(nki.simulate_kernel(kernel, a), 2 * a[32:96, 5:6])


def test_benchmark_times_shape_placeholders():
    @nki.jit
    def add(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.add(nl.load(a), nl.load(b)))
        return out

    bench = nki.benchmark(warmup=2, iters=5)(add)
    placeholder = nt.tensor[[128, 512], nl.float32]
    assert bench(placeholder, placeholder) is None  # timed, not run
    latency = bench.benchmark_result.nc_latency.get_latency_percentile(50)
    assert latency > 0
    a = np.ones((128, 512), np.float32)
    np.testing.assert_array_equal(bench(a, a), 2 * a)  # with arrays it runs as before
    assert bench.benchmark_result.nc_latency.get_latency_percentile(50) == latency


def test_benchmark_times_on_the_target_given_as_target_or_platform_target():
    """G1 spells it platform_target=, Knit's own API target=: either picks the target, never ignored."""
    def add(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.add(nl.load(a), nl.load(b)))
        return out

    placeholder = nt.tensor[[128, 4096], nl.float32]

    def latency(**options):
        bench = nki.benchmark(warmup=2, iters=5, **options)(add)
        bench(placeholder, placeholder)
        return bench.benchmark_result.nc_latency.get_latency_percentile(50)

    assert latency(target="trn1") == latency(platform_target="trn1") != latency(target="trn3")
    assert latency(target="trn3") == latency(platform_target="trn3") == latency(target="trn3", platform_target="trn3")
    with pytest.raises(ValueError, match="different targets"):
        nki.benchmark(target="trn1", platform_target="trn2")(add)
    with pytest.raises(ValueError, match="target='trn9'"):
        nki.jit(target="trn9")(add)


def test_affine_select_of_a_psum_tile_is_staged_through_sbuf():
    @nki.jit
    def causal(a, b):
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:128, 0:128]
        scores = nl.matmul(nl.load(a), nl.load(b), transpose_x=True)  # a PSUM tile
        nl.store(out, nisa.affine_select(i_p >= i_f, scores, -9984.0))
        return out

    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 128)).astype(np.float32)
    b = rng.standard_normal((64, 128)).astype(np.float32)
    got = nki.simulate_kernel(causal, a, b)
    want = np.where(np.tril(np.ones((128, 128), bool)), a.T.astype(np.float64) @ b, -9984.0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    # The staging copy is a real instruction, so the timing model charges it.
    assert "tensor_copy" in knit.compile(causal, a, b).ir


def test_load_transpose2d_of_more_than_128_rows_tiles_the_transpose():
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 2048), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.load_transpose2d(a))  # a is [2048, 128]: 16 blocks of 128 rows
        return out

    a = np.random.default_rng(2).standard_normal((2048, 128)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate_kernel(kernel, a), a.T)
