// Native plans of the reductions and row statistics (tensor_reduce, partition folds, bn_stats,
// bn_aggr, max8, nc_find_index8).
#include <algorithm>
#include <cstring>

#include "../alu.h"
#include "../exec_compute.h"
#include "plan.h"

namespace knit::sim {

using namespace knit::ir;
using namespace knit::sim::native;

const char* plan_op(Planner& p, const TensorReduce& op) {
  p.out.body = "knit_reduce_body";
  for (const auto& [v, written] : {std::pair{&op.dst, true}, {&op.data, false}})
    if (const char* why = p.add(*v, written)) return why;
  Operand& dst = p.out.ops[0];
  Operand& data = p.out.ops[1];
  // The reduced trailing dims must form one strided run per dst element.
  const size_t kept = op.data.dims.size() - op.axis.size();
  Machine::Layout inner{0,
                        {data.layout.num.begin() + kept, data.layout.num.end()},
                        {data.layout.stride.begin() + kept, data.layout.stride.end()}};
  const auto group = simplified(inner, 0);
  if (group.size() > 2) return why::reduced_run;
  // data in HBM: a forwarded copy's source (forward_note), its rows as the partitions.
  if (!p.on_chip(op.dst)) return why::free_dims;
  Operand kept_data = data;  // the dims the walk keeps; the group is the body's inner loop
  kept_data.layout.num.resize(kept);
  kept_data.layout.stride.resize(kept);
  p.out.partitions = op.data.dims[0].num;
  for (Operand* o : {&dst, &kept_data}) {
    if (o->layout.num.empty() || o->layout.num[0] != p.out.partitions) return why::partitions;
    o->n[0] = p.out.partitions;
    o->step[0] = o->layout.stride[0];
  }
  std::vector<Operand*> ops{&dst, &kept_data};
  if (const char* why = common_walk(ops, 1, 1)) return why;
  std::copy(kept_data.n, kept_data.n + kWalkDims, data.n);
  std::copy(kept_data.step, kept_data.step + kWalkDims, data.step);
  ReduceShape r{};
  std::copy(dst.n, dst.n + kWalkDims, r.walk.n);
  r.dst = access_of(dst);
  r.data = access_of(data);
  r.runs = group.size() == 2 ? group[0].first : 1;
  r.run_step = group.size() == 2 ? group[0].second : 0;
  r.group = group.empty() ? 1 : group.back().first;
  r.group_step = group.empty() ? 0 : group.back().second;
  r.op = static_cast<int32_t>(op.op);
  r.bits = is_bitvec_op(op.op);
  r.negate = op.negate;
  p.out.shape = bytes_of(r);
  return nullptr;
}

const char* plan_op(Planner& p, const TensorPartitionReduce& op) {
  // dst[0, j] = fold over p of data[p, j] (exec_select.cpp): the reduce body with the free dims
  // as the walk and each column across the partitions as a group.
  p.out.body = "knit_reduce_body";
  for (const auto& [v, written] : {std::pair{&op.dst, true}, {&op.data, false}})
    if (const char* why = p.add(*v, written)) return why;
  if (!p.on_chip(op.dst) || !p.on_chip(op.data)) return why::free_dims;
  Operand& dst = p.out.ops[0];
  Operand& data = p.out.ops[1];
  if (data.layout.num.empty() || dst.layout.num.empty() || dst.layout.num[0] != 1) return why::partitions;
  std::vector<Operand*> ops{&dst, &data};
  if (const char* why = common_walk(ops, 1, 0)) return why;
  ReduceShape r{};
  std::copy(dst.n, dst.n + kWalkDims, r.walk.n);
  r.dst = access_of(dst);
  r.data = access_of(data);
  r.group = data.layout.num[0];
  r.group_step = data.layout.stride[0];
  r.runs = 1;
  r.op = static_cast<int32_t>(op.op);
  r.bits = is_bitvec_op(op.op);
  r.average = op.op == AluOp::average;
  p.out.shape = bytes_of(r);
  return nullptr;
}

const char* plan_op(Planner& p, const BnStats& op) { return p.row(RowKind::bn_stats, op.dst, op.data); }

const char* plan_op(Planner& p, const BnAggr& op) { return p.row(RowKind::bn_aggr, op.dst, op.data); }

const char* plan_op(Planner& p, const Max8& op) { return p.row(RowKind::max8, op.dst, op.src); }

const char* plan_op(Planner& p, const NcFindIndex8& op) {
  return p.row(RowKind::find_index8, op.dst, op.data, &op.vals);
}

}  // namespace knit::sim
