// Rolled host loops: the body of an affine_range loop, traced once with its index a symbol, is
// expanded here into every iteration (builder.h, begin_rolled / end_rolled). The expansion
// rebuilds what an unrolled trace makes, in the same order: iteration j's copies of the body's
// tensors, registers and instructions, with the symbol's view terms folded into the offsets
// as start + j * step.
#include <algorithm>

#include "knit/frontend/builder.h"

namespace knit::frontend {
namespace {

struct Remap {
  int symbol;
  int64_t value;
  size_t first_tensor, num_tensors;
  int first_register, num_registers;
  size_t first_instruction, num_instructions;
  size_t iteration;  // 0: the traced iteration itself (tensors, registers, edges stay)

  int tensor(int id) const {
    const auto u = static_cast<size_t>(id);
    return u >= first_tensor && u < first_tensor + num_tensors ? static_cast<int>(u + iteration * num_tensors) : id;
  }
  int reg(int id) const {
    return id >= first_register && id < first_register + num_registers
               ? id + static_cast<int>(iteration) * num_registers
               : id;
  }
  uint32_t edge(uint32_t index) const {
    return index >= first_instruction && index < first_instruction + num_instructions
               ? static_cast<uint32_t>(index + iteration * num_instructions)
               : index;
  }

  void view(ir::View& v) const {
    if (!v.valid()) return;
    v.tensor = tensor(v.tensor);
    for (auto t = v.dynamic.begin(); t != v.dynamic.end();) {
      if (t->reg == symbol) {
        v.offset += t->coeff * value;
        t = v.dynamic.erase(t);
      } else {
        t->reg = reg(t->reg);
        ++t;
      }
    }
    for (ir::View& index : v.indirect) view(index);
  }

  void instruction(ir::Instruction& inst) const {
    ir::for_each_view_mut(inst, [&](ir::View& v) { view(v); });
    std::visit(
        [&](auto& op) {
          if constexpr (!std::is_same_v<std::decay_t<decltype(op)>, std::monostate>) {
            op.fields([&](const char*, auto& value) { register_field(value); });
          }
        },
        inst.op);
    for (uint32_t& e : inst.after) e = edge(e);
  }

  template <class T>
  void register_field(T& value) const {
    if constexpr (std::is_same_v<T, ir::Reg>) {
      if (value.valid()) value.id = reg(value.id);
    } else if constexpr (std::is_same_v<T, ir::IntValue>) {
      if (value.is_reg()) value.reg = reg(value.reg);
    }
  }
};

}  // namespace

int Builder::rolled_serial(int reg) { return reg >= kRolledSymbolBase ? reg - kRolledSymbolBase : -1; }

bool Builder::uses_tensor_since(size_t first, int id) const {
  bool used = false;
  for (size_t i = first; i < kernel_.body.size() && !used; ++i)
    ir::for_each_view(kernel_.body[i], [&](const char*, const ir::View& v) { used = used || v.tensor == id; });
  return used;
}

int Builder::begin_rolled(int64_t start, int64_t stop, int64_t step) {
  if (step <= 0) internal_error("begin_rolled: step must be positive");
  const int serial = rolled_serials_++;
  rolled_.push_back({serial, start, stop, step, kernel_.body.size(), kernel_.tensors.size(), register_count_});
  return kRolledSymbolBase + serial;
}

void Builder::end_rolled() {
  if (rolled_.empty()) internal_error("end_rolled without begin_rolled");
  const RolledLoop loop = rolled_.back();
  rolled_.pop_back();
  const int64_t trips = loop.stop > loop.start ? (loop.stop - loop.start + loop.step - 1) / loop.step : 0;
  Remap map{kRolledSymbolBase + loop.serial,
            loop.start,
            loop.first_tensor,
            kernel_.tensors.size() - loop.first_tensor,
            loop.first_register,
            register_count_ - loop.first_register,
            loop.first_instruction,
            kernel_.body.size() - loop.first_instruction,
            0};
  kernel_.body.reserve(map.first_instruction + map.num_instructions * static_cast<size_t>(trips));
  kernel_.tensors.reserve(map.first_tensor + map.num_tensors * static_cast<size_t>(trips));
  for (int64_t j = 1; j < trips; ++j) {
    map.iteration = static_cast<size_t>(j);
    map.value = loop.start + j * loop.step;
    for (size_t t = 0; t < map.num_tensors; ++t) {
      ir::TensorDecl copy = kernel_.tensors[map.first_tensor + t];
      const bool automatic = auto_named_[map.first_tensor + t];
      ++auto_names_;
      if (automatic) copy.name = "t" + std::to_string(auto_names_);
      kernel_.tensors.push_back(std::move(copy));
      auto_named_.push_back(automatic);
    }
    for (size_t i = 0; i < map.num_instructions; ++i) {
      ir::Instruction copy = kernel_.body[map.first_instruction + i];
      map.instruction(copy);
      kernel_.body.push_back(std::move(copy));
    }
  }
  map.iteration = 0;  // last, as the copies above are made from the traced instructions
  map.value = loop.start;
  for (size_t i = 0; i < map.num_instructions; ++i) map.instruction(kernel_.body[map.first_instruction + i]);
  register_count_ += static_cast<int>(trips > 1 ? (trips - 1) * map.num_registers : 0);
  if (trips <= 1) return;  // the traced iteration is the last one: nothing can escape
  // What the traced iteration made stands for iteration 0 here, but for the last iteration in
  // the kernel's later code: a later use must see the loop unrolled (check_escapes).
  closed_tensor_.resize(kernel_.tensors.size(), 0);
  closed_register_.resize(static_cast<size_t>(register_count_), 0);
  for (size_t t = 0; t < map.num_tensors; ++t) closed_tensor_[map.first_tensor + t] = loop.serial + 1;
  for (int r = 0; r < map.num_registers; ++r)
    closed_register_[static_cast<size_t>(map.first_register + r)] = loop.serial + 1;
}

// An instruction appended after a rolled loop closed must not use the loop's symbol or what its
// traced iteration made (see end_rolled).
void Builder::check_escapes(const ir::Instruction& inst) const {
  auto escape = [&](int serial) { user_error(inst.loc, kRolledEscapeRule, std::to_string(serial)); };
  auto open = [&](int serial) {
    return std::any_of(rolled_.begin(), rolled_.end(), [&](const RolledLoop& l) { return l.serial == serial; });
  };
  // A symbol may offset a view while its loop is open; it is never a device register.
  auto check_register = [&](int reg, bool symbol_allowed) {
    if (const int serial = rolled_serial(reg); serial >= 0) {
      if (!symbol_allowed || !open(serial)) escape(serial);
      return;
    }
    const auto r = static_cast<size_t>(reg);
    if (reg >= 0 && r < closed_register_.size() && closed_register_[r]) escape(closed_register_[r] - 1);
  };
  ir::for_each_view(inst, [&](const char*, const ir::View& v) {
    const auto t = static_cast<size_t>(v.tensor);
    if (t < closed_tensor_.size() && closed_tensor_[t]) escape(closed_tensor_[t] - 1);
    for (const ir::RegTerm& term : v.dynamic) check_register(term.reg, true);
  });
  ir::for_each_field(inst, [&](const char*, const auto& value) {
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<T, ir::Reg>) {
      if (value.valid()) check_register(value.id, false);
    } else if constexpr (std::is_same_v<T, ir::IntValue>) {
      if (value.is_reg()) check_register(value.reg, false);
    }
  });
}

}  // namespace knit::frontend
