// Verifier rules: the Scalar Engine activation family and the Vector/GpSimd element-wise and
// reduction instructions (NKI ISA docs of each instruction; docs/architecture.md).
//
// Shared conventions:
//  - every operand is on-chip (SBUF or PSUM) and element-wise operands match dst on
//    (partitions, elements per partition) — Checker::same_tile;
//  - scalar operands are fp32 immediates or [P, 1] columns (Checker::column);
//  - bit-vector ALU ops need integer dtypes on every tensor they touch;
//  - abs_max / abs_min are NeuronCore-v4 operators; `average` exists only as a partition
//    reduction, so it is rejected in every element-wise op slot.
#include <algorithm>

#include "knit/ir/op_traits.h"
#include "verify_rules.h"

namespace knit::ir {

namespace {

bool is_bitvec(AluOp op) {
  const AluClass k = alu_class(op);
  return k == AluClass::Bitvec || k == AluClass::BitvecUnary;
}
bool is_unary(AluOp op) {
  const AluClass k = alu_class(op);
  return k == AluClass::Unary || k == AluClass::BitvecUnary;
}

// Checks one ALU op slot: its class must be in `allowed`, plus the generation gates that apply
// to every slot.
void alu_slot(Checker& c, AluOp op, const char* what, std::initializer_list<AluClass> allowed) {
  c.alu_class_in(op, what, allowed);
  if (op == AluOp::average)
    c.fail("alu-op", std::string(what) + " 'average' is only a partition reduction (tensor_partition_reduce)");
  if (op == AluOp::abs_max || op == AluOp::abs_min) c.requires_gen(4);
}

// A scalar operand (immediate or [P, 1] column). `required` = false accepts None.
void scalar_operand(Checker& c, const Operand& o, const char* what, const View& like, bool required) {
  if (o.is_tile()) c.column(o.tile, what, like);
  else if (o.is_none() && required)
    c.fail("operand", std::string(what) + " is required (an fp32 scalar or a [P, 1] tile)");
}

// An element-wise input: on-chip and matching dst.
void elementwise_input(Checker& c, const View& v, const char* what, const View& dst) {
  c.on_chip(v, what);
  c.same_tile(dst, "dst", v, what);
}

// Bit-vector ops reinterpret bits, so every tensor they read or write must be an integer type.
void bitvec_dtypes(Checker& c, std::initializer_list<std::pair<const View*, const char*>> views) {
  for (const auto& [v, what] : views) c.integer_dtype(*v, what);
}

void both_not_psum(Checker& c, const View& a, const char* an, const View& b, const char* bn) {
  if (c.in_psum(a) && c.in_psum(b))
    c.fail("buffer", std::string(an) + " and " + bn + " cannot both be in psum; copy one of them to sbuf first");
}

void gpsimd_no_psum(Checker& c, std::initializer_list<std::pair<const View*, const char*>> views) {
  for (const auto& [v, what] : views) c.not_psum(*v, what, "the GpSimd engine cannot access PSUM");
}

// The Scalar Engine accumulator options of activation / activation_reduce (nki.isa.activation).
// DESIGN CHOICE: reduce_op is add on every target, and maximum / minimum are also accepted from
// trn2 (gen3) on, following the docs that restrict only NeuronCore-v2 to add (the newest NKI docs
// list add alone). load_reduce has no seed operand here, so it is rejected.
void check_activation_reduce(Checker& c, AluOp reduce_op, const std::optional<View>& reduce_res, ReduceCmd cmd,
                             const View& dst) {
  if (cmd == ReduceCmd::load_reduce)
    c.fail("reduce-cmd", "load_reduce is not available on the Scalar Engine accumulators; use reset_reduce or reduce");
  const bool reduces = cmd == ReduceCmd::reduce || cmd == ReduceCmd::reset_reduce;
  if (reduces && reduce_op == AluOp::bypass)
    c.fail("alu-op", "reduce_cmd=" + std::string(to_string(cmd)) + " needs reduce_op (add)");
  const bool min_max = reduce_op == AluOp::maximum || reduce_op == AluOp::minimum;
  if (reduce_op != AluOp::bypass && reduce_op != AluOp::add && !min_max)
    c.fail("alu-op", "reduce_op '" + std::string(to_string(reduce_op)) +
                         "' is not supported by the Scalar Engine accumulators; use add (or maximum/minimum on trn2+)");
  if (min_max && nc_version(c.target()) < 3)
    c.fail("alu-op",
           "reduce_op '" + std::string(to_string(reduce_op)) + "' needs trn2 or newer; trn1 reduces with add only");
  if (reduce_res) c.column(*reduce_res, "reduce_res", dst);
}

// The activation rules, shared by activation and activation_reduce.
void check_activation(Checker& c, const View& dst, const View& data, const Operand& bias, const Operand& scale,
                      AluOp reduce_op, const std::optional<View>& reduce_res, ReduceCmd cmd) {
  c.on_chip(dst, "dst");
  elementwise_input(c, data, "data", dst);
  scalar_operand(c, scale, "scale", dst, true);
  scalar_operand(c, bias, "bias", dst, false);
  if (bias.is_imm() && nc_version(c.target()) < 3)
    c.fail("target", "an immediate bias needs trn2 or newer; on trn1 pass bias as a [P, 1] tile");
  if (bias.is_tile() && bias.tile.dtype == DType::tfloat32) c.fail("dtype", "bias cannot be tfloat32");
  check_activation_reduce(c, reduce_op, reduce_res, cmd, dst);
}

}  // namespace

void check(Checker& c, const Activation& op) {
  check_activation(c, op.dst, op.data, op.bias, op.scale, op.reduce_op, op.reduce_res, op.reduce_cmd);
}

void check(Checker& c, const ActivationReduce& op) {
  if (op.op == ActFunc::prelu)
    c.fail("activation-op",
           "prelu needs its slope (alpha), which activation_reduce does not take; use activation("
           "op=prelu, alpha=...) with reduce_cmd=reset_reduce and reduce_res");
  if (op.reduce_op == AluOp::bypass) c.fail("alu-op", "reduce_op is required");
  check_activation(c, op.dst, op.data, op.bias, op.scale, op.reduce_op, op.reduce_res, ReduceCmd::reset_reduce);
}

void check(Checker& c, const TensorTensor& op) {
  c.engine_in(op.engine, {Engine::vector, Engine::gpsimd});
  c.on_chip(op.dst, "dst");
  elementwise_input(c, op.data1, "data1", op.dst);
  elementwise_input(c, op.data2, "data2", op.dst);
  alu_slot(c, op.op, "op", {AluClass::Bitvec, AluClass::Arith});
  if (is_bitvec(op.op)) bitvec_dtypes(c, {{&op.dst, "dst"}, {&op.data1, "data1"}, {&op.data2, "data2"}});
  both_not_psum(c, op.data1, "data1", op.data2, "data2");
  // power runs only on GpSimd (and therefore never touches PSUM).
  if (op.op == AluOp::power && op.engine == Engine::vector)
    c.fail("engine", "op 'power' runs only on the gpsimd engine; pass engine=gpsimd or leave engine unknown");
  if (op.engine == Engine::gpsimd || op.op == AluOp::power)
    gpsimd_no_psum(c, {{&op.dst, "dst"}, {&op.data1, "data1"}, {&op.data2, "data2"}});
}

void check(Checker& c, const TensorScalar& op) {
  c.engine_in(op.engine, {Engine::vector, Engine::scalar, Engine::gpsimd});
  c.on_chip(op.dst, "dst");
  elementwise_input(c, op.data, "data", op.dst);
  alu_slot(c, op.op0, "op0", {AluClass::Bitvec, AluClass::BitvecUnary, AluClass::Arith, AluClass::Unary});
  const bool two_stage = op.op1 != AluOp::bypass;
  if (two_stage) {
    alu_slot(c, op.op1, "op1", {AluClass::Bitvec, AluClass::BitvecUnary, AluClass::Arith, AluClass::Unary});
    if (is_bitvec(op.op0) != is_bitvec(op.op1))
      c.fail("alu-op", "op0 '" + std::string(to_string(op.op0)) + "' and op1 '" + std::string(to_string(op.op1)) +
                           "' must both be bit-vector or both arithmetic operators");
  }
  // Unary ops ignore their operand, so it may be left out.
  scalar_operand(c, op.operand0, "operand0", op.dst, !is_unary(op.op0));
  if (two_stage) scalar_operand(c, op.operand1, "operand1", op.dst, !is_unary(op.op1));
  if (is_bitvec(op.op0)) {
    c.engine_in(op.engine, {Engine::vector});
    bitvec_dtypes(c, {{&op.dst, "dst"}, {&op.data, "data"}});
    if (op.operand0.is_tile()) c.integer_dtype(op.operand0.tile, "operand0");
    if (two_stage && op.operand1.is_tile()) c.integer_dtype(op.operand1.tile, "operand1");
  }
  if (op.engine == Engine::gpsimd) {
    gpsimd_no_psum(c, {{&op.dst, "dst"}, {&op.data, "data"}});
    if (op.operand0.is_tile()) gpsimd_no_psum(c, {{&op.operand0.tile, "operand0"}});
    if (two_stage && op.operand1.is_tile()) gpsimd_no_psum(c, {{&op.operand1.tile, "operand1"}});
  }
  // Before trn3 the Scalar Engine only fuses (multiply, add), (multiply, -) and (add, -).
  if (op.engine == Engine::scalar && !scalar_engine_runs(c.target(), op.op0, op.op1)) {
    c.fail("engine", "the Scalar Engine runs only (multiply, add), (multiply, None) and (add, None) on " +
                         std::string(to_string(c.target())) + "; use the vector engine");
  }
}

void check(Checker& c, const ScalarTensorTensor& op) {
  c.on_chip(op.dst, "dst");
  elementwise_input(c, op.data, "data", op.dst);
  elementwise_input(c, op.operand1, "operand1", op.dst);
  alu_slot(c, op.op0, "op0", {AluClass::Arith, AluClass::Unary});
  alu_slot(c, op.op1, "op1", {AluClass::Arith});
  scalar_operand(c, op.operand0, "operand0", op.dst, !is_unary(op.op0));
  both_not_psum(c, op.data, "data", op.operand1, "operand1");
}

void check(Checker& c, const Reciprocal& op) {
  c.on_chip(op.dst, "dst");
  elementwise_input(c, op.data, "data", op.dst);
}

void check(Checker& c, const TensorTensorScan& op) {
  c.on_chip(op.dst, "dst");
  elementwise_input(c, op.data0, "data0", op.dst);
  elementwise_input(c, op.data1, "data1", op.dst);
  alu_slot(c, op.op0, "op0", {AluClass::Arith});
  alu_slot(c, op.op1, "op1", {AluClass::Arith});
  scalar_operand(c, op.initial, "initial", op.dst, true);
  both_not_psum(c, op.data0, "data0", op.data1, "data1");
}

void check(Checker& c, const TensorReduce& op) {
  c.on_chip(op.dst, "dst");
  c.on_chip(op.data, "data");
  c.same_partitions(op.dst, "dst", op.data, "data");
  c.reduction_op(op.op, "op");
  if (is_bitvec(op.op)) {
    bitvec_dtypes(c, {{&op.dst, "dst"}, {&op.data, "data"}});
    if (op.negate)
      c.fail("alu-op", "negate applies to arithmetic reductions only, not '" + std::string(to_string(op.op)) + "'");
  }
  // axis: trailing contiguous free dims of data, ending at its last dim (negative = from the end).
  const int64_t rank = static_cast<int64_t>(op.data.dims.size());
  if (op.axis.empty()) c.fail("reduce-axis", "axis must name at least one free dim");
  std::vector<int64_t> axes;
  for (int64_t a : op.axis) {
    const int64_t n = a < 0 ? a + rank : a;
    if (n == 0)
      c.fail("reduce-axis",
             "axis 0 is the partition dim and cannot be reduced here; use tensor_partition_reduce or "
             "nc_transpose first");
    if (n < 1 || n >= rank)
      c.fail("reduce-axis", "axis " + std::to_string(a) + " is out of range for data of rank " + std::to_string(rank));
    axes.push_back(n);
  }
  std::sort(axes.begin(), axes.end());
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] != rank - static_cast<int64_t>(axes.size()) + static_cast<int64_t>(i))
      c.fail("reduce-axis", "axis must be trailing contiguous free dims ending at the last dim (" +
                                std::to_string(rank - 1) + "), e.g. [" + std::to_string(rank - 1) + "]");
  // dst keeps one element per combination of the kept free dims (keepdims only adds size-1 dims).
  int64_t kept = 1;
  for (int64_t d = 1; d < rank - static_cast<int64_t>(axes.size()); ++d) kept *= op.data.dims[d].num;
  if (c.free_size(op.dst) != kept)
    c.fail("free-size-mismatch", "dst has " + std::to_string(c.free_size(op.dst)) +
                                     " elements per partition but reducing data over the given axis leaves " +
                                     std::to_string(kept));
}

