"""nc_matmul_mx with .indirect() operands (nki-0.6-additions.md §5.2): dst, and the pairs
(stationary, stationary_scale), (moving, moving_scale), each pair gathered by one index.

The NumPy reference gathers word columns of the data with the per-group rule of the Tensor Engine
(G = 32: column i of data partition p reads offset index[(p // 32) * 32 + i % 32, i // 32]); the
scale [P/8, W] follows its data, scale partition q taking the offsets of data partition 8q. Then
it dequantizes (fp8 e4m3fn sub-element j of word w of partition p is contraction row k = 4p + j,
times 2^(scale - 127)) and multiplies in float64. The data are integers in [-4, 4] and the scales
2^-1 .. 2^1, so every product and partial sum is a multiple of 2^-2 below 2^15, exact in fp32:
the results must match exactly.
"""
import numpy as np
import pytest

import knit as nki
import knit.isa as nisa
import knit.language as nl
from test_indirect_compute import backend, to_hbm  # noqa: F401  (backend: KNIT_BACKEND per test)

ml_dtypes = pytest.importorskip("ml_dtypes")

G = 32


def offsets(index, P, n, rows=1):
    """off[q, i]: the word column partition q's column i reads; `rows` index rows per partition."""
    p = np.arange(P)[:, None] * rows
    i = np.arange(n)[None, :]
    return index[(p // G) * G + i % G, i // G].astype(np.int64)


def gather(x, off):
    return np.take_along_axis(x, off, axis=1)


def distinct_index(rng, P, F, n):
    """A (P, ceil(n / G)) uint16 index giving each group of G partitions n distinct columns of F."""
    index = np.zeros((P, -(-n // G)), np.uint16)
    for g in range(P // G):
        for i, o in enumerate(rng.permutation(F)[:n]):
            index[g * G + i % G, i // G] = o
    return index


def mx_words(rng, P, W):
    """uint32 words of four e4m3fn sub-elements, each an integer in [-4, 4] (exact products)."""
    values = rng.integers(-4, 5, (P, W, 4)).astype(ml_dtypes.float8_e4m3fn)
    return values.view(np.uint8).reshape(P, W * 4).view("<u4")


def dequantize(words, scales):
    """[P, W] words, [P/8, W] scale codes -> float64 [4P, W] in contraction order k = 4p + j."""
    P, W = words.shape
    values = words.view(np.uint8).reshape(P, W, 4).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    scale = np.exp2(np.repeat(scales.astype(np.float64) - 127, 8, axis=0))
    return (values * scale[:, :, None]).transpose(0, 2, 1).reshape(4 * P, W)


def sbuf(x, dtype=None):
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t.view(dtype) if dtype else t


@nki.jit(platform_target="trn3")
def gathered(a, sa, b, sb, a_index, b_index, M, N):
    packed = nl.float8_e4m3fn_x4
    a, b, sa, sb = sbuf(a, packed), sbuf(b, packed), sbuf(sa), sbuf(sb)
    ai, bi = sbuf(a_index), sbuf(b_index)
    acc = nl.ndarray((M, N), nl.float32, buffer=nl.psum)
    nisa.nc_matmul_mx(dst=acc, stationary=a.indirect(ai, num_elem=M), moving=b.indirect(bi, num_elem=N),
                      stationary_scale=sa.indirect(ai, num_elem=M), moving_scale=sb.indirect(bi, num_elem=N))
    out = nl.ndarray((M, N), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=out, src=acc)
    return to_hbm(out)


@pytest.mark.usefixtures("backend")
def test_gathered_pairs_match_numpy():
    rng = np.random.default_rng(21)
    P, WA, WB, M, N = 64, 40, 70, 36, 20  # M > G: two index columns; two groups with their own rows
    a, b = mx_words(rng, P, WA), mx_words(rng, P, WB)
    sa = rng.integers(126, 129, (P // 8, WA)).astype(np.uint8)
    sb = rng.integers(126, 129, (P // 8, WB)).astype(np.uint8)
    a_index, b_index = distinct_index(rng, P, WA, M), distinct_index(rng, P, WB, N)
    got = gathered(a, sa, b, sb, a_index, b_index, M, N)
    A = dequantize(gather(a, offsets(a_index, P, M)), gather(sa, offsets(a_index, P // 8, M, rows=8)))
    B = dequantize(gather(b, offsets(b_index, P, N)), gather(sb, offsets(b_index, P // 8, N, rows=8)))
    np.testing.assert_array_equal(got, A.T @ B)
    # The groups' own offsets matter: group 1 does not just repeat group 0's columns.
    assert not np.array_equal(a_index[:G], a_index[G:])


@nki.jit(platform_target="trn3")
def scattered(a, sa, b, sb, index, width):
    packed = nl.float8_e4m3fn_x4
    a, b, sa, sb, idx = sbuf(a, packed), sbuf(b, packed), sbuf(sa), sbuf(sb), sbuf(index)
    M, N = a.shape[1], b.shape[1]
    acc = nl.ndarray((M, width), nl.float32, buffer=nl.psum)
    nisa.memset(dst=acc, value=-1.0)
    nisa.nc_matmul_mx(dst=acc.indirect(idx, num_elem=N), stationary=a, moving=b, stationary_scale=sa,
                      moving_scale=sb, tile_position=(0, 0), tile_size=(128, 128))
    out = nl.ndarray((M, width), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=out, src=acc)
    return to_hbm(out)


@pytest.mark.usefixtures("backend")
def test_scattered_dst_matches_numpy():
    rng = np.random.default_rng(22)
    P, M, N, width = 32, 32, 24, 50
    a, b = mx_words(rng, P, M), mx_words(rng, P, N)
    sa = rng.integers(126, 129, (P // 8, M)).astype(np.uint8)
    sb = rng.integers(126, 129, (P // 8, N)).astype(np.uint8)
    index = distinct_index(rng, M, width, N)  # dst's M partitions: one group
    got = scattered(a, sa, b, sb, index, width)
    want = np.full((M, width), -1.0)
    want[np.arange(M)[:, None], offsets(index, M, N)] = dequantize(a, sa).T @ dequantize(b, sb)
    np.testing.assert_array_equal(got, want)


# ---- the pair rule and tile_position --------------------------------------------------------------


def rejected(build, match):
    @nki.jit(platform_target="trn3")
    def kernel(words, scales, index):
        w, s, idx = sbuf(words, nl.float8_e4m3fn_x4), sbuf(scales), sbuf(index)
        acc = nl.ndarray((4, 4), nl.float32, buffer=nl.psum)
        nisa.nc_matmul_mx(dst=acc, **build(w, s, idx))
        out = nl.ndarray((4, 4), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=out, src=acc)
        return to_hbm(out)

    index = np.zeros((32, 2), np.uint16)
    with pytest.raises(nki.KnitError, match=match) as info:
        kernel(np.zeros((32, 8), np.uint32), np.full((4, 8), 127, np.uint8), index)
    assert "test_indirect_mx.py" in str(info.value)


def test_data_indirect_without_its_scale_is_rejected():
    def build(w, s, idx):
        return dict(stationary=w.indirect(idx, num_elem=4), stationary_scale=s[:, 0:4], moving=w[:, 0:4],
                    moving_scale=s[:, 0:4])

    rejected(build, r"stationary and stationary_scale must both be \.indirect\(\) views .* only stationary is one")


def test_scale_indirect_without_its_data_is_rejected():
    def build(w, s, idx):
        return dict(stationary=w[:, 0:4], stationary_scale=s[:, 0:4], moving=w[:, 0:4],
                    moving_scale=s.indirect(idx, num_elem=4))

    rejected(build, r"moving and moving_scale must both .* only moving_scale is one")


def test_pair_with_different_indexes_is_rejected():
    def build(w, s, idx):
        return dict(stationary=w.indirect(idx[:, 0:1], num_elem=4),
                    stationary_scale=s.indirect(idx[:, 1:2], num_elem=4), moving=w[:, 0:4], moving_scale=s[:, 0:4])

    rejected(build, r"stationary and stationary_scale are \.indirect\(\) views of different index tiles")


def test_tile_position_other_than_origin_is_rejected():
    def build(w, s, idx):
        return dict(stationary=w.indirect(idx, num_elem=4), stationary_scale=s.indirect(idx, num_elem=4),
                    moving=w[:, 0:4], moving_scale=s[:, 0:4], tile_position=(32, 0), tile_size=(32, 128))

    rejected(build, r"tile_position must be \(0, 0\) or unset")


def test_scale_index_of_scale_partitions_is_rejected():
    """A scale takes its data's index (8x its partitions), not an index of its own partition count."""
    def build(w, s, idx):
        return dict(stationary=w.indirect(idx, num_elem=4), stationary_scale=s.indirect(idx[0:4, :], num_elem=4),
                    moving=w[:, 0:4], moving_scale=s[:, 0:4])

    rejected(build, r"stationary_scale: the index tile has 4 partitions .* takes its data's index")
