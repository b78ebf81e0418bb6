#include "knit/ir/liveness.h"

#include <algorithm>
#include <string_view>
#include <utility>
#include <vector>

#include "knit/ir/op_traits.h"
#include "knit/ir/view.h"

namespace knit::ir {

std::vector<size_t> match_blocks(const Kernel& k) {
  const auto& body = k.body;
  std::vector<size_t> match(body.size(), 0);
  std::vector<size_t> open, else_of(body.size(), 0);
  for (size_t i = 0; i < body.size(); ++i) {
    switch (op_traits(body[i].opcode()).block) {
      case BlockPart::open: open.push_back(i); break;
      case BlockPart::middle:
        if (open.empty()) internal_error("match_blocks: kernel not verified (else without if)");
        else_of[open.back()] = i;
        break;
      case BlockPart::close: {
        if (open.empty()) internal_error("match_blocks: kernel not verified (end without block)");
        const size_t opener = open.back();
        open.pop_back();
        if (else_of[opener]) {
          match[opener] = else_of[opener];
          match[else_of[opener]] = i;
        } else {
          match[opener] = i;
        }
        match[i] = opener;
        break;
      }
      case BlockPart::none: break;
    }
  }
  return match;
}

namespace {

// A matmul that does not accumulate stores every dst element too (and sets its flags).
bool matmul_overwrites(const Instruction& inst) {
  bool off = false;
  for_each_field(inst, [&](const char*, const auto& value) {
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, Accumulate>) off = value == Accumulate::off;
  });
  return off;
}

}  // namespace

bool overwrites_whole(const Kernel& k, const Instruction& inst, int id) {
  if (!op_traits(inst.opcode()).writes_whole_dst && !matmul_overwrites(inst)) return false;
  const View whole = full_view(k.tensor(id), id);
  bool dst_is_whole = false, other_use = false, indirect = false;
  for_each_view(inst, [&](const char* name, const View& v) {
    indirect = indirect || !v.indirect.empty();  // an indirect DMA may skip rows
    if (v.tensor != id) return;
    if (std::string_view(name) == "dst" && v == whole) dst_is_whole = true;
    else other_use = true;
  });
  return dst_is_whole && !other_use && !indirect;
}

namespace {

// Per partition of an on-chip tensor, the stretches of its elements a sequence of writes has
// stored (merged intervals). Only dense writes are tracked (each partition's elements one
// stretch): anything else answers "not covered", which only costs the fill.
class Coverage {
 public:
  explicit Coverage(const TensorDecl& t)
      : per_partition_(t.partition_elements()), stored_(static_cast<size_t>(t.num_elements() / per_partition_)) {}
  // Records a static view's elements; false when they are not one stretch per partition.
  bool add(const View& v) {
    if (v.dims.empty() || per_partition_ <= 0) return false;
    int64_t len = 1;  // elements per partition, when the free dims are dense
    for (size_t d = v.dims.size(); d-- > 1;) {
      if (v.dims[d].num == 1) continue;
      if (v.dims[d].step != len) return false;
      len *= v.dims[d].num;
    }
    const int64_t parts = v.dims[0].num;
    if (parts > 1 && v.dims[0].step != per_partition_) return false;
    const int64_t first = v.offset / per_partition_, lo = v.offset % per_partition_;
    if (v.offset < 0 || lo + len > per_partition_ || first + parts > static_cast<int64_t>(stored_.size())) return false;
    for (int64_t p = first; p < first + parts; ++p) merge(stored_[static_cast<size_t>(p)], lo, lo + len);
    return true;
  }
  bool whole() const {
    return std::all_of(stored_.begin(), stored_.end(), [&](const auto& spans) {
      return spans.size() == 1 && spans[0].first == 0 && spans[0].second == per_partition_;
    });
  }

 private:
  static void merge(std::vector<std::pair<int64_t, int64_t>>& spans, int64_t lo, int64_t hi) {
    spans.push_back({lo, hi});
    std::sort(spans.begin(), spans.end());
    std::vector<std::pair<int64_t, int64_t>> merged;
    for (const auto& s : spans)
      if (!merged.empty() && s.first <= merged.back().second)
        merged.back().second = std::max(merged.back().second, s.second);
      else merged.push_back(s);
    spans = std::move(merged);
  }
  int64_t per_partition_;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> stored_;
};

// Longest stretch of instructions written_whole_before_read looks through: a tile written in
// pieces is written by the next few instructions.
constexpr size_t kCoverageWindow = 64;

}  // namespace