void check(Checker& c, const TensorScalarReduce& op) {
  c.on_chip(op.dst, "dst");
  elementwise_input(c, op.data, "data", op.dst);
  alu_slot(c, op.op0, "op0", {AluClass::Arith, AluClass::Unary});
  scalar_operand(c, op.operand0, "operand0", op.dst, !is_unary(op.op0));
  if (op.reduce_op != AluOp::add && op.reduce_op != AluOp::multiply && op.reduce_op != AluOp::maximum &&
      op.reduce_op != AluOp::minimum)
    c.fail("alu-op", "reduce_op '" + std::string(to_string(op.reduce_op)) +
                         "' is not supported; use add, multiply, maximum or minimum");
  if (op.reduce_cmd == ReduceCmd::load_reduce && op.reduce_init.is_none())
    c.fail("operand",
           "reduce_cmd=load_reduce needs reduce_init (an fp32 scalar or a [P, 1] tile) to seed the "
           "accumulators");
  scalar_operand(c, op.reduce_init, "reduce_init", op.dst, false);
  if (op.reduce_res) c.column(*op.reduce_res, "reduce_res", op.dst);
}

void check(Checker& c, const Exponential& op) {
  c.requires_gen(4);  // NeuronCore-v4 (trn3) and newer
  c.on_chip(op.dst, "dst");
  c.on_chip(op.src, "src");
  c.same_partitions(op.dst, "dst", op.src, "src");
  c.same_free_size(op.dst, "dst", op.src, "src");
  using enum DType;
  c.dtype_in(op.src, "src",
             {float8_e4m3, float8_e5m2, float16, bfloat16, float32, int8, int16, int32, uint8, uint16, uint32});
  c.dtype_in(op.dst, "dst",
             {float8_e4m3, float8_e5m2, float16, bfloat16, float32, tfloat32, int8, int16, int32, uint8, uint16});
  scalar_operand(c, op.max_value, "max_value", op.dst, false);
  if (op.reduce_cmd == ReduceCmd::reset)
    c.fail("reduce-cmd", "exponential takes reduce_cmd idle, reset_reduce, reduce or load_reduce");
  const bool default_init = op.reduce_init.is_imm() && op.reduce_init.imm == 0.0;
  if (op.reduce_cmd != ReduceCmd::load_reduce && !default_init)
    c.fail("operand", "reduce_init seeds the accumulators only with reduce_cmd=load_reduce; leave it 0.0 otherwise");
  scalar_operand(c, op.reduce_init, "reduce_init", op.dst, false);
  if (op.reduce_res) {
    c.column(*op.reduce_res, "reduce_res", op.dst);
    c.dtype_in(*op.reduce_res, "reduce_res", {float8_e4m3, float8_e5m2, float16, bfloat16, float32, tfloat32});
  }
}

