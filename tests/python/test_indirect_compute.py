"""NC-v4 compute indirection: NkiTensor.indirect(index, num_elem) as a gather (input operand) and a
scatter (dst) of every instruction that accepts it, against NumPy references built from the
per-group offset rule (offset of column i in partition p = index[g*G + i % G, i // G], g = p // G,
G = 16, or 32 on the Tensor Engine), the additions reference's worked example (§5.5), the
rejections (targets, operands, instructions, engines), the out-of-range error, and the default
backend against KNIT_BACKEND=reference."""
import numpy as np
import pytest

import knit as nki
import knit.isa as nisa
import knit.language as nl
from nki06_support import to_hbm


def offsets(index, P, n, G):
    """off[p, i]: the free offset partition p's column i reads (the per-group rule)."""
    p = np.arange(P)[:, None]
    i = np.arange(n)[None, :]
    return index[(p // G) * G + i % G, i // G].astype(np.int64)


def gather(data, off):
    return np.take_along_axis(data.reshape(data.shape[0], -1), off, axis=1)


def scatter(base, off, values):
    out = base.reshape(base.shape[0], -1).copy()
    for i in range(off.shape[1]):  # row-major column order: the last writer wins
        out[np.arange(out.shape[0]), off[:, i]] = values[:, i]
    return out.reshape(base.shape)


def distinct_index(rng, P, F, n, G, dtype=np.uint16):
    """A (P, K) index tile giving each group n distinct offsets in [0, F)."""
    K = -(-n // G)
    index = np.zeros((P, K), dtype)
    for g in range(-(-P // G)):
        picks = rng.permutation(F)[:n]
        for i, o in enumerate(picks):
            if g * G + i % G < P:
                index[g * G + i % G, i // G] = o
    return index


def sbuf(x, dtype=None):
    t = nl.ndarray(x.shape, dtype or x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


@pytest.fixture(params=["reference", "jit-strict"])
def backend(request, monkeypatch):
    monkeypatch.setenv("KNIT_BACKEND", request.param)
    return request.param


# ---- the worked example (nki-0.6-additions.md §5.5) ---------------------------------------------

@nki.jit(platform_target="trn3")
def example_gather(data, index):
    d, idx = sbuf(data), sbuf(index)
    out = nl.ndarray((32, 4), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=out, src=d.indirect(idx, num_elem=4), engine=nisa.engine.vector)
    return to_hbm(out)


@nki.jit(platform_target="trn3")
def example_scatter(acc, x, index):
    a, v, idx = sbuf(acc), sbuf(x), sbuf(index)
    nisa.tensor_scalar(dst=a.indirect(idx, num_elem=4), data=v, op0=nl.add, operand0=1.0)
    return to_hbm(a)


def example_index(group0, group1):
    index = np.zeros((32, 1), np.uint16)
    index[0:4, 0] = group0
    index[16:20, 0] = group1
    return index


def test_worked_example_gather(backend):
    data = (10 * np.arange(32)[:, None] + np.arange(8)[None, :]).astype(np.float32)
    out = example_gather(data, example_index([6, 1, 1, 3], [2, 2, 7, 0]))
    np.testing.assert_array_equal(out[0], [6, 1, 1, 3])
    np.testing.assert_array_equal(out[5], [56, 51, 51, 53])
    np.testing.assert_array_equal(out[20], [202, 202, 207, 200])
    np.testing.assert_array_equal(out[:16], data[:16][:, [6, 1, 1, 3]])
    np.testing.assert_array_equal(out[16:], data[16:][:, [2, 2, 7, 0]])


def test_worked_example_scatter(backend):
    acc = np.full((32, 8), -5.0, np.float32)
    x = np.arange(32 * 4, dtype=np.float32).reshape(32, 4)
    out = example_scatter(acc, x, example_index([6, 1, 2, 3], [2, 5, 7, 0]))
    want = acc.copy()
    want[:16][:, [6, 1, 2, 3]] = x[:16] + 1
    want[16:][:, [2, 5, 7, 0]] = x[16:] + 1
    np.testing.assert_array_equal(out, want)


def test_duplicate_scatter_offsets_keep_the_last_column(backend):
    acc = np.zeros((32, 8), np.float32)
    x = np.arange(32 * 4, dtype=np.float32).reshape(32, 4)
    out = example_scatter(acc, x, example_index([6, 1, 1, 3], [2, 2, 7, 0]))
    assert out[0, 1] == x[0, 2] + 1 and out[20, 2] == x[20, 1] + 1


# ---- every accepting instruction, gather and scatter ---------------------------------------------

P, F, N = 48, 40, 24  # three groups of 16 partitions; 24 of 40 columns picked per group
G = 16


def unary(case, dst, src):
    """The instruction `case` with one main input: dst = f(src)."""
    if case == "tensor_copy_vector":
        nisa.tensor_copy(dst=dst, src=src, engine=nisa.engine.vector)
    elif case == "tensor_copy_scalar":
        nisa.tensor_copy(dst=dst, src=src, engine=nisa.engine.scalar)
    elif case == "tensor_scalar":
        nisa.tensor_scalar(dst=dst, data=src, op0=nl.multiply, operand0=3.0, op1=nl.add, operand1=-1.0)
    elif case == "tensor_scalar_gpsimd":
        nisa.tensor_scalar(dst=dst, data=src, op0=nl.subtract, operand0=0.5, engine=nisa.engine.gpsimd)
    elif case == "activation":
        nisa.activation(dst=dst, op=nl.exp, data=src, scale=0.5)
    elif case == "activation_reduce":
        res = nl.ndarray((dst.shape[0], 1), nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=dst, op=nl.tanh, data=src, reduce_op=nl.add, reduce_res=res)
    elif case == "exponential":
        nisa.exponential(dst=dst, src=src, max_value=1.0)
    elif case == "tensor_scalar_reduce":
        res = nl.ndarray((dst.shape[0], 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(dst=dst, data=src, op0=nl.add, operand0=2.0, reduce_op=nl.add, reduce_res=res)
    elif case == "tensor_tensor":  # data1 is the main input; data2 is a plain tile of ones x 4
        four = nl.ndarray(dst.shape, nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=four, value=4.0)
        nisa.tensor_tensor(dst=dst, data1=src, data2=four, op=nl.multiply)
    else:
        raise AssertionError(case)


UNARY_REFERENCE = {
    "tensor_copy_vector": lambda x: x,
    "tensor_copy_scalar": lambda x: x,
    "tensor_scalar": lambda x: x * 3.0 - 1.0,
    "tensor_scalar_gpsimd": lambda x: x - 0.5,
    "activation": lambda x: np.exp(0.5 * x),
    "activation_reduce": np.tanh,
    "exponential": lambda x: np.exp(x - 1.0),
    "tensor_scalar_reduce": lambda x: x + 2.0,
    "tensor_tensor": lambda x: x * 4.0,
}
TRANSCENDENTAL = {"activation", "activation_reduce", "exponential"}


@nki.jit(platform_target="trn3")
def gather_kernel(data, index, case):
    d, idx = sbuf(data), sbuf(index)
    out = nl.ndarray((data.shape[0], N), nl.float32, buffer=nl.sbuf)
    unary(case, out, d.indirect(idx, num_elem=N))
    return to_hbm(out)


@nki.jit(platform_target="trn3")
def scatter_kernel(base, x, index, case):
    b, v, idx = sbuf(base), sbuf(x), sbuf(index)
    unary(case, b.indirect(idx, num_elem=N), v)
    return to_hbm(b)


def reference(case, x):
    """fp32 step by step (engines round each ALU stage to fp32); transcendentals in float64."""
    return UNARY_REFERENCE[case](x.astype(np.float64 if case in TRANSCENDENTAL else np.float32))


def check_close(case, got, want):
    if case in TRANSCENDENTAL:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_array_equal(got, want.astype(np.float32))


@pytest.mark.parametrize("case", sorted(UNARY_REFERENCE))
def test_gather_matches_numpy(case, backend):
    rng = np.random.default_rng(hash(case) % 1000)
    data = rng.uniform(-2, 2, (P, F)).astype(np.float32)
    index = distinct_index(rng, P, F, N, G)
    got = gather_kernel(data, index, case)
    check_close(case, got, reference(case, gather(data, offsets(index, P, N, G))))


@pytest.mark.parametrize("case", sorted(UNARY_REFERENCE))
def test_scatter_matches_numpy(case, backend):
    rng = np.random.default_rng(1 + hash(case) % 1000)
    base = rng.uniform(-2, 2, (P, F)).astype(np.float32)
    x = rng.uniform(-2, 2, (P, N)).astype(np.float32)
    index = distinct_index(rng, P, F, N, G, np.uint32)
    got = scatter_kernel(base, x, index, case)
    want = scatter(base.astype(np.float64), offsets(index, P, N, G), reference(case, x))
    check_close(case, got, want)


@nki.jit(platform_target="trn3")
def reduce_gather(data, index):
    d, idx = sbuf(data), sbuf(index)
    out = nl.ndarray((data.shape[0], 1), nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=out, op=nl.maximum, data=d.indirect(idx, num_elem=N), axis=1)
    return to_hbm(out)


@nki.jit(platform_target="trn3")
def reduce_scatter(base, x, index):
    b, v, idx = sbuf(base), sbuf(x), sbuf(index)
    nisa.tensor_reduce(dst=b.indirect(idx, num_elem=1), op=nl.add, data=v, axis=1)
    return to_hbm(b)


def test_tensor_reduce_gathers_and_scatters(backend):
    rng = np.random.default_rng(5)
    data = rng.uniform(-2, 2, (P, F)).astype(np.float32)
    index = distinct_index(rng, P, F, N, G, np.int32)
    np.testing.assert_array_equal(reduce_gather(data, index)[:, 0],
                                  gather(data, offsets(index, P, N, G)).max(axis=1))
    x = rng.integers(-8, 8, (P, 6)).astype(np.float32)  # integer sums: exact in any order
    index1 = distinct_index(rng, P, F, 1, G)
    want = scatter(data, offsets(index1, P, 1, G), x.sum(axis=1, keepdims=True))
    np.testing.assert_array_equal(reduce_scatter(data, x, index1), want)


@nki.jit(platform_target="trn3")
def predicated(base, x, pred, index, where):
    b, v, pr, idx = sbuf(base), sbuf(x), sbuf(pred), sbuf(index)
    if where == "predicate":
        nisa.tensor_copy_predicated(dst=b[:, 0:N], src=v, predicate=pr.indirect(idx, num_elem=N))
    else:
        nisa.tensor_copy_predicated(dst=b.indirect(idx, num_elem=N), src=v, predicate=pr)
    return to_hbm(b)


def test_tensor_copy_predicated_gathers_the_predicate_and_scatters_dst(backend):
    rng = np.random.default_rng(6)
    base = rng.uniform(-2, 2, (P, F)).astype(np.float32)
    x = rng.uniform(-2, 2, (P, N)).astype(np.float32)
    index = distinct_index(rng, P, F, N, G)
    off = offsets(index, P, N, G)
    pred_wide = rng.integers(0, 2, (P, F)).astype(np.float32)
    want = base.copy()
    mask = gather(pred_wide, off) != 0
    want[:, :N] = np.where(mask, x, base[:, :N])
    np.testing.assert_array_equal(predicated(base, x, pred_wide, index, "predicate"), want)
    pred = rng.integers(0, 2, (P, N)).astype(np.float32)
    want = scatter(base, off, np.where(pred != 0, x, gather(base, off)))
    np.testing.assert_array_equal(predicated(base, x, pred, index, "dst"), want)


# ---- nc_matmul: G = 32 ----------------------------------------------------------------------

@nki.jit(platform_target="trn3")
def matmul_gathered(stationary, moving, s_index, m_index, M, N_):
    s, m = sbuf(stationary), sbuf(moving)
    si, mi = sbuf(s_index), sbuf(m_index)
    acc = nl.ndarray((M, N_), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=s.indirect(si, num_elem=M), moving=m.indirect(mi, num_elem=N_))
    out = nl.ndarray((M, N_), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=out, src=acc)
    return to_hbm(out)


@pytest.mark.parametrize("dtype", [np.float16, "bfloat16"])
def test_matmul_with_indirect_stationary_and_moving(dtype, backend):
    import ml_dtypes  # noqa: F401  (bfloat16 arrays)

    np_dtype = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    rng = np.random.default_rng(9)
    K, FS, FM, M, N_ = 64, 100, 200, 48, 80
    stationary = rng.uniform(-1, 1, (K, FS)).astype(np_dtype)
    moving = rng.uniform(-1, 1, (K, FM)).astype(np_dtype)
    s_index = distinct_index(rng, K, FS, M, 32)
    m_index = distinct_index(rng, K, FM, N_, 32)
    got = matmul_gathered(stationary, moving, s_index, m_index, M, N_)
    st = gather(stationary.astype(np.float64), offsets(s_index, K, M, 32))
    mv = gather(moving.astype(np.float64), offsets(m_index, K, N_, 32))
    np.testing.assert_allclose(got, st.T @ mv, rtol=1e-5, atol=1e-5)


@nki.jit(platform_target="trn3")
def matmul_scattered(stationary, moving, index):
    s, m, idx = sbuf(stationary), sbuf(moving), sbuf(index)
    acc = nl.ndarray((32, 64), nl.float32, buffer=nl.psum)
    nisa.memset(dst=acc, value=-1.0)
    nisa.nc_matmul(dst=acc.indirect(idx, num_elem=moving.shape[1]), stationary=s, moving=m, accumulate=False)
    out = nl.ndarray((32, 64), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=out, src=acc)
    return to_hbm(out)


def test_matmul_scatters_into_psum_columns(backend):
    rng = np.random.default_rng(10)
    stationary = rng.integers(-3, 4, (32, 32)).astype(np.float16)  # small integers: exact products
    moving = rng.integers(-3, 4, (32, 40)).astype(np.float16)
    index = distinct_index(rng, 32, 64, 40, 32)  # K = 2 index columns for 40 > G = 32 columns
    got = matmul_scattered(stationary, moving, index)
    product = stationary.astype(np.float64).T @ moving.astype(np.float64)
    np.testing.assert_array_equal(got, scatter(np.full((32, 64), -1.0), offsets(index, 32, 40, 32), product))


# ---- backends agree; instances are counted ---------------------------------------------------

def test_default_backend_matches_reference_bytes(monkeypatch):
    rng = np.random.default_rng(11)
    base = rng.uniform(-2, 2, (P, F)).astype(np.float32)
    x = rng.uniform(-2, 2, (P, N)).astype(np.float32)
    index = distinct_index(rng, P, F, N, G)
    results = {}
    for b in ("reference", None):
        if b:
            monkeypatch.setenv("KNIT_BACKEND", b)
        else:
            monkeypatch.delenv("KNIT_BACKEND", raising=False)
        results[b] = (scatter_kernel(base, x, index, "activation"), gather_kernel(base, index, "tensor_scalar"))
    for got, want in zip(results[None], results["reference"]):
        assert got.tobytes() == want.tobytes()
    monkeypatch.setenv("KNIT_BACKEND", "jit-strict")
    run = gather_kernel.compile(base, index, "tensor_scalar")
    run(base, index, "tensor_scalar")
    assert run.last_run["indirect_compute"] == 1 and not run.last_run["fallbacks"]


# ---- rejections ---------------------------------------------------------------------------

def copy_kernel(target):
    @nki.jit(platform_target=target)
    def kernel(data, index):
        d, idx = sbuf(data), sbuf(index)
        out = nl.ndarray((data.shape[0], 4), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=out, src=d.indirect(idx, num_elem=4))
        return to_hbm(out)

    return kernel


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_rejected_before_trn3(target):
    with pytest.raises(nki.NkiValidationError, match="trn3"):
        copy_kernel(target)(np.zeros((16, 8), np.float32), np.zeros((16, 1), np.uint16))


def rejected(body, match, shape=(32, 8), index_dtype=np.uint16, index_shape=(32, 1)):
    @nki.jit(platform_target="trn3")
    def kernel(data, index):
        d, idx = sbuf(data), sbuf(index)
        body(d, idx)
        return to_hbm(d)

    with pytest.raises(nki.KnitError, match=match) as info:
        kernel(np.zeros(shape, np.float32), np.zeros(index_shape, index_dtype))
    assert "test_indirect_compute.py" in str(info.value)


def test_non_capable_operand_is_rejected():
    def body(d, idx):
        out = nl.ndarray((32, 4), nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=out, data1=d[:, 0:4], data2=d.indirect(idx, num_elem=4), op=nl.add)

    rejected(body, r"operand data2 cannot be an \.indirect\(\) view; .* dst, data1")


def test_non_capable_instruction_is_rejected():
    def transpose(d, idx):
        out = nl.ndarray((4, 32), nl.float32, buffer=nl.sbuf)
        nisa.nc_transpose(dst=out, data=d.indirect(idx, num_elem=4), engine=nisa.engine.vector)

    rejected(transpose, r"nc_transpose: operand data is an \.indirect\(\) view, which this instruction does not")

    def memset(d, idx):
        nisa.memset(dst=d.indirect(idx, num_elem=4), value=1.0)

    rejected(memset, "memset: operand dst is an .indirect")


def test_engine_rules():
    def on_gpsimd(d, idx):
        out = nl.ndarray((32, 4), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=out, src=d.indirect(idx, num_elem=4), engine=nisa.engine.gpsimd)

    rejected(on_gpsimd, "runs on vector, scalar, not the gpsimd engine")

    def scalar_scatter_into_psum(d, idx):
        acc = nl.ndarray((32, 8), nl.float32, buffer=nl.psum)
        nisa.memset(dst=acc, value=0.0)
        nisa.activation(dst=acc.indirect(idx, num_elem=4), op=nl.exp, data=d[:, 0:4])

    rejected(scalar_scatter_into_psum, "Scalar Engine cannot scatter into PSUM")


def test_index_and_shape_rules():
    def too_many(d, idx):
        out = nl.ndarray((32, 32), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=out, src=d.indirect(idx))  # num_elem = index.size = 32 > G*K = 16

    rejected(too_many, r"num_elem 32 exceeds G\*K = 16")

    def float_index(d, idx):
        d.indirect(idx, num_elem=4)

    rejected(float_index, "use uint16, uint32 or int32", index_dtype=np.float32)

    def wrong_partitions(d, idx):
        d.indirect(idx[0:16], num_elem=4)

    rejected(wrong_partitions, "index tile has 16 partitions but the indirected view has 32")

    def partial_group(d, idx):
        out = nl.ndarray((24, 9), nl.float32, buffer=nl.sbuf)  # partitions 16..23: 8 index rows for 9 columns
        nisa.tensor_copy(dst=out, src=d[0:24].indirect(idx[0:24], num_elem=9))

    rejected(partial_group, "num_elem <= 8 or a multiple of 16")

    def reindirect(d, idx):
        d.indirect(idx, num_elem=4).indirect(idx, num_elem=2)

    rejected(reindirect, "cannot be indirected again")

    def sliced(d, idx):
        d.indirect(idx, num_elem=4)[:, 0:2]

    rejected(sliced, "cannot be applied to an .indirect")

    def misaligned(d, idx):
        out = nl.ndarray((16, 4), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=out, src=d[16:32].indirect(idx[16:32], num_elem=4))

    rejected(misaligned, "must start on a multiple of 32")


def test_matmul_rules():
    def transposing(d, idx):
        acc = nl.ndarray((32, 4), nl.float32, buffer=nl.psum)
        s = nl.ndarray((32, 32), nl.bfloat16, buffer=nl.sbuf)
        nisa.memset(dst=s, value=0.0)
        m = nl.ndarray((32, 8), nl.bfloat16, buffer=nl.sbuf)
        nisa.memset(dst=m, value=0.0)
        nisa.nc_matmul(dst=acc, stationary=s, moving=m.indirect(idx, num_elem=4), is_transpose=True)

    rejected(transposing, "moving cannot be an .indirect.. view when is_transpose=True")

    def fp32_inputs(d, idx):
        acc = nl.ndarray((4, 8), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=d.indirect(idx, num_elem=4), moving=d)

    rejected(fp32_inputs, "stationary has dtype float32")

    def tiled(d, idx):
        acc = nl.ndarray((4, 8), nl.float32, buffer=nl.psum)
        s = nl.ndarray((32, 8), nl.bfloat16, buffer=nl.sbuf)
        nisa.memset(dst=s, value=0.0)
        m = nl.ndarray((32, 8), nl.bfloat16, buffer=nl.sbuf)
        nisa.memset(dst=m, value=0.0)
        nisa.nc_matmul(dst=acc, stationary=s.indirect(idx, num_elem=4), moving=m, tile_position=(0, 32),
                       tile_size=(32, 32))

    rejected(tiled, r"tile_position must be \(0, 0\) or unset")


def test_integer_tensor_scalar_takes_no_indirect_view():
    def address_arithmetic(d, idx):
        words = nl.ndarray((32, 8), nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=words, value=0)
        out = nl.ndarray((32, 4), nl.int32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=out, data=words.indirect(idx, num_elem=4), op0=nl.add, operand0=1)

    rejected(address_arithmetic, "int32/uint32 .address arithmetic. form")


def test_out_of_range_offset_is_an_index_error(backend):
    data = np.zeros((32, 8), np.float32)
    index = example_index([6, 1, 8, 3], [0, 0, 0, 0])  # 8 is past the 8 columns
    with pytest.raises(nki.KnitIndexError) as info:
        example_gather(data, index)
    assert isinstance(info.value, IndexError)
    message = str(info.value)
    assert "tensor_copy" in message and "test_indirect_compute.py" in message
    assert "partition 0, column 2 reads offset 8" in message
