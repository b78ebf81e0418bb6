"""MX (microscaling) matrix multiplication on trn3: out[M, N] = lhsT[K, M].T @ rhs[K, N] with both
operands quantized to MXFP8 (float8_e4m3fn values, one power-of-two scale per 32 of them).

``nisa.quantize_mx`` (Vector Engine) turns a bf16 [P, 4F] tile into F packed words per partition
(``float8_e4m3fn_x4``: elements 4f..4f+3 in bytes 0..3 of word f) plus one ``float8_e8m0fnu`` scale
per 8 partitions x 4 elements ([P / 8, F]). ``nisa.nc_matmul_mx`` (Tensor Engine) then contracts
over the partitions *and* the 4 bytes of each word: contraction index k = 4p + j, so K = 4P, up to
512 in one instruction. A [K, F] operand therefore goes on chip as a [P, F, 4] tile with
tile[p, f, j] = x[4p + j, f]: one DMA through a reshaped and permuted HBM view, no data shuffle.
"""
# knit-run: --shape 512x128:bfloat16 --shape 512x256:bfloat16
import numpy as np

import knit as nki
import knit.isa as nisa
import knit.language as nl


def _quantize(x, P):
    """x: [4P, F] in HBM -> (packed [P, F] float8_e4m3fn_x4 words, [P / 8, F] scales) in SBUF."""
    _, F = x.shape
    src = nl.ndarray((P, F, 4), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=x.reshape((P, 4, F)).permute(0, 2, 1))  # src[p, f, j] = x[4p + j, f]
    packed = nl.ndarray((P, F), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    scale = nl.ndarray((P // 8, F), dtype=nl.float8_e8m0fnu, buffer=nl.sbuf)
    nisa.quantize_mx(dst=packed, src=src, dst_scale=scale)
    return packed, scale


@nki.jit(platform_target="trn3")
def mx_matmul_kernel(lhsT, rhs):
    """lhsT: [K, M], rhs: [K, N] bf16 (or fp16) in HBM with K = 4P, P a multiple of 32 up to 128
    (K = 128, 256, 384 or 512), M even and at most 128, N at most 4096. Returns fp32 [M, N]."""
    K, M = lhsT.shape
    K_, N = rhs.shape
    assert K == K_ and K % 128 == 0 and K <= 512, "K must be 128, 256, 384 or 512"
    P = K // 4

    stationary, stationary_scale = _quantize(lhsT, P)
    moving, moving_scale = _quantize(rhs, P)

    # fp32 accumulation in PSUM, exactly as nc_matmul; then evict and store.
    acc = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul_mx(dst=acc, stationary=stationary, moving=moving, stationary_scale=stationary_scale,
                      moving_scale=moving_scale)
    res = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    result = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=result, src=res)
    return result


def reference(lhsT, rhs):
    """NumPy reference in float64 without quantization: lhsT.T @ rhs."""
    return np.asarray(lhsT, dtype=np.float64).T @ np.asarray(rhs, dtype=np.float64)


def quantization_bound(lhsT, rhs):
    """A bound on |mx_matmul - reference| per element. An MXFP8 e4m3fn element is within 2^-4
    relative (3 mantissa bits, round to nearest) of its input, or, in the fp8 subnormal range,
    within half a subnormal step 2^-10 * scale <= 2^-17 * max|x|. Products then add in fp32."""
    a, b = np.abs(np.asarray(lhsT, np.float64)), np.abs(np.asarray(rhs, np.float64))
    ea, eb = 2.0**-4 * a + 2.0**-17 * a.max(), 2.0**-4 * b + 2.0**-17 * b.max()
    fp32 = a.shape[0] * 2.0**-24 * ((a + ea).T @ (b + eb))
    return ea.T @ (b + eb) + a.T @ eb + fp32


tolerance = quantization_bound  # what `knit run` allows around reference() (docs/cpp.md)


if __name__ == "__main__":
    import ml_dtypes

    rng = np.random.default_rng(0)
    lhsT = rng.standard_normal((512, 128)).astype(ml_dtypes.bfloat16)
    rhs = rng.standard_normal((512, 256)).astype(ml_dtypes.bfloat16)
    out = mx_matmul_kernel(lhsT, rhs)
    err = np.abs(out - reference(lhsT, rhs))
    assert np.all(err <= quantization_bound(lhsT, rhs)), "MX matmul error exceeds the quantization bound"
    print("mx_matmul: max abs error", err.max(), "(MXFP8 quantization; values are O(20))")
