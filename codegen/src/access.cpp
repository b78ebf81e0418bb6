#include "knit/codegen/access.h"

#include <algorithm>
#include <cstring>

#include "knit/ir/view.h"

namespace knit::codegen {

using namespace knit::ir;

uint64_t hbm_memory(int tensor) { return (uint64_t{3} << 32) | uint32_t(tensor); }

bool is_output_operand(const char* operand) {
  for (const char* out : {"dst", "reduce_res", "dst_scale", "dst_idx", "val_dst", "idx_dst"})
    if (!std::strcmp(operand, out)) return true;
  return false;
}

namespace {

uint64_t on_chip_memory(Buffer b, int core) { return (uint64_t{b == Buffer::sbuf ? 1u : 2u} << 32) | uint32_t(core); }

// [lo, hi) of flat element indices over `dims` (relative to 0).
void hull(const Pattern& dims, int64_t& lo, int64_t& hi) {
  lo = 0, hi = 1;
  for (size_t k = 0; k < dims.size(); ++k) {
    const int64_t span = (dims[k].num - 1) * dims[k].step;
    (span < 0 ? lo : hi) += span;
  }
}

// The whole of a tensor's storage: its allocation on chip, all of it in HBM.
Access whole(const Kernel& k, const MemoryPlan& plan, int tensor) {
  const TensorDecl& t = k.tensor(tensor);
  if (!is_on_chip(t.buffer)) return {hbm_memory(tensor), 0, t.size_bytes()};
  const Allocation& a = *plan.tensors[tensor];
  return {on_chip_memory(t.buffer, a.core), a.offset, a.offset + a.bytes};
}

Access view_access(const Kernel& k, const MemoryPlan& plan, const View& v) {
  Access whole_tensor = whole(k, plan, v.tensor);
  if (!v.is_static()) return whole_tensor;
  const TensorDecl& t = k.tensor(v.tensor);
  const int64_t es = dtype_size(v.dtype);
  if (!is_on_chip(t.buffer)) {
    int64_t lo, hi;
    hull(v.dims, lo, hi);
    return {whole_tensor.memory, std::max<int64_t>(0, (v.offset + lo) * es),
            std::min(whole_tensor.hi, (v.offset + hi - 1) * es + es)};
  }
  const PartitionLayout l = partition_layout(t, v);
  if (!l.inside()) return whole_tensor;  // crosses partitions: be safe
  return {whole_tensor.memory, whole_tensor.lo + l.lo, whole_tensor.lo + l.hi};
}

}  // namespace

std::vector<Access> instruction_accesses(const Kernel& k, const MemoryPlan& plan, const Instruction& inst,
                                         const std::vector<int>& places) {
  std::vector<Access> out;
  for (int id : places) {
    Access a = whole(k, plan, id);
    a.write = true;
    a.operand = "allocation";
    out.push_back(a);
  }
  for_each_view(inst, [&](const char* name, const View& v) {
    Access a = view_access(k, plan, v);
    a.write = is_output_operand(name);
    a.operand = name;
    out.push_back(a);
  });
  // Reads before writes, as the instruction itself does them: a read of bytes it also writes
  // then meets their earlier writer (read after write), not the instruction itself.
  std::stable_partition(out.begin(), out.end(), [](const Access& a) { return !a.write; });
  return out;
}

AccessTracker::Segments::iterator AccessTracker::split(Segments& s, int64_t at) {
  auto it = s.upper_bound(at);
  if (it == s.begin()) return it;
  auto prev = std::prev(it);
  if (prev->first == at) return prev;
  if (prev->second.hi <= at) return it;
  Segment right = prev->second;
  prev->second.hi = at;
  return s.emplace_hint(it, at, right);
}

}  // namespace knit::codegen
