// Scalar semantics of the ALU operators and activation functions, shared by every executor.
// All arithmetic is fp32 (as the NKI ISA docs define the engines); bit-vector ops work on 32-bit
// integer patterns.
#pragma once

#include <cstdint>
#include <utility>

#include "knit/ir/types.h"

namespace knit::sim {

// maximum / minimum: a NaN operand is ignored (both NaN: the first); -0 < +0.
float max_of(float a, float b);
float min_of(float a, float b);
// a op b for an Arith or Unary op (Unary ops ignore b). Comparisons and logical ops give 1.0/0.0.
float alu(ir::AluOp op, float a, float b);
// a op b on bit patterns for a Bitvec/BitvecUnary op (shifts are logical; invert ignores b).
uint32_t alu_bits(ir::AluOp op, uint32_t a, uint32_t b);
// Knit's fp32 exp (alu.cpp, exp_note): within 0.5 ULP + 1e-6 ULP of exp(x), the same bits on
// every path and host; the exp in every activation function that uses one.
float exp_of(float x);
// exp_of(x), faster (alu.cpp, exp_guess_note), or, where it cannot be sure of exp_of's bits, a
// value off by at most an ULP with `unsure` set to 1 (left alone otherwise).
float exp_guess(float x, uint32_t& unsure);
// The activation function f(x), computed in fp32 (`alpha` is prelu's slope).
float activate(ir::ActFunc f, float x, float alpha = 0.0f);
// activate(f, x, alpha) with exp_guess for its exps: the same bits unless it sets `unsure`.
float activate_guess(ir::ActFunc f, float x, float alpha, uint32_t& unsure);

// One stage of a two-op instruction: `data op operand`, or `operand op data` when reversed.
// Unary ops apply to data alone (operand and reverse flag ignored); bypass passes data through.
float apply(ir::AluOp op, float data, float operand, bool reverse);
uint32_t apply_bits(ir::AluOp op, uint32_t data, uint32_t operand, bool reverse);

// Exact a op b (add, subtract, multiply, maximum, minimum) on 32-bit integer values: GpSimd's
// int32/uint32 path. A product overflowing int64 is clamped (stores saturate anyway).
int64_t int_alu(ir::AluOp op, int64_t a, int64_t b);

// Reductions are a left fold in fp32 in element order, starting from the first element:
// r = v[0]; r = op(r, v[1]); ...  (n >= 1, so no identity element is needed).
float alu_fold(ir::AluOp op, const float* v, int64_t n);
uint32_t alu_fold_bits(ir::AluOp op, const uint32_t* v, int64_t n);
// The value `reset` puts in an accumulator: add/subtract 0, multiply 1, maximum -inf, minimum +inf,
// abs_max 0, abs_min +inf.
float reduce_identity(ir::AluOp op);

// One engine accumulator register (reduce_cmd of nki.isa.activation and tensor_scalar_reduce)
// after an instruction whose row reduction is `row`, per reduce_cmd: idle leaves it; reset sets
// reduce_identity(op); reset_reduce sets row; reduce sets acc op row; load_reduce sets seed op row.
void update_accumulator(ir::ReduceCmd cmd, ir::AluOp op, float& acc, float row, float seed = 0.0f);

// The bit pattern memset stores in every element of a `t` tile: the value as an integer
// (saturating) for integer dtypes, else rounded from fp32. One element's bits, so the reference
// executor and the native fill store the same bytes.
uint32_t memset_bits(ir::DType t, double value);

// ---- bn_stats / bn_aggr (exec_select.cpp, and the native row body: one definition of the
// arithmetic, so both paths give the same bits) ----
// One bn_stats group: (count, mean, sum of squared deviations = variance * count), all fp32,
// two-pass, over row[first], row[first + 2], ... below F. Knit: an empty group (data with one
// element has no odd elements) is (0, 0, 0), which bn_aggr then ignores.
struct Moments {
  float count = 0, mean = 0, m2 = 0;
};
Moments group_moments(const float* row, int64_t F, int64_t first);
// group_moments of R rows at once, the same bits per row: each row's sums are still one chain in
// element order, and the R chains advance side by side (which the CPU overlaps).
template <int64_t R>
void group_moments_rows(const float* const* rows, int64_t F, int64_t first, Moments* out) {
  float sum[R] = {}, m2[R] = {}, mean[R] = {};
  float count = 0;
  for (int64_t j = first; j < F; j += 2) {
    for (int64_t r = 0; r < R; ++r) sum[r] += rows[r][j];
    count += 1;
  }
  for (int64_t r = 0; r < R; ++r) out[r] = Moments{count, 0, 0};
  if (count == 0) return;
  for (int64_t r = 0; r < R; ++r) mean[r] = sum[r] / count;
  for (int64_t j = first; j < F; j += 2)
    for (int64_t r = 0; r < R; ++r) m2[r] += (rows[r][j] - mean[r]) * (rows[r][j] - mean[r]);
  for (int64_t r = 0; r < R; ++r) out[r] = Moments{count, mean[r], m2[r]};
}
// Chan et al.'s combination of k (count, mean, m2) triples: N = sum n, mean = sum(n * mean) / N,
// variance = sum(m2 + n * (mean_k - mean)^2) / N (population variance). No samples: 0/0 = NaN.
// Returns (mean, variance).
std::pair<float, float> combine_moments(const float* triples, int64_t k);

// ---- max8 (exec_select.cpp and the native row body) ----
// max8's order: descending fp32, NaN above everything (Knit: a NaN is "largest", like
// np.argmax); -0 and +0 are equal, so they keep their source order.
bool ranks_above(float a, float b);
// The 8 values of row[0..F) (F >= 8) that rank first, in rank order, equal values in source
// order: the first 8 of a stable sort by ranks_above, by insertion into 8 slots.
void top8(const float* row, int64_t F, float* out);
// nc_find_index8 of one partition: out[k] = the index in row[0..F) of vals[k]'s first occurrence
// (alu's equal), or of its next one when vals[k] repeats an earlier vals[e]; -1 when missing.
void find_index8(const float* row, int64_t F, const float* vals, int64_t* out);
// What nc_find_index8 stores for a value it did not find: all ones in its dst dtype.
inline uint32_t find_index8_missing(ir::DType dst) { return dst == ir::DType::uint16 ? 0xFFFFu : 0xFFFFFFFFu; }

// ---- quantize_mx (exec_mx.cpp and the native body) ----
// One MX group of quantize_mx: x[i][j] is element j of the group's 4 in partition i of its 8.
// Writes the 8 packed words of `packed` (sub-element j of word i = x[i][j] / scale, rounded by
// encode_packed) and returns the e8m0 scale bits: scale = 2^(floor(log2 amax) - (emax - 1)),
// clamped to e8m0's range; an all-zero group gets 2^-127; a NaN or inf makes the scale and every
// element NaN.
constexpr int kMxGroupPartitions = 8;
uint32_t quantize_mx_group(ir::DType packed, const float (&x)[kMxGroupPartitions][4],
                           uint32_t (&words)[kMxGroupPartitions]);

}  // namespace knit::sim
