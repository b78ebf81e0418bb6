// Copies the native path may leave to their reader (forward_note in executor.h).
#include "forwarding.h"

#include <map>
#include <string_view>

#include "knit/ir/op_traits.h"

namespace knit::sim {

using namespace knit::ir;

namespace {

// The readers that can take a forwarded operand: element-wise maps whose planner walks an
// input of any strides (Planner::map).
bool reads_element_wise(const Instruction& inst) {
  return std::holds_alternative<TensorTensor>(inst.op) || std::holds_alternative<TensorScalar>(inst.op) ||
         std::holds_alternative<Activation>(inst.op) || std::holds_alternative<TensorCopy>(inst.op);
}

// The operands those walk element by element (not a per-partition scalar column or bias).
bool walked_input(std::string_view name) { return name == "data" || name == "data1" || name == "data2" || name == "src"; }

// A dma_copy that forwarding may skip: HBM into an on-chip tile the kernel does not pin, the
// same dtype on both sides (no cast), every row in range, no indirect rows.
bool plain_load(const Kernel& k, const DmaCopy& op) {
  if (!op.src.indirect.empty() || !op.dst.indirect.empty() || op.oob_mode != OobMode::error) return false;
  const TensorDecl& dst = k.tensor(op.dst.tensor);
  const TensorDecl& src = k.tensor(op.src.tensor);
  return is_on_chip(dst.buffer) && !dst.address && !dst.spill_of && !is_on_chip(src.buffer) && src.is_param &&
         op.dst.dtype == op.src.dtype;
}

}  // namespace

std::unordered_map<size_t, size_t> forwarded_copies(const Kernel& k) {
  // Every instruction that names each tensor, and how many of its views do.
  struct Uses {
    std::vector<size_t> at;
    int views = 0;
  };
  std::map<int, Uses> uses;
  for (size_t pc = 0; pc < k.body.size(); ++pc)
    for_each_view(k.body[pc], [&](const char*, const View& v) {
      Uses& u = uses[v.tensor];
      if (u.at.empty() || u.at.back() != pc) u.at.push_back(pc);
      ++u.views;
    });
  std::unordered_map<size_t, size_t> out;
  for (size_t d = 0; d < k.body.size(); ++d) {
    const auto* op = std::get_if<DmaCopy>(&k.body[d].op);
    if (!op || !plain_load(k, *op)) continue;
    const Uses& tile = uses[op->dst.tensor];
    if (tile.at.size() != 2 || tile.views != 2 || tile.at[0] != d) continue;
    const size_t c = tile.at[1];
    const Instruction& reader = k.body[c];
    if (!reads_element_wise(reader)) continue;
    bool reads_as_written = false, in_between_plain = true, direct = true;
    for_each_view(reader, [&](const char* name, const View& v) {
      if (v.tensor == op->dst.tensor) reads_as_written = walked_input(name) && v == op->dst;
      direct = direct && v.indirect.empty();
    });
    // Straight-line data instructions in between: the reader runs right after the copy would
    // have, with the same register values (so the same concrete views).
    for (size_t i = d + 1; i < c; ++i) in_between_plain = in_between_plain && moves_tensor_data(k.body[i].opcode());
    if (reads_as_written && in_between_plain && direct) out[d] = c;
  }
  return out;
}

bool substitute_view(Instruction& reader, const View& from, const View& to) {
  bool found = false;
  for_each_view_mut(reader, [&](View& v) {
    if (v == from) {
      v = to;
      found = true;
    }
  });
  return found;
}

}  // namespace knit::sim