bool written_whole_before_read(const Kernel& k, size_t first, int id) {
  const TensorDecl& t = k.tensor(id);
  if (!is_on_chip(t.buffer)) return false;
  Coverage stored(t);
  for (size_t i = first; i < k.body.size() && i < first + kCoverageWindow; ++i) {
    const Instruction& inst = k.body[i];
    if (op_traits(inst.opcode()).role == OpRole::block) return false;
    const bool writes_whole = op_traits(inst.opcode()).writes_whole_dst;
    bool indirect = false, other_use = false;
    const View* dst = nullptr;
    for_each_view(inst, [&](const char* name, const View& v) {
      indirect = indirect || !v.indirect.empty();
      if (v.tensor != id) return;
      if (std::string_view(name) == "dst" && !dst) dst = &v;
      else other_use = true;
    });
    if (!dst && !other_use) continue;
    if (other_use || indirect || !writes_whole || !dst->is_static() || dst->dtype != t.dtype) return false;
    if (!stored.add(*dst)) return false;
    if (stored.whole()) return true;
  }
  return false;
}

namespace {

// Block nesting depth of each body index (a block's own opener, else and end at the outer depth).
std::vector<int> block_depths(const Kernel& k) {
  std::vector<int> depth(k.body.size(), 0);
  int d = 0;
  for (size_t i = 0; i < k.body.size(); ++i) {
    const BlockPart part = op_traits(k.body[i].opcode()).block;
    if (part == BlockPart::close || part == BlockPart::middle) --d;
    depth[i] = d;
    if (part == BlockPart::open || part == BlockPart::middle) ++d;
  }
  return depth;
}

// A tensor whose first use overwrites it whole carries no value into that use, so a block whose
// body holds all of its uses need not keep it from one iteration to the next. Not when an `else`
// of a block around the first use falls inside the range: the other branch would use a tensor
// its own branch never placed.
bool iteration_local(const Kernel& k, const std::vector<int>& depth, const LiveRange& r, int id) {
  const auto f = static_cast<size_t>(r.first);
  if (!overwrites_whole(k, k.body[f], id)) return false;
  for (auto i = f + 1; i <= static_cast<size_t>(r.last); ++i)
    if (op_traits(k.body[i].opcode()).block == BlockPart::middle && depth[i] < depth[f]) return false;
  return true;
}

}  // namespace

std::vector<LiveRange> live_ranges(const Kernel& k, const std::vector<size_t>& matches) {
  const auto& body = k.body;
  std::vector<LiveRange> live(k.tensors.size());
  for (size_t i = 0; i < body.size(); ++i)
    for_each_view(body[i], [&](const char*, const View& v) {
      LiveRange& r = live[v.tensor];
      if (!r.used()) r.first = static_cast<int64_t>(i);
      r.last = static_cast<int64_t>(i);
    });
  const std::vector<int> depth = block_depths(k);
  std::vector<bool> local(k.tensors.size(), false);
  for (size_t id = 0; id < live.size(); ++id)
    local[id] = live[id].used() && iteration_local(k, depth, live[id], static_cast<int>(id));
  // Blocks in order of their end index: inner blocks before the blocks around them. A block
  // that only partly overlaps a range widens it to the whole block; one that holds the whole
  // range does too, unless the tensor is iteration-local.
  for (size_t e = 0; e < body.size(); ++e) {
    if (op_traits(body[e].opcode()).block != BlockPart::close) continue;
    const auto b = static_cast<int64_t>(matches[e]), end = static_cast<int64_t>(e);
    for (size_t id = 0; id < live.size(); ++id) {
      LiveRange& r = live[id];
      if (!r.used() || r.first > end || r.last < b) continue;
      if (local[id] && b < r.first && r.last < end) continue;
      r.first = std::min(r.first, b);
      r.last = std::max(r.last, end);
    }
  }
  return live;
}

std::vector<int> tensor_cores(const Kernel& k) {
  std::vector<int> core(k.tensors.size(), -1);
  const bool synchronizes = std::any_of(k.body.begin(), k.body.end(),
                                        [](const Instruction& inst) { return is_core_sync(inst.opcode()); });
  int current = 0;
  for (const Instruction& inst : k.body) {
    if (const auto* p = std::get_if<Program>(&inst.op)) current = static_cast<int>(p->id);
    for_each_view(inst, [&](const char*, const View& v) {
      if (core[v.tensor] < 0) core[v.tensor] = synchronizes ? current : 0;
    });
  }
  for (int& c : core) c = std::max(c, 0);
  return core;
}

}  // namespace knit::ir
