#include "knit/ir/liveness.h"

#include <algorithm>

#include "knit/ir/op_traits.h"

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

std::vector<LiveRange> live_ranges(const Kernel& k, const std::vector<size_t>& matches) {
  const auto& body = k.body;
  std::vector<LiveRange> live(k.tensors.size());
  for (size_t i = 0; i < body.size(); ++i)
    for_each_view(body[i], [&](const char*, const View& v) {
      LiveRange& r = live[v.tensor];
      if (!r.used()) r.first = static_cast<int64_t>(i);
      r.last = static_cast<int64_t>(i);
    });
  // Blocks in order of their end index: inner blocks before the blocks around them.
  for (size_t e = 0; e < body.size(); ++e) {
    if (op_traits(body[e].opcode()).block != BlockPart::close) continue;
    const auto b = static_cast<int64_t>(matches[e]), end = static_cast<int64_t>(e);
    for (LiveRange& r : live)
      if (r.used() && r.first <= end && r.last >= b) {
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
