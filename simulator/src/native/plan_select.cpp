// Native plans of the selects, index generators and gathers.
#include <algorithm>
#include <cstring>

#include "../alu.h"
#include "../exec_compute.h"
#include "plan.h"

namespace knit::sim {

using namespace knit::ir;
using namespace knit::sim::native;

const char* plan_op(Planner& p, const SelectReduce& op) {
  MapShape s = Planner::map_shape();
  s.kind = MapKind::select_reduce;  // predicate a, on_true b; on_false is column 0
  s.reverse0 = op.reverse_pred;
  s.fold_op = static_cast<int32_t>(op.reduce_op);
  return p.map(s, op.dst, &op.predicate, &op.on_true);
}

const char* plan_op(Planner& p, const RangeSelect& op) {
  MapShape s = Planner::map_shape();
  s.kind = MapKind::range_select;  // bounds are columns 0 and 1
  s.op0 = static_cast<int32_t>(op.comp_op0);
  s.op1 = static_cast<int32_t>(op.comp_op1);
  s.alpha = static_cast<float>(op.range_start);
  s.imm = static_cast<float>(op.on_false_value);
  s.fold_op = static_cast<int32_t>(op.reduce_op);
  // The index is dst's flattened free element number: the affine pseudo-operand of a dense
  // row-major array of dst's free shape, not moving with the partition.
  Operand index;
  int64_t stride = 1;
  for (size_t k = op.dst.dims.size(); k-- > 1;) {
    index.layout.num.insert(index.layout.num.begin(), op.dst.dims[k].num);
    index.layout.stride.insert(index.layout.stride.begin(), stride);
    stride *= op.dst.dims[k].num;
  }
  index.layout.num.insert(index.layout.num.begin(), op.dst.dims.empty() ? 1 : op.dst.dims[0].num);
  index.layout.stride.insert(index.layout.stride.begin(), 0);
  return p.map(s, op.dst, &op.on_true_tile, nullptr, nullptr, &index);
}

const char* plan_op(Planner& p, const Iota& op) {
  MapShape s = Planner::map_shape();
  s.kind = MapKind::iota;
  s.affine_offset = op.offset;
  const Operand index = p.affine_index(op.dst, op.pattern, op.channel_multiplier);
  return p.map(s, op.dst, nullptr, nullptr, nullptr, &index);
}

const char* plan_op(Planner& p, const AffineSelect& op) {
  MapShape s = Planner::map_shape();
  s.kind = MapKind::affine_select;
  s.op0 = static_cast<int32_t>(op.cmp_op);
  s.imm = static_cast<float>(op.on_false_value);
  s.affine_offset = op.offset;
  const Operand index = p.affine_index(op.dst, op.pattern, op.channel_multiplier);
  return p.map(s, op.dst, &op.on_true_tile, nullptr, nullptr, &index);
}

const char* plan_op(Planner& p, const NcNGather& op) {
  MapShape s = Planner::map_shape();
  // dst and indices walk in lockstep; data is the gather source.
  if (op.data.dtype != op.dst.dtype) return why::gather_dtypes;
  s.kind = MapKind::gather;
  if (const char* why = p.map(s, op.dst, &op.indices, nullptr)) return why;
  if (const char* why = p.gather_source(s, op.data)) return why;
  p.out.shape = bytes_of(s);
  return nullptr;
}

const char* plan_op(Planner& p, const LocalGather& op) {
  MapShape s = Planner::map_shape();
  // The gather kind too, its indices expanded by the executor into a dense int32 [P, J] array in
  // dst's element order (NativeExecutor::execute): dst (p, k E + e) reads src_buffer element
  // idx[k] + e of partition p, idx the index list of p's group of 16 partitions.
  if (op.src_buffer.dtype != op.dst.dtype) return why::gather_dtypes;
  s.kind = MapKind::gather;
  if (const char* why = p.map(s, op.dst, nullptr, nullptr)) return why;
  if (const char* why = p.add(op.index, false)) return why;  // data[1], for the checks
  if (const char* why = p.gather_source(s, op.src_buffer)) return why;
  if (p.out.partitions % 16) return why::partitions;
  const Operand& dst = p.out.ops[0];
  const int64_t row = dst.n[1] * dst.n[2] * dst.n[3];
  const int64_t index_row = op.index.num_elements() / std::max<int64_t>(1, p.out.partitions);
  const int64_t valid = op.num_valid_indices < 0 ? 16 * index_row : op.num_valid_indices;
  if (row != valid * op.num_elem_per_idx) return why::gather_width;
  s.a = Access{static_cast<int32_t>(DType::int32), 0, {4 * row, 4 * dst.n[2] * dst.n[3], 4 * dst.n[3], 4}};
  p.out.shape = bytes_of(s);
  return nullptr;
}

}  // namespace knit::sim
