// Native plans of the ALU instructions: element-wise maps through one or two ALU stages or an
// activation function, with optional row folds.
#include "../alu.h"
#include "../exec_compute.h"
#include "plan.h"

namespace knit::sim {

using namespace knit::ir;
using namespace knit::sim::native;

namespace {

// The two ALU stages of tensor_scalar, scalar_tensor_tensor and tensor_tensor_scan.
template <class Op>
void two_stages(MapShape& s, MapKind kind, const Op& op) {
  s.kind = kind;
  s.op0 = static_cast<int32_t>(op.op0);
  s.op1 = static_cast<int32_t>(op.op1);
  s.reverse0 = op.reverse0;
  s.reverse1 = op.reverse1;
}

// activation and activation_reduce (as an activation), on the instruction's own views: the plan
// keeps pointers to them.
const char* plan_activation(Planner& p, const Activation& act, const View& dst, const View& data) {
  MapShape s = Planner::map_shape();
  s.kind = MapKind::activation;
  s.op0 = static_cast<int32_t>(act.op);
  s.has_bias = !act.bias.is_none();
  s.fold_op = folds_rows(act.reduce_cmd) ? static_cast<int32_t>(act.reduce_op) : -1;
  s.alpha = static_cast<float>(act.alpha);
  return p.map(s, dst, &data, nullptr);
}

}  // namespace

const char* plan_op(Planner& p, const TensorTensor& op) {
  MapShape s = Planner::map_shape();
  s.kind = is_bitvec_op(op.op)       ? MapKind::tensor_tensor_bits
           : exact_int_path(p.m, op) ? MapKind::tensor_tensor_int
                                     : MapKind::tensor_tensor;
  s.op0 = static_cast<int32_t>(op.op);
  return p.map(s, op.dst, &op.data1, &op.data2);
}

const char* plan_op(Planner& p, const TensorScalar& op) {
  MapShape s = Planner::map_shape();
  two_stages(s, is_bitvec_op(op.op0) ? MapKind::tensor_scalar_bits : MapKind::tensor_scalar, op);
  return p.map(s, op.dst, &op.data, nullptr);
}

const char* plan_op(Planner& p, const ScalarTensorTensor& op) {
  MapShape s = Planner::map_shape();
  two_stages(s, MapKind::scalar_tensor_tensor, op);
  return p.map(s, op.dst, &op.data, &op.operand1);
}

const char* plan_op(Planner& p, const Reciprocal& op) {
  MapShape s = Planner::map_shape();
  s.kind = MapKind::tensor_scalar;  // apply(reciprocal, x, .) = alu(reciprocal, x, 0), as exec
  s.op0 = static_cast<int32_t>(AluOp::reciprocal);
  return p.map(s, op.dst, &op.data, nullptr);
}

const char* plan_op(Planner& p, const Activation& op) { return plan_activation(p, op, op.dst, op.data); }

const char* plan_op(Planner& p, const ActivationReduce& op) {
  return plan_activation(p, as_activation(op), op.dst, op.data);
}

const char* plan_op(Planner& p, const TensorScalarReduce& op) {
  MapShape s = Planner::map_shape();
  s.kind = MapKind::tensor_scalar_fold;
  s.op0 = static_cast<int32_t>(op.op0);
  s.reverse0 = op.reverse0;
  s.fold_op = static_cast<int32_t>(op.reduce_op);
  return p.map(s, op.dst, &op.data, nullptr);
}

const char* plan_op(Planner& p, const TensorTensorScan& op) {
  MapShape s = Planner::map_shape();
  two_stages(s, MapKind::scan, op);  // initial is column 0
  return p.map(s, op.dst, &op.data0, &op.data1);
}

// exponential is activation's map with exp, a bias of -max_value and unit scale (executor.cpp
// passes those columns), summing rows unless reduce_cmd is idle.
const char* plan_op(Planner& p, const Exponential& op) {
  MapShape s = Planner::map_shape();
  s.kind = MapKind::activation;
  s.op0 = static_cast<int32_t>(ActFunc::exp);
  s.has_bias = true;
  s.fold_op = op.reduce_cmd == ReduceCmd::idle ? -1 : static_cast<int32_t>(AluOp::add);
  return p.map(s, op.dst, &op.src, nullptr);
}

// tensor_scalar_cumulative: the cumulative map kind, imm0 in column 0 and the starting register in
// column 1 (executor.cpp reads them as exec_compute.cpp does).
const char* plan_op(Planner& p, const TensorScalarCumulative& op) {
  MapShape s = Planner::map_shape();
  s.kind = MapKind::cumulative;
  s.op0 = static_cast<int32_t>(op.op0);
  s.op1 = static_cast<int32_t>(op.op1);
  return p.map(s, op.dst, &op.src, nullptr);
}

// activate2 is activation's map: its tensor-scalar stage as data * column 0 + column 1
// (activate2_affine); prelu's slope an immediate, or a [P, 1] relu_param read per partition as
// the gather kind reads its source.
const char* plan_op(Planner& p, const Activate2& op) {
  const bool slope_tile = op.op == ActFunc::prelu && op.relu_param.is_tile();
  MapShape s = Planner::map_shape();
  s.kind = slope_tile ? MapKind::activation_slope : MapKind::activation;
  s.op0 = static_cast<int32_t>(op.op);
  s.has_bias = op.op0 == AluOp::add || op.op0 == AluOp::subtract || op.op1 != AluOp::bypass;
  s.fold_op = folds_rows(op.reduce_cmd) ? static_cast<int32_t>(op.reduce_op) : -1;
  s.alpha = op.op == ActFunc::prelu ? static_cast<float>(op.relu_param.imm) : 0.0f;
  if (const char* why = p.map(s, op.dst, &op.data, nullptr)) return why;
  if (!slope_tile) return nullptr;
  if (const char* why = p.gather_source(s, op.relu_param.tile)) return why;
  p.out.shape = bytes_of(s);
  return nullptr;
}

}  // namespace knit::sim
