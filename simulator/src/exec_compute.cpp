// Semantics: the Scalar Engine activation family and the Vector/GpSimd element-wise and reduction
// instructions (activation, activation_reduce, tensor_tensor, tensor_scalar, scalar_tensor_tensor,
// reciprocal, tensor_tensor_scan, tensor_reduce, tensor_scalar_reduce).
//
// Conventions shared by every executor here:
//  - Arithmetic is fp32 (alu()/activate() from alu.h); each result is rounded once, when it is
//    written to its destination (Tile::write). Intermediate values (the first stage of a two-op
//    instruction, a scan's carry, a reduction's running value) stay in fp32.
//  - Bit-vector ops work on raw integer bit patterns (Tile::read_bits / write_bits).
//  - Every executor reads all of its inputs before writing any output, so dst may alias an input.
//  - Reductions are a left fold in fp32 in element order (row-major over the free dims), starting
//    from the first element: r = x0; r = op(r, x1); ... No identity element is needed because
//    every operand has at least one element per partition.
//  - Accumulator registers (ExecState::scalar_acc / vector_acc) are indexed by the operand's
//    partition index (0 .. P-1 within the view), one fp32 per lane.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "alu.h"
#include "exec_compute.h"
#include "exec_state.h"

namespace knit::sim {

using namespace knit::ir;

bool is_bitvec_op(AluOp op) {
  const AluClass k = alu_class(op);
  return k == AluClass::Bitvec || k == AluClass::BitvecUnary;
}

// A scalar operand as one value per partition; unused operands (unary ops) are not read, so an
// ignored [P, 1] tile need not be initialized.
std::vector<float> scalar_column(ExecState& m, const Operand& o, AluOp op, int64_t P, const char* what) {
  if (op == AluOp::bypass || alu_class(op) == AluClass::Unary || o.is_none()) return std::vector<float>(P, 0.0f);
  return m.column(o, P, what);
}

// The bit-vector form of a scalar operand: a [P, 1] tile's raw bits, or the immediate converted
// to an integer (two's complement) bit pattern.
std::vector<uint32_t> scalar_column_bits(ExecState& m, const Operand& o, AluOp op, int64_t P, const char* what) {
  std::vector<uint32_t> v(P, 0u);
  if (op == AluOp::bypass || alu_class(op) == AluClass::BitvecUnary || o.is_none()) return v;
  if (o.is_tile()) {
    Tile t = m.tile(o.tile, what);
    for (int64_t p = 0; p < P; ++p) v[p] = t.read_bits(t.at(p, 0));
  } else {
    for (int64_t p = 0; p < P; ++p) v[p] = static_cast<uint32_t>(static_cast<int64_t>(o.imm));
  }
  return v;
}

namespace {
// Writes acc[p] (optionally negated) to a [P, 1] reduce_res operand.
void write_column(ExecState& m, const View& v, const char* what, const std::array<float, 128>& acc, int64_t P,
                  bool negate = false) {
  Tile t = m.tile(v, what);
  for (int64_t p = 0; p < P; ++p) t.write(t.at(p, 0), negate ? -acc[p] : acc[p]);
}

bool is_int32_type(DType t) { return t == DType::int32 || t == DType::uint32; }
}  // namespace

// ---- tensor_tensor's exact integer path --------------------------------------------------------

// GpSimd computes int32/uint32 add/subtract/multiply/maximum/minimum natively and exactly. The
// path is taken when dst and both inputs are 32-bit integers, the op is one of those five, and
// the instruction can run on GpSimd: engine unknown or gpsimd, and no operand in PSUM (otherwise
// it falls back to the Vector Engine's fp32 math; nki.isa.tensor_tensor).
bool exact_int_path(ExecState& m, const TensorTensor& op) {
  if (!is_int32_type(op.dst.dtype) || !is_int32_type(op.data1.dtype) || !is_int32_type(op.data2.dtype)) return false;
  if (op.op != AluOp::add && op.op != AluOp::subtract && op.op != AluOp::multiply && op.op != AluOp::maximum &&
      op.op != AluOp::minimum)
    return false;
  if (op.engine == Engine::vector) return false;
  for (const View* v : {&op.dst, &op.data1, &op.data2})
    if (m.kernel().tensor_of(*v).buffer == Buffer::psum) return false;
  return true;
}

// ---- Scalar Engine ------------------------------------------------------------------------------

// dst = op(data * scale + bias) in fp32 (two roundings: the product, then the sum; no bias means
// no addition), then the optional row reduction of the fp32 activation outputs (before rounding to
// dst) into the Scalar Engine accumulators, per reduce_cmd:
//   idle: untouched; reset: zero; reset_reduce: the row's reduction; reduce: acc op row.
// (load_reduce is rejected by the verifier.) reduce_res, if given, receives the accumulators.
void exec(ExecState& m, const Activation& op) {
  Tile data = m.tile(op.data, "data");
  const int64_t P = data.P, F = data.F;
  const std::vector<float> x = data.read_all();
  const std::vector<float> scale = m.column(op.scale, P, "scale");
  const bool has_bias = !op.bias.is_none();
  const std::vector<float> bias = has_bias ? m.column(op.bias, P, "bias") : std::vector<float>(P, 0.0f);
  std::vector<float> y(x.size());
  for (int64_t p = 0; p < P; ++p)
    for (int64_t j = 0; j < F; ++j) {
      float t = x[p * F + j] * scale[p];
      if (has_bias) t = t + bias[p];
      y[p * F + j] = activate(op.op, t, static_cast<float>(op.alpha));
    }
  Tile dst = m.tile(op.dst, "dst");
  dst.write_all(y);
  const std::vector<float> folds = folds_rows(op.reduce_cmd) ? row_folds(op.reduce_op, y, P, F)
                                                             : std::vector<float>(P, 0.0f);
  finish_activation(m, op, folds.data(), P);
}

bool folds_rows(ReduceCmd cmd) { return cmd == ReduceCmd::reset_reduce || cmd == ReduceCmd::reduce; }

std::vector<float> row_folds(AluOp op, const std::vector<float>& values, int64_t P, int64_t F) {
  std::vector<float> rows(static_cast<size_t>(P));
  for (int64_t p = 0; p < P; ++p) rows[p] = alu_fold(op, &values[p * F], F);
  return rows;
}

void finish_activation(ExecState& m, const Activation& op, const float* folds, int64_t P) {
  if (op.reduce_cmd == ReduceCmd::load_reduce)
    m.fail("reduce-cmd", "activation does not support reduce_cmd=load_reduce");
  for (int64_t p = 0; p < P; ++p) {
    if (op.reduce_cmd == ReduceCmd::reset) m.scalar_acc[p] = 0.0f;  // ScalarE reset zeroes (nki.isa.activation)
    else update_accumulator(op.reduce_cmd, op.reduce_op, m.scalar_acc[p], folds[p]);
  }
  if (op.reduce_res) write_column(m, *op.reduce_res, "reduce_res", m.scalar_acc, P);
}

// activation with reduce_cmd=reset_reduce and a read-out into reduce_res.
Activation as_activation(const ActivationReduce& op) {
  return Activation{op.dst, op.op, op.data, op.bias, op.scale, op.reduce_op, op.reduce_res, ReduceCmd::reset_reduce,
                    0.0};
}

void exec(ExecState& m, const ActivationReduce& op) { exec(m, as_activation(op)); }

// ---- Vector / GpSimd element-wise ---------------------------------------------------------------

void exec(ExecState& m, const TensorTensor& op) {
  Tile a = m.tile(op.data1, "data1");
  Tile b = m.tile(op.data2, "data2");
  Tile dst = m.tile(op.dst, "dst");
  if (is_bitvec_op(op.op)) {
    std::vector<uint32_t> r = a.read_all_bits();
    const std::vector<uint32_t> bb = b.read_all_bits();
    for (int64_t i = 0; i < dst.size(); ++i) r[i] = alu_bits(op.op, r[i], bb[i]);
    dst.write_all_bits(r);
  } else if (exact_int_path(m, op)) {
    std::vector<int64_t> r(a.size());
    for (int64_t i = 0; i < a.size(); ++i) r[i] = a.read_int(i);
    for (int64_t i = 0; i < b.size(); ++i) r[i] = int_alu(op.op, r[i], b.read_int(i));
    for (int64_t i = 0; i < dst.size(); ++i) dst.write_int(i, r[i]);  // saturates to dst's range
  } else {
    std::vector<float> r = a.read_all();
    const std::vector<float> bb = b.read_all();
    for (int64_t i = 0; i < dst.size(); ++i) r[i] = alu(op.op, r[i], bb[i]);
    dst.write_all(r);
  }
}

// dst = (data op0 operand0) op1 operand1; the first stage stays fp32 (or 32-bit bits).
void exec(ExecState& m, const TensorScalar& op) {
  Tile data = m.tile(op.data, "data");
  const int64_t P = data.P, F = data.F;
  Tile dst = m.tile(op.dst, "dst");
  if (is_bitvec_op(op.op0)) {
    std::vector<uint32_t> r = data.read_all_bits();
    const std::vector<uint32_t> s0 = scalar_column_bits(m, op.operand0, op.op0, P, "operand0");
    const std::vector<uint32_t> s1 = scalar_column_bits(m, op.operand1, op.op1, P, "operand1");
    for (int64_t i = 0; i < P * F; ++i) {
      const int64_t p = i / F;
      r[i] = apply_bits(op.op1, apply_bits(op.op0, r[i], s0[p], op.reverse0), s1[p], op.reverse1);
    }
    dst.write_all_bits(r);
    return;
  }
  std::vector<float> r = data.read_all();
  const std::vector<float> s0 = scalar_column(m, op.operand0, op.op0, P, "operand0");
  const std::vector<float> s1 = scalar_column(m, op.operand1, op.op1, P, "operand1");
  for (int64_t i = 0; i < P * F; ++i) {
    const int64_t p = i / F;
    r[i] = apply(op.op1, apply(op.op0, r[i], s0[p], op.reverse0), s1[p], op.reverse1);
  }
  dst.write_all(r);
}

// dst = (data op0 operand0) op1 operand1, operand0 a scalar/[P, 1] and operand1 a full tile.
void exec(ExecState& m, const ScalarTensorTensor& op) {
  Tile data = m.tile(op.data, "data");
  Tile other = m.tile(op.operand1, "operand1");
  const int64_t P = data.P, F = data.F;
  std::vector<float> r = data.read_all();
  const std::vector<float> t1 = other.read_all();
  const std::vector<float> s0 = scalar_column(m, op.operand0, op.op0, P, "operand0");
  for (int64_t i = 0; i < P * F; ++i)
    r[i] = apply(op.op1, apply(op.op0, r[i], s0[i / F], op.reverse0), t1[i], op.reverse1);
  Tile dst = m.tile(op.dst, "dst");
  dst.write_all(r);
}

void exec(ExecState& m, const Reciprocal& op) {
  Tile data = m.tile(op.data, "data");
  std::vector<float> r = data.read_all();
  for (float& v : r) v = alu(AluOp::reciprocal, v, 0.0f);
  Tile dst = m.tile(op.dst, "dst");
  dst.write_all(r);
}

// Per partition: r_0 = op1(op0(data0[0], initial), data1[0]); r_i = op1(op0(data0[i], r_{i-1}),
// data1[i]); reverse0 / reverse1 swap the operands of op0 / op1. The carry r is fp32 (each r_i is
// rounded only where it is written to dst).
void exec(ExecState& m, const TensorTensorScan& op) {
  Tile d0 = m.tile(op.data0, "data0");
  Tile d1 = m.tile(op.data1, "data1");
  const int64_t P = d0.P, F = d0.F;
  const std::vector<float> a = d0.read_all();
  const std::vector<float> b = d1.read_all();
  const std::vector<float> init = m.column(op.initial, P, "initial");
  std::vector<float> r(a.size());
  for (int64_t p = 0; p < P; ++p) {
    float carry = init[p];
    for (int64_t j = 0; j < F; ++j) {
      const int64_t i = p * F + j;
      carry = apply(op.op1, apply(op.op0, a[i], carry, op.reverse0), b[i], op.reverse1);
      r[i] = carry;
    }
  }
  Tile dst = m.tile(op.dst, "dst");
  dst.write_all(r);
}

// ---- Vector Engine reductions -------------------------------------------------------------------

// Reduces the trailing free dims named by `axis` (the verifier guarantees they are trailing and
// contiguous), so each dst element folds one consecutive run of `group` data elements.
void exec(ExecState& m, const TensorReduce& op) {
  Tile data = m.tile(op.data, "data");
  const int64_t rank = static_cast<int64_t>(op.data.dims.size());
  int64_t group = 1;
  for (int64_t d = rank - static_cast<int64_t>(op.axis.size()); d < rank; ++d) group *= op.data.dims[d].num;
  const int64_t n_out = data.size() / group;
  Tile dst = m.tile(op.dst, "dst");
  if (is_bitvec_op(op.op)) {
    const std::vector<uint32_t> x = data.read_all_bits();
    std::vector<uint32_t> r(n_out);
    for (int64_t g = 0; g < n_out; ++g) r[g] = alu_fold_bits(op.op, &x[g * group], group);
    dst.write_all_bits(r);
    return;
  }
  const std::vector<float> x = data.read_all();
  std::vector<float> r(n_out);
  for (int64_t g = 0; g < n_out; ++g) {
    r[g] = alu_fold(op.op, &x[g * group], group);
    if (op.negate) r[g] = r[g] * -1.0f;
  }
  dst.write_all(r);
}

// dst = data op0 operand0; the fp32 results (before rounding to dst) of each partition are folded
// with reduce_op and combined with the Vector Engine accumulators per reduce_cmd:
//   idle: untouched; reset: the reduce_op's identity (add 0, multiply 1, maximum -inf,
//   minimum +inf); reset_reduce: the row's reduction; load_reduce: reduce_init op row;
//   reduce: acc op row.
// reduce_res (if given) receives the accumulators, negated when reduce_res_negate (the
// accumulators themselves keep the un-negated value).
void exec(ExecState& m, const TensorScalarReduce& op) {
  Tile data = m.tile(op.data, "data");
  const int64_t P = data.P, F = data.F;
  std::vector<float> y = data.read_all();
  const std::vector<float> s0 = scalar_column(m, op.operand0, op.op0, P, "operand0");
  for (int64_t i = 0; i < P * F; ++i) y[i] = apply(op.op0, y[i], s0[i / F], op.reverse0);
  Tile dst = m.tile(op.dst, "dst");
  dst.write_all(y);
  std::vector<float> folds(P);
  for (int64_t p = 0; p < P; ++p) folds[p] = alu_fold(op.reduce_op, &y[p * F], F);
  finish_tensor_scalar_reduce(m, op, folds.data(), P);
}

void finish_tensor_scalar_reduce(ExecState& m, const TensorScalarReduce& op, const float* folds, int64_t P) {
  const bool loads = op.reduce_cmd == ReduceCmd::load_reduce;
  const std::vector<float> init = loads ? m.column(op.reduce_init, P, "reduce_init") : std::vector<float>();
  for (int64_t p = 0; p < P; ++p)
    update_accumulator(op.reduce_cmd, op.reduce_op, m.vector_acc[p], folds[p], loads ? init[p] : 0.0f);
  if (op.reduce_res) write_column(m, *op.reduce_res, "reduce_res", m.vector_acc, P, op.reduce_res_negate);
}

// dst = exp(src + (-max_value)) in fp32 (one rounding: the sum), the row sums of the fp32 results
// (before rounding to dst) into the Vector Engine accumulators per reduce_cmd (idle: untouched).
void exec(ExecState& m, const Exponential& op) {
  Tile src = m.tile(op.src, "src");
  const int64_t P = src.P, F = src.F;
  const std::vector<float> x = src.read_all();
  const std::vector<float> neg_max = exponential_bias(m, op, P);
  std::vector<float> y(x.size());
  for (int64_t p = 0; p < P; ++p)
    for (int64_t j = 0; j < F; ++j) y[p * F + j] = activate(ActFunc::exp, x[p * F + j] + neg_max[p]);
  Tile dst = m.tile(op.dst, "dst");
  dst.write_all(y);
  std::vector<float> folds(P, 0.0f);
  if (op.reduce_cmd != ReduceCmd::idle)
    for (int64_t p = 0; p < P; ++p) folds[p] = alu_fold(AluOp::add, &y[p * F], F);
  finish_exponential(m, op, folds.data(), P);
}

std::vector<float> exponential_bias(ExecState& m, const Exponential& op, int64_t P) {
  std::vector<float> bias = m.column(op.max_value, P, "max_value");
  for (float& b : bias) b = -b;
  return bias;
}

void finish_exponential(ExecState& m, const Exponential& op, const float* folds, int64_t P) {
  if (op.reduce_cmd == ReduceCmd::idle) return;
  const bool loads = op.reduce_cmd == ReduceCmd::load_reduce;
  const std::vector<float> init = loads ? m.column(op.reduce_init, P, "reduce_init") : std::vector<float>();
  for (int64_t p = 0; p < P; ++p)
    update_accumulator(op.reduce_cmd, AluOp::add, m.vector_acc[p], folds[p], loads ? init[p] : 0.0f);
  if (op.reduce_res) write_column(m, *op.reduce_res, "reduce_res", m.vector_acc, P);
}

// ---- NKI 0.6: tensor_scalar_cumulative, activate2 --------------------------------------------

// Per partition, in row-major order: t = op0(src, imm0[p]); reg = op1(t, reg) (the new term
// first: subtract gives t - reg); dst = reg. reg is fp32, rounded only where it is stored; it
// starts at cumulative_start's value and the last one of each row stays in the Vector Engine
// accumulator.
void exec(ExecState& m, const TensorScalarCumulative& op) {
  Tile src = m.tile(op.src, "src");
  const int64_t P = src.P, F = src.F;
  const std::vector<float> x = src.read_all();
  const std::vector<float> imm0 = m.column(op.imm0, P, "imm0");
  std::vector<float> reg = cumulative_start(m, op, P);
  std::vector<float> y(x.size());
  for (int64_t p = 0; p < P; ++p)
    for (int64_t j = 0; j < F; ++j) {
      reg[p] = apply(op.op1, apply(op.op0, x[p * F + j], imm0[p], false), reg[p], false);
      y[p * F + j] = reg[p];
    }
  Tile dst = m.tile(op.dst, "dst");
  dst.write_all(y);
  finish_cumulative(m, reg.data(), P);
}

std::vector<float> cumulative_start(ExecState& m, const TensorScalarCumulative& op, int64_t P) {
  switch (op.reduce_cmd) {
    case ReduceCmd::reduce: return std::vector<float>(m.vector_acc.begin(), m.vector_acc.begin() + P);
    case ReduceCmd::load_reduce: return m.column(op.imm1, P, "imm1");
    default: return std::vector<float>(static_cast<size_t>(P), reduce_identity(op.op1));
  }
}

void finish_cumulative(ExecState& m, const float* last, int64_t P) {
  for (int64_t p = 0; p < P; ++p) m.vector_acc[p] = last[p];
}

// v = op1(op0(data, imm0[p]), imm1[p]) (each stage skipped when bypass, its operands swapped when
// reversed; two roundings at most), dst = op(v) with prelu's slope relu_param[p]; each row's fp32
// results fold (left to right, from the first) with reduce_op into the Scalar Engine accumulators:
// reset sets reduce_op's identity (abs_max 0, abs_min +inf: a DESIGN CHOICE, the docs are
// silent), reset_reduce the fold, reduce acc op fold; reduce_res receives them.
void exec(ExecState& m, const Activate2& op) {
  Tile data = m.tile(op.data, "data");
  const int64_t P = data.P, F = data.F;
  const std::vector<float> x = data.read_all();
  const std::vector<float> imm0 = scalar_column(m, op.imm0, op.op0, P, "imm0");
  const std::vector<float> imm1 = scalar_column(m, op.imm1, op.op1, P, "imm1");
  const std::vector<float> slope = activate2_slope(m, op, P);
  std::vector<float> y(x.size());
  for (int64_t p = 0; p < P; ++p)
    for (int64_t j = 0; j < F; ++j) {
      const float v = apply(op.op1, apply(op.op0, x[p * F + j], imm0[p], op.reverse0), imm1[p], op.reverse1);
      y[p * F + j] = activate(op.op, v, slope[p]);
    }
  Tile dst = m.tile(op.dst, "dst");
  dst.write_all(y);
  const std::vector<float> folds = folds_rows(op.reduce_cmd) ? row_folds(op.reduce_op, y, P, F)
                                                             : std::vector<float>(P, 0.0f);
  finish_activate2(m, op, folds.data(), P);
}

std::vector<float> activate2_slope(ExecState& m, const Activate2& op, int64_t P) {
  if (op.op != ActFunc::prelu) return std::vector<float>(static_cast<size_t>(P), 0.0f);
  return m.column(op.relu_param, P, "relu_param");
}

void activate2_affine(ExecState& m, const Activate2& op, int64_t P, std::vector<float> (&col)[2]) {
  const std::vector<float> imm0 = scalar_column(m, op.imm0, op.op0, P, "imm0");
  const std::vector<float> imm1 = scalar_column(m, op.imm1, op.op1, P, "imm1");
  col[0].assign(static_cast<size_t>(P), 1.0f);
  col[1].assign(static_cast<size_t>(P), 0.0f);
  for (int64_t p = 0; p < P; ++p) {
    // data * scale + bias, each step the same IEEE operation as the stage it stands for:
    // a - b is a + (-b), b - a is (-a) + b, and a * 1 is a.
    if (op.op0 == AluOp::multiply) col[0][p] = imm0[p];
    if (op.op0 == AluOp::add) col[1][p] = imm0[p];
    if (op.op0 == AluOp::subtract) {
      col[0][p] = op.reverse0 ? -1.0f : 1.0f;
      col[1][p] = op.reverse0 ? imm0[p] : -imm0[p];
    }
    if (op.op1 == AluOp::add) col[1][p] = imm1[p];
    if (op.op1 == AluOp::subtract) {
      if (op.reverse1) col[0][p] = -col[0][p];
      col[1][p] = op.reverse1 ? imm1[p] : -imm1[p];
    }
  }
}

void finish_activate2(ExecState& m, const Activate2& op, const float* folds, int64_t P) {
  for (int64_t p = 0; p < P; ++p) update_accumulator(op.reduce_cmd, op.reduce_op, m.scalar_acc[p], folds[p]);
  if (op.reduce_res) write_column(m, *op.reduce_res, "reduce_res", m.scalar_acc, P);
}

}  // namespace knit::sim