void check(Checker& c, const TensorScalarCumulative& op) {
  c.on_chip(op.dst, "dst");
  elementwise_input(c, op.src, "src", op.dst);
  using enum DType;
  for (const auto& [v, what] : {std::pair{&op.dst, "dst"}, {&op.src, "src"}})
    c.dtype_in(*v, what, {bfloat16, float16, float32, float8_e4m3, float8_e5m2, uint8, uint16, int8, int16});
  alu_slot(c, op.op0, "op0", {AluClass::Arith});
  if (op.op1 != AluOp::add && op.op1 != AluOp::subtract && op.op1 != AluOp::multiply && op.op1 != AluOp::maximum &&
      op.op1 != AluOp::minimum)
    c.fail("alu-op", "op1 '" + std::string(to_string(op.op1)) +
                         "' cannot accumulate; use add, subtract, multiply, maximum or minimum");
  scalar_operand(c, op.imm0, "imm0", op.dst, true);
  scalar_operand(c, op.imm1, "imm1", op.dst, false);
  if (op.reduce_cmd == ReduceCmd::idle || op.reduce_cmd == ReduceCmd::reset)
    c.fail("reduce-cmd",
           "tensor_scalar_cumulative takes reduce_cmd reset_reduce (start from op1's identity), "
           "reduce (go on from the accumulator) or load_reduce (start from imm1)");
  if (op.reduce_cmd == ReduceCmd::load_reduce && op.imm1.is_none())
    c.fail("operand", "reduce_cmd=load_reduce starts the scan from imm1; pass imm1 (an fp32 scalar or a [P, 1] tile)");
}

