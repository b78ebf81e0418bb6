// Native plans of the NKI 0.6 search and index instructions (nc_match_replace8,
// nonzero_with_count, sequence_bounds, topk): the row body's search kinds, which call the same
// search.h helpers as exec_search.cpp.
#include <cstring>

#include "../machine.h"
#include "../search.h"
#include "knit/ir/numerics.h"
#include "plan.h"

namespace knit::sim {

using namespace knit::ir;
using namespace knit::sim::native;

namespace {

// The row shape a row() plan built, to adjust; put back with set().
RowShape shape_of(const Planner& p) {
  RowShape r;
  std::memcpy(&r, p.out.shape.data(), sizeof r);
  return r;
}
void set(Planner& p, const RowShape& r, int64_t scratch_floats) {
  p.out.shape = bytes_of(r);
  p.out.scratch_floats = scratch_floats + scratch_floats % 2;  // keeps the next part's int64s aligned
}

int64_t free_elements(const Walk& w) { return w.n[1] * w.n[2] * w.n[3]; }

// nc_match_replace8 writing `out` (dst, or dst_idx with the match_index8 kind).
const char* plan_match(Planner& p, RowKind kind, const View& out, const NcMatchReplace8& op) {
  if (const char* why = p.row(kind, out, op.data, &op.vals)) return why;
  RowShape r = shape_of(p);
  r.imm = static_cast<float>(op.imm);
  set(p, r, 2 * free_elements(r.data_walk));  // the row's values and bits
  return nullptr;
}

}  // namespace

// dst only; with dst_idx NativeExecutor::run_match_replace8 runs the match_index8 kind into it too.
const char* plan_op(Planner& p, const NcMatchReplace8& op) {
  return plan_match(p, RowKind::match_replace8, op.dst, op);
}

// Both outputs read data and vals as the instruction found them: dst_idx is written first, as dst
// may be data itself (in place); when dst_idx shares a tensor with an input, dst goes first.
bool NativeExecutor::run_match_replace8(const Instruction& inst, const NcMatchReplace8& op) {
  auto shares = [](const View& out, const NcMatchReplace8& o) {
    return out.tensor == o.data.tensor || out.tensor == o.vals.tensor;
  };
  if (shares(*op.dst_idx, op) && shares(op.dst, op))
    return refuse(inst, {"both its outputs share a tensor with its inputs"});
  Plan index, replace;
  Planner ip(m_, inst, index), rp(m_, inst, replace);
  if (const char* why = plan_match(ip, RowKind::match_index8, *op.dst_idx, op)) return refuse(inst, {why});
  if (const char* why = plan_op(rp, op)) return refuse(inst, {why});
  if (!warm(inst)) return false;
  const bool index_first = !shares(*op.dst_idx, op);
  for (const Plan* p : {index_first ? &index : &replace, index_first ? &replace : &index})
    // Refused after the first stage: the reference redoes both, from inputs the first left as they were.
    if (const Refusal why = execute(*p); why.reason) return refuse(inst, why);
  ++native;
  return true;
}

bool NativeExecutor::segment_ids_valid(const Plan& p) {
  RowShape s;
  std::memcpy(&s, p.shape.data(), sizeof s);
  const Operand& ids = p.ops[1];
  const uint8_t* base = m_.memory_of(*ids.view)->bytes.data() + ids.layout.base;
  bool valid = true;
  for (int64_t i1 = 0; i1 < s.data_walk.n[1]; ++i1)
    for (int64_t i2 = 0; i2 < s.data_walk.n[2]; ++i2)
      for (int64_t i3 = 0; i3 < s.data_walk.n[3]; ++i3) {
        const int64_t at = i1 * s.data.step[1] + i2 * s.data.step[2] + i3 * s.data.step[3];
        valid = valid && !bad_segment_id(decode(static_cast<DType>(s.data.dtype), base + at));
      }
  return valid;
}

const char* plan_op(Planner& p, const NonzeroWithCount& op) {
  if (const char* why = p.row(RowKind::nonzero_with_count, op.dst, op.src)) return why;
  RowShape r = shape_of(p);
  r.imm_a = op.index_offset;
  r.imm_b = op.padding_val;
  const int64_t T = free_elements(r.data_walk);
  set(p, r, 2 * (T + 1) + T);  // the int64 results, then the row
  return nullptr;
}

const char* plan_op(Planner& p, const SequenceBounds& op) {
  if (const char* why = p.row(RowKind::sequence_bounds, op.dst, op.segment_ids)) return why;
  const RowShape r = shape_of(p);
  set(p, r, 5 * free_elements(r.data_walk));  // int64 starts and ends, then the ids
  return nullptr;
}

// One walk row per 16-partition group: src's snake (the first ceil(n / 16) columns, each over the
// group's 16 partitions) and the group's 16 output rows of K.
const char* plan_op(Planner& p, const Topk& op) {
  if (const char* why = p.row(RowKind::topk, op.val_dst, op.idx_dst, &op.src, true)) return why;
  for (const Operand& o : p.out.ops)
    if (o.n[1] * o.n[2] > 1) return why::free_dims;  // each is one [P, columns] block
  RowShape r = shape_of(p);
  const int64_t groups = r.dst_walk.n[0] / 16, columns = (op.n + 15) / 16, K = r.dst_walk.n[3];
  // Walk row g = partitions 16g .. 16g + 15; `snake`: columns outer, partitions inner.
  auto group = [&](Access& a, int64_t cols, bool snake) {
    const int64_t partition = a.step[0], column = a.step[3];
    a.step[0] = 16 * partition, a.step[1] = 0;
    a.step[2] = snake ? column : partition;
    a.step[3] = snake ? partition : column;
    return Walk{{groups, 1, snake ? cols : 16, snake ? 16 : cols}};
  };
  r.data_walk = group(r.vals, columns, true);
  r.dst_walk = group(r.dst, K, false);
  group(r.data, K, false);
  r.imm_a = op.n;
  set(p, r, columns * 16 + op.n + 2 * K);
  return nullptr;
}

}  // namespace knit::sim
