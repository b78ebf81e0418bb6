// Pieces of the compute executors (exec_compute.cpp) that the native path (native/executor.cpp)
// shares, so operand reading and accumulator semantics live in one place.
#pragma once

#include <cstdint>
#include <vector>

#include "knit/ir/ir.h"

namespace knit::sim {

class ExecState;

// Bit-vector ALU ops work on raw 32-bit patterns instead of fp32 values.
bool is_bitvec_op(ir::AluOp op);
// A scalar operand as one value per partition; unused operands (unary ops) are not read.
std::vector<float> scalar_column(ExecState& m, const ir::Operand& o, ir::AluOp op, int64_t P, const char* what);
// The bit-vector form: a [P, 1] tile's raw bits, or the immediate as a two's complement pattern.
std::vector<uint32_t> scalar_column_bits(ExecState& m, const ir::Operand& o, ir::AluOp op, int64_t P, const char* what);
// tensor_tensor on GpSimd's exact int32/uint32 path (rules in exec_compute.cpp).
bool exact_int_path(ExecState& m, const ir::TensorTensor& op);

// Each partition's alu_fold of its row of the fp32 results (P x F, partition-major), before any
// rounding to dst's dtype.
std::vector<float> row_folds(ir::AluOp op, const std::vector<float>& values, int64_t P, int64_t F);
// Whether an accumulating instruction's reduce_cmd folds its rows into the accumulators
// (reset_reduce or reduce), for the instructions without a load_reduce seed.
bool folds_rows(ir::ReduceCmd cmd);
// activation's accumulator update and reduce_res read-out once the per-partition folds of the
// fp32 results are known.
// activation_reduce is activation with reduce_cmd=reset_reduce: the instruction as that.
ir::Activation as_activation(const ir::ActivationReduce& op);
void finish_activation(ExecState& m, const ir::Activation& op, const float* folds, int64_t P);
// select_reduce / range_select (exec_select.cpp): the VectorE accumulator update per reduce_cmd
// and the reduce_res read-out, given each partition's fold of the fp32 results.
void finish_vector_reduce(ExecState& m, ir::ReduceCmd cmd, ir::AluOp op, const float* rows, int64_t P,
                          const std::optional<ir::View>& res);
// exponential's -max_value per partition: the bias of the activation body it runs on natively.
std::vector<float> exponential_bias(ExecState& m, const ir::Exponential& op, int64_t P);
// exponential's accumulator update and read-out, given the per-partition sums.
void finish_exponential(ExecState& m, const ir::Exponential& op, const float* folds, int64_t P);
// tensor_scalar_cumulative's starting register per partition (op1's identity, the Vector Engine
// accumulator or imm1, per reduce_cmd), and the accumulator update from each row's last value.
std::vector<float> cumulative_start(ExecState& m, const ir::TensorScalarCumulative& op, int64_t P);
void finish_cumulative(ExecState& m, const float* last, int64_t P);
// activate2: prelu's slope per partition (zeros for other functions), its
// tensor-scalar stage as activation's data * col[0] + col[1] (the same IEEE operations; the
// native path runs it so), and its accumulator update and read-out.
std::vector<float> activate2_slope(ExecState& m, const ir::Activate2& op, int64_t P);
void activate2_affine(ExecState& m, const ir::Activate2& op, int64_t P, std::vector<float> (&col)[2]);
void finish_activate2(ExecState& m, const ir::Activate2& op, const float* folds, int64_t P);
// tensor_scalar_reduce's accumulator update and read-out, given the per-partition folds.
void finish_tensor_scalar_reduce(ExecState& m, const ir::TensorScalarReduce& op, const float* folds, int64_t P);

}  // namespace knit::sim
