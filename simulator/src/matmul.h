// The Tensor Engine's arithmetic, shared by nc_matmul and nc_matmul_mx (docs/architecture.md,
// "Matmul accumulation"): one fp32 K-sum per output element, then overwrite or add into PSUM.
#pragma once

#include <vector>

#include "exec_state.h"

namespace knit::sim {

// partial[m * N + n] = sum over k = 0..K-1, in increasing k, of s[k * M + m] * v[k * N + n], each
// product and each running sum rounded to fp32 (no fused multiply-add). With skip_zero_moving
// (transpose mode) zero entries of v contribute nothing, so NaN/Inf in s pass through.
std::vector<float> matmul_partials(const std::vector<float>& s, const std::vector<float>& v, int64_t K, int64_t M,
                                   int64_t N, bool skip_zero_moving = false);

// One MX operand (nc_matmul_mx, exec_mx.cpp) dequantized to fp32 in contraction order:
// out[(4p + j) * F + f] = sub-element j of word [p, f] times the scale of its group [p / 8, f]. The
// product is exact (an fp8/fp4 value times a power of two) unless it overflows fp32 (+-inf).
std::vector<float> dequantize_mx(const Tile& data, const Tile& scale);

// Stores partial into the PSUM tile dst ([M, N], partition-major) as `accumulate` says, rounding
// to dst's dtype and setting the matmul-written flags; warns where the add is undefined.
void write_matmul_result(ExecState& m, Tile& dst, const std::vector<float>& partial, ir::Accumulate accumulate);

}  // namespace knit::sim
