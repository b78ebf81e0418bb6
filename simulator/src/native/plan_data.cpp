// Native plans of the data movers (copies, transposes, fills) and the matmuls.
#include <algorithm>
#include <cstring>

#include "../alu.h"
#include "../exec_compute.h"
#include "plan.h"

namespace knit::sim {

using namespace knit::ir;
using namespace knit::sim::native;

namespace {

// An operand (on chip: `on_chip`) walked as [partitions, one free dim] in walk dims d and d + 1
// (matmul and quantize_mx operands); false if its free dims do not merge into one.
bool partitions_and_free(Operand& o, bool on_chip, int d) {
  if (!on_chip || o.layout.num.empty()) return false;
  const auto free = simplified(o.layout, 1);
  if (free.size() > 1) return false;
  o.n[d] = o.layout.num[0];
  o.step[d] = o.layout.stride[0];
  o.n[d + 1] = free.empty() ? 1 : free[0].first;
  o.step[d + 1] = free.empty() ? o.esize : free[0].second;
  return true;
}

}  // namespace

const char* plan_op(Planner& p, const TensorCopy& op) {
  MapShape s = Planner::map_shape();
  s.kind = MapKind::copy;
  return p.map(s, op.dst, &op.src, nullptr);
}

const char* plan_op(Planner& p, const DmaCopy& op) {
  MapShape s = Planner::map_shape();
  s.kind = MapKind::copy;
  s.stream_dst = p.on_chip(op.dst) ? 0 : 1;  // stream_note in bodies.cpp
  return p.map(s, op.dst, &op.src, nullptr);
}

const char* plan_op(Planner& p, const NcTranspose& op) {
  MapShape s = Planner::map_shape();
  // dst[f, p] = data[p, f], f running over data's free dims (exec_data.cpp).
  s.kind = MapKind::copy;
  IntList axes;
  for (size_t k = 1; k < op.data.dims.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  axes.push_back(0);
  return p.map(s, op.dst, &op.data, nullptr, &axes);
}

const char* plan_op(Planner& p, const DmaTranspose& op) {
  MapShape s = Planner::map_shape();
  s.kind = MapKind::copy;
  const IntList axes = op.resolved_axes();
  return p.map(s, op.dst, &op.src, nullptr, &axes);
}

const char* plan_op(Planner& p, const Memset& op) {
  MapShape s = Planner::map_shape();
  s.kind = MapKind::fill;
  s.fill_bits = memset_bits(op.dst.dtype, op.value);
  return p.map(s, op.dst, nullptr, nullptr);
}

const char* plan_op(Planner& p, const TensorCopyPredicated& op) {
  MapShape s = Planner::map_shape();
  // The predicate is operand a (data[1]), a tile source operand b (data[2]).
  if (!op.src.is_tile() && !op.src.is_imm()) return why::operand_kind;
  s.kind = op.src.is_tile() ? MapKind::copy_predicated : MapKind::fill_predicated;
  s.reverse0 = op.reverse_pred;
  s.imm = static_cast<float>(op.src.imm);
  return p.map(s, op.dst, &op.predicate, op.src.is_tile() ? &op.src.tile : nullptr);
}

const char* plan_op(Planner& p, const QuantizeMx& op) {
  p.out.body = "knit_quantize_mx_body";
  for (const auto& [v, written] : {std::pair{&op.dst, true}, {&op.dst_scale, true}, {&op.src, false}})
    if (const char* why = p.add(*v, written)) return why;
  for (Operand& o : p.out.ops)
    if (!partitions_and_free(o, p.on_chip(*o.view), 0)) return why::free_dims;
  QuantizeMxShape q{};
  q.groups = p.out.ops[1].n[0];
  q.words = p.out.ops[0].n[1];
  if (p.out.ops[0].n[0] != 8 * q.groups || p.out.ops[2].n[0] != 8 * q.groups || p.out.ops[1].n[1] != q.words ||
      p.out.ops[2].n[1] != 4 * q.words)
    return why::partitions;
  q.dst = access_of(p.out.ops[0]);
  q.scale = access_of(p.out.ops[1]);
  q.src = access_of(p.out.ops[2]);
  p.out.shape = bytes_of(q);
  return nullptr;
}

const char* plan_op(Planner& p, const NcMatmul& op) {
  // double_row: each partition holds two contraction rows, [P, 2, M] (exec_data.cpp).
  const int64_t k_rows = op.perf_mode == MatmulPerfMode::double_row ? 2 : 1;
  p.out.body = "knit_matmul_body";
  for (const auto& [v, written] : {std::pair{&op.dst, true}, {&op.stationary, false}, {&op.moving, false}})
    if (const char* why = p.add(*v, written)) return why;
  int64_t extent[3][2];
  for (int i = 0; i < 3; ++i) {
    Operand& o = p.out.ops[i];
    if (!partitions_and_free(o, p.on_chip(*o.view), 2)) return why::free_dims;
    extent[i][0] = o.n[2];
    extent[i][1] = o.n[3];
  }
  if (extent[1][1] % k_rows || extent[2][1] % k_rows) return why::perf_mode;
  MatmulShape mm{};
  mm.k_rows = static_cast<int32_t>(k_rows);
  mm.K = extent[1][0] * k_rows;
  mm.M = extent[1][1] / k_rows;
  mm.N = extent[2][1] / k_rows;
  if (extent[2][0] * k_rows != mm.K || extent[0][0] != mm.M || extent[0][1] != mm.N) return why::partitions;
  mm.dst = access_of(p.out.ops[0]);
  mm.stationary = access_of(p.out.ops[1]);
  mm.moving = access_of(p.out.ops[2]);
  for (Access* a : {&mm.dst, &mm.stationary, &mm.moving}) {
    a->step[0] = a->step[2];
    a->step[1] = a->step[3];
    a->step[2] = a->step[3] = 0;
  }
  mm.stationary.step[2] = mm.M * mm.stationary.step[1];  // row j of a partition: j M elements on
  mm.moving.step[2] = mm.N * mm.moving.step[1];
  mm.skip_zero_moving = op.is_transpose;
  p.out.scratch_floats = matmul_scratch_floats(mm.K, mm.M, mm.N);
  p.out.shape = bytes_of(mm);
  return nullptr;
}

}  // namespace knit::sim