namespace {

// activate2's tensor-scalar stage runs one of six (op0, op1) pairs (NKI ISA docs).
void activate2_pair(Checker& c, AluOp op0, AluOp op1) {
  using enum AluOp;
  const std::pair<AluOp, AluOp> allowed[] = {{multiply, add}, {multiply, subtract}, {multiply, bypass},
                                             {add, bypass},   {subtract, bypass},   {bypass, bypass}};
  for (const auto& pair : allowed)
    if (pair == std::pair{op0, op1}) return;
  c.fail("alu-op", "(op0, op1) = (" + std::string(to_string(op0)) + ", " + std::string(to_string(op1)) +
                       ") is not an activate2 pair; use (multiply, add), (multiply, subtract), (multiply, None), "
                       "(add, None), (subtract, None) or (None, None)");
}

}  // namespace

void check(Checker& c, const Activate2& op) {
  c.requires_gen(4);  // NeuronCore-v4 (trn3) and newer
  c.on_chip(op.dst, "dst");
  elementwise_input(c, op.data, "data", op.dst);
  activate2_pair(c, op.op0, op.op1);
  if (op.reverse0 && op.op0 == AluOp::bypass) c.fail("operand", "reverse0 swaps op0's operands; it needs an op0");
  if (op.reverse1 && op.op1 == AluOp::bypass) c.fail("operand", "reverse1 swaps op1's operands; it needs an op1");
  scalar_operand(c, op.imm0, "imm0", op.dst, op.op0 != AluOp::bypass);
  scalar_operand(c, op.imm1, "imm1", op.dst, op.op1 != AluOp::bypass);
  if (op.imm0.is_tile() && op.imm1.is_tile() && op.imm0.tile.dtype != op.imm1.tile.dtype)
    c.fail("dtype", "imm0 (" + std::string(to_string(op.imm0.tile.dtype)) + ") and imm1 (" +
                        std::string(to_string(op.imm1.tile.dtype)) + ") tiles must share a dtype");
  scalar_operand(c, op.relu_param, "relu_param", op.dst, false);
  using enum AluOp;
  const AluOp r = op.reduce_op;
  if (r != bypass && r != add && r != maximum && r != minimum && r != abs_max && r != abs_min)
    c.fail("alu-op", "reduce_op '" + std::string(to_string(r)) +
                         "' is not an activate2 reduction; use add, maximum, minimum, abs_max or abs_min");
  if (op.reduce_cmd == ReduceCmd::load_reduce)
    c.fail("reduce-cmd", "activate2 has no seed operand for load_reduce; use reset_reduce, or reset then reduce");
  if (op.reduce_cmd != ReduceCmd::idle && r == bypass)
    c.fail("alu-op", "reduce_cmd=" + std::string(to_string(op.reduce_cmd)) +
                         " needs reduce_op (add, maximum, minimum, abs_max or abs_min)");
  if (op.reduce_res) c.column(*op.reduce_res, "reduce_res", op.dst);
}

}  // namespace knit::ir
