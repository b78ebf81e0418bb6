// Copies the native path may leave to their reader (forward_note in executor.h).
#include "forwarding.h"

#include <map>
#include <string_view>

#include "knit/ir/op_traits.h"

namespace knit::sim {

using namespace knit::ir;

namespace {

// The readers that can take a forwarded operand: element-wise maps whose planner walks an
// input of any strides (Planner::map), and tensor_reduce (its data by rows, then columns).
bool reads_element_wise(const Instruction& inst) {
  return std::holds_alternative<TensorTensor>(inst.op) || std::holds_alternative<TensorScalar>(inst.op) ||
         std::holds_alternative<TensorScalarReduce>(inst.op) || std::holds_alternative<Activation>(inst.op) ||
         std::holds_alternative<ActivationReduce>(inst.op) || std::holds_alternative<TensorCopy>(inst.op) ||
         std::holds_alternative<TensorReduce>(inst.op);
}

// The operands those walk element by element (not a per-partition scalar column or bias).
bool walked_input(std::string_view name) {
  return name == "data" || name == "data1" || name == "data2" || name == "src";
}

// A dma_copy that forwarding may skip: HBM into an on-chip tile the kernel does not pin, the
// same dtype and the same dims on both sides (no cast; a reader's axes mean the same dims of
// the source), every row in range, no indirect rows.
bool plain_load(const Kernel& k, const DmaCopy& op) {
  if (!op.src.indirect.empty() || !op.dst.indirect.empty() || op.oob_mode != OobMode::error) return false;
  const TensorDecl& dst = k.tensor(op.dst.tensor);
  const TensorDecl& src = k.tensor(op.src.tensor);
  return is_on_chip(dst.buffer) && !dst.address && !dst.spill_of && !is_on_chip(src.buffer) && src.is_param &&
         op.dst.dtype == op.src.dtype && op.dst.shape() == op.src.shape();
}

}  // namespace

std::unordered_map<size_t, std::vector<size_t>> forwarded_copies(const Kernel& k) {
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
  std::unordered_map<size_t, std::vector<size_t>> out;
  for (size_t d = 0; d < k.body.size(); ++d) {
    const auto* op = std::get_if<DmaCopy>(&k.body[d].op);
    if (!op || !plain_load(k, *op)) continue;
    // One view in each instruction that names the tile: the copy first, then its readers.
    const Uses& tile = uses[op->dst.tensor];
    if (tile.at.size() < 2 || tile.views != static_cast<int>(tile.at.size()) || tile.at[0] != d) continue;
    bool forwardable = true;
    for (size_t i = 1; i < tile.at.size(); ++i) {
      const Instruction& reader = k.body[tile.at[i]];
      bool reads_as_written = false, direct = true;
      for_each_view(reader, [&](const char* name, const View& v) {
        if (v.tensor == op->dst.tensor) reads_as_written = walked_input(name) && v == op->dst;
        direct = direct && v.indirect.empty();
      });
      forwardable = forwardable && reads_element_wise(reader) && reads_as_written && direct;
    }
    // Straight-line data instructions from the copy to its last reader: each reader runs after
    // the copy would have, with the same register values (so the same concrete views).
    for (size_t i = d + 1; i < tile.at.back(); ++i) forwardable = forwardable && moves_tensor_data(k.body[i].opcode());
    if (forwardable) out[d].assign(tile.at.begin() + 1, tile.at.end());
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
