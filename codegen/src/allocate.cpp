#include "knit/codegen/allocate.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <sstream>

#include "knit/codegen/capacity_error.h"
#include "knit/ir/verifier.h"

namespace knit::codegen {

using namespace knit::ir;

namespace {

int64_t align_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

[[noreturn]] void out_of_space(const Kernel& k, const std::vector<LiveRange>& live, int id, const Allocation& want,
                               const std::vector<int>& alive, const MemoryPlan& plan, int64_t capacity,
                               const std::string& hint) {
  const TensorDecl& t = k.tensor(id);
  std::ostringstream msg;
  int64_t used = 0;
  for (int o : alive) used += plan.tensors[o]->bytes;
  msg << "tensor '" << t.name << "' needs " << want.bytes << " bytes per partition but " << to_string(t.buffer)
      << " has no free range that large: " << capacity << " bytes per partition on " << to_string(k.target) << ", "
      << used << " held by the tensors alive here:";
  for (int o : alive) {
    const TensorDecl& a = k.tensor(o);
    msg << "\n    '" << a.name << "' " << plan.tensors[o]->bytes << " bytes at byte " << plan.tensors[o]->offset << " ("
        << a.loc.file << ':' << a.loc.line << ')';
  }
  msg << "\n  "
      << (hint.empty() ? "Use smaller tiles or let tensors die earlier (allocate them inside the loop that uses them)."
                       : hint)
      << "\n  To see this point's memory map, catch the error and call err.memory_map.save_svg(path), or run "
         "`knit memory FILE::KERNEL --svg OUT.svg`.";
  Allocation failing = want;
  failing.offset = -1;
  throw CapacityError(t.loc, msg.str(), placements(k, plan, live),
                      Placement{id, t.name, t.buffer, failing, live[id], t.loc}, alive, capacity);
}

// The first offset where `a` overlaps none of `same`, trying the start and just past each of
// them, those at or after `cursor` first (next fit); -1 when none is below `capacity`.
int64_t first_fit(const Allocation& a, const std::vector<int>& same, const MemoryPlan& plan, int64_t cursor,
                  int64_t align, int64_t capacity) {
  std::vector<int64_t> candidates{0, cursor};
  for (int o : same) candidates.push_back(align_up(plan.tensors[o]->offset + plan.tensors[o]->bytes, align));
  std::sort(candidates.begin(), candidates.end());
  std::stable_partition(candidates.begin(), candidates.end(), [&](int64_t off) { return off >= cursor; });
  for (int64_t off : candidates) {
    Allocation trial = a;
    trial.offset = off;
    if (off + a.bytes > capacity) continue;
    if (std::none_of(same.begin(), same.end(), [&](int o) { return plan.tensors[o]->overlaps(trial); })) return off;
  }
  return -1;
}

}  // namespace

std::vector<Placement> placements(const Kernel& k, const MemoryPlan& plan, const std::vector<LiveRange>& live) {
  std::vector<Placement> out;
  for (size_t id = 0; id < plan.tensors.size() && id < live.size(); ++id) {
    const std::optional<Allocation>& a = plan.tensors[id];
    if (!a || !live[id].used()) continue;
    const TensorDecl& t = k.tensors[id];
    out.push_back(Placement{static_cast<int>(id), t.name, t.buffer, *a, live[id], t.loc});
  }
  return out;
}

MemoryPlan allocate(const Kernel& k, const std::vector<LiveRange>& live, const std::string& hint) {
  AllocationFailure failure;
  MemoryPlan plan = try_allocate(k, live, failure);
  if (failure.tensor >= 0) {
    const TensorDecl& t = k.tensor(failure.tensor);
    const TargetInfo info = target_info(k.target);
    out_of_space(k, live, failure.tensor, failure.want, failure.alive, plan,
                 t.buffer == Buffer::sbuf ? info.sbuf_partition_bytes : info.psum_partition_bytes, hint);
  }
  return plan;
}

MemoryPlan try_allocate(const Kernel& k, const std::vector<LiveRange>& live, AllocationFailure& failure,
                        const Evict& evict) {
  failure = {};
  const TargetInfo info = target_info(k.target);
  MemoryPlan plan;
  plan.tensors.resize(k.tensors.size());
  const std::vector<int> core = tensor_cores(k);
  std::vector<int> order;
  for (size_t id = 0; id < k.tensors.size(); ++id)
    if (is_on_chip(k.tensors[id].buffer) && live[id].used()) order.push_back(static_cast<int>(id));
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return live[a].first < live[b].first; });

  std::vector<int> pins;
  for (int id : order)  // pins first: automatic placements must avoid them
    if (const auto& pin = k.tensor(id).address) {
      pins.push_back(id);
      const TensorDecl& t = k.tensor(id);
      plan.tensors[id] = Allocation{
          core[id], (*pin)[0], t.partitions(), (*pin)[1], t.partition_elements() * dtype_size(t.dtype), true};
    }
  std::vector<int> alive;                            // allocated tensors whose live range has not ended
  std::map<std::pair<bool, int>, int64_t> next_fit;  // (sbuf?, core) -> end of the latest placement
  for (int id : order) {
    const TensorDecl& t = k.tensor(id);
    const bool sbuf = t.buffer == Buffer::sbuf;
    std::erase_if(alive, [&](int o) { return live[o].last < live[id].first; });
    std::vector<int> same;  // alive tensors in the same buffer of the same core
    for (int o : alive)
      if (k.tensor(o).buffer == t.buffer && core[o] == core[id]) same.push_back(o);
    // A pin holds its bytes for its whole live range, also before its first use.
    for (int o : pins)
      if (o != id && live[o].first > live[id].first && live[o].overlaps(live[id]) && k.tensor(o).buffer == t.buffer &&
          core[o] == core[id])
        same.push_back(o);

    Allocation a;
    a.core = core[id];
    plan.cores = std::max(plan.cores, a.core + 1);
    a.partitions = t.partitions();
    a.bytes = t.partition_elements() * dtype_size(t.dtype);
    const int64_t capacity = sbuf ? info.sbuf_partition_bytes : info.psum_partition_bytes;
    const int64_t align = sbuf ? kSbufAlign : info.psum_bank_bytes;
    if (t.address) {
      a.partition = (*t.address)[0];
      a.offset = (*t.address)[1];
      a.pinned = true;
    } else {
      // Candidates: the start, and just past each live neighbour. Next fit: the first candidate
      // at or after where the previous tensor of this buffer ended, else the first from the
      // start. Not reusing the bytes just freed lets the next tile's load overlap the last use
      // of the previous one (rotating buffers) instead of waiting for it.
      const int64_t cursor = align_up(next_fit[{t.buffer == Buffer::sbuf, a.core}], align);
      a.offset = first_fit(a, same, plan, cursor, align, capacity);
      // Each tensor `evict` names leaves the rest of this placement; try again without it.
      for (int out; a.offset < 0 && evict && (out = evict(id, same)) >= 0;) {
        std::erase(same, out);
        std::erase(alive, out);
        a.offset = first_fit(a, same, plan, cursor, align, capacity);
      }
      next_fit[{t.buffer == Buffer::sbuf, a.core}] = a.offset + a.bytes;
      if (a.offset < 0) {
        failure = {id, a, same};
        return plan;
      }
    }
    plan.tensors[id] = a;
    alive.push_back(id);
    int64_t& high = sbuf ? plan.sbuf_high_water : plan.psum_high_water;
    high = std::max(high, a.offset + a.bytes);
  }
  return plan;
}

}  // namespace knit::codegen
