// Registers and device control flow for C++ kernels: nl::reg (NKI's VirtualRegister /
// NkiScalar) and nl::dynamic_range / fori_loop / while_loop / if_else. They emit the same
// instructions, in the same order and with the same register numbers, as the Python front end
// (python/knit/_register.py, language.py), so a kernel traces to the same IR in either language.
// Also home of the two helpers every nl::/isa:: call uses: loc_of and detail::append.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <source_location>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "knit/frontend/builder.h"

namespace knit {

inline SourceLoc loc_of(const std::source_location& l) {
  return SourceLoc{l.file_name(), static_cast<int>(l.line()), static_cast<int>(l.column())};
}

namespace detail {
// Appends one instruction, issued at the kernel line `loc`, to the kernel being traced.
template <class Op>
void append(Op op, const SourceLoc& loc, std::string name = "") {
  frontend::append_op<Op>(std::move(op), loc, std::move(name));
}
inline int new_register(const SourceLoc& loc) { return frontend::Builder::current(loc).new_register(); }
}  // namespace detail

namespace nl {

template <class T>
concept integer = std::integral<T> && !std::same_as<T, bool>;

// A 32-bit integer whose value exists only on the device. While tracing it is the affine
// expression constant + sum(coeff * r[reg]): `i * 128 + 64` emits nothing and can offset a view
// directly (ir::add_dynamic), as in Python. Any other operation (/ and % floor like Python's,
// comparisons, bit operations, a product of two registers) emits register_alu into a new
// register. C++ has no way to branch on it: use if_else / while_loop / dynamic_range.
class reg {
 public:
  // An int is a reg known while tracing (no register terms).
  template <integer T>
  reg(T value) : constant_(static_cast<int64_t>(value)) {}
  // Register r<id> itself.
  static reg of(int id) {
    reg r(0);
    r.terms_.push_back({id, 1});
    return r;
  }

  int64_t constant() const { return constant_; }
  const std::vector<ir::RegTerm>& terms() const { return terms_; }
  bool is_static() const { return terms_.empty(); }
  // The register's id when the value is exactly one register (what register_move may write), else -1.
  int id() const { return constant_ == 0 && terms_.size() == 1 && terms_[0].coeff == 1 ? terms_[0].reg : -1; }

  // A register holding the value: the register itself, or a new one computed by register_move and
  // register_alu (emitted at `loc`).
  int materialize(const SourceLoc& loc) const {
    if (id() >= 0) return id();
    using ir::IntValue;
    auto alu = [&](int dst, int a, ir::AluOp op, IntValue b) {
      knit::detail::append(ir::RegisterAlu{ir::Reg{dst}, IntValue::of_reg(a), op, b}, loc);
    };
    const int dst = knit::detail::new_register(loc);
    knit::detail::append(ir::RegisterMove{ir::Reg{dst}, IntValue::of(constant_)}, loc);
    for (const ir::RegTerm& t : terms_) {
      int term = t.reg;
      if (t.coeff != 1) {
        term = knit::detail::new_register(loc);
        alu(term, t.reg, ir::AluOp::multiply, IntValue::of(t.coeff));
      }
      alu(dst, dst, ir::AluOp::add, IntValue::of_reg(term));
    }
    return dst;
  }
  // The value as an instruction operand: an immediate when known while tracing, else a register.
  ir::IntValue operand(const SourceLoc& loc) const {
    return is_static() ? ir::IntValue::of(constant_) : ir::IntValue::of_reg(materialize(loc));
  }

  friend reg operator+(const reg& a, const reg& b) { return a.plus(b, 1); }
  friend reg operator-(const reg& a, const reg& b) { return a.plus(b, -1); }
  friend reg operator-(const reg& a) { return reg(0).plus(a, -1); }
  // this * k: the affine case of operator*, which emits nothing.
  reg scaled(int64_t k) const {
    reg r(constant_ * k);
    if (k != 0)
      for (ir::RegTerm t : terms_) r.terms_.push_back({t.reg, t.coeff * k});
    return r;
  }

 private:
  // this + sign * b. Terms keep first-use order and drop at coefficient 0, exactly as the Python
  // front end's dict does, so a materialized expression emits the same instructions.
  reg plus(const reg& b, int64_t sign) const {
    reg r = *this;
    r.constant_ += sign * b.constant_;
    for (const ir::RegTerm& t : b.terms_) {
      auto it = std::find_if(r.terms_.begin(), r.terms_.end(), [&](const ir::RegTerm& x) { return x.reg == t.reg; });
      if (it == r.terms_.end()) r.terms_.push_back({t.reg, sign * t.coeff});
      else it->coeff += sign * t.coeff;
    }
    std::erase_if(r.terms_, [](const ir::RegTerm& t) { return t.coeff == 0; });
    return r;
  }
  int64_t constant_ = 0;
  std::vector<ir::RegTerm> terms_;
};

namespace detail {
// An operand of a register operator, with the kernel line the operator is written on: operator
// functions cannot take a defaulted std::source_location, but converting an operand to this type
// can (as nl::Index does for subscripts).
struct reg_arg {
  reg value;
  SourceLoc loc;
  reg_arg(const reg& r, std::source_location l = std::source_location::current()) : value(r), loc(loc_of(l)) {}
  template <integer T>
  reg_arg(T v, std::source_location l = std::source_location::current()) : value(v), loc(loc_of(l)) {}
};

// dst = a op b into a new register. dst is numbered before the operands are materialized, as in
// the Python front end.
inline reg alu(ir::AluOp op, const reg_arg& a, const reg_arg& b) {
  const int dst = knit::detail::new_register(a.loc);
  knit::detail::append(ir::RegisterAlu{ir::Reg{dst}, a.value.operand(a.loc), op, b.value.operand(a.loc)}, a.loc);
  return reg::of(dst);
}
}  // namespace detail

// reg * int stays affine; reg * reg is a register_alu multiply.
inline reg operator*(detail::reg_arg a, detail::reg_arg b) {
  if (b.value.is_static()) return a.value.scaled(b.value.constant());
  if (a.value.is_static()) return b.value.scaled(a.value.constant());
  return detail::alu(ir::AluOp::multiply, a, b);
}
// Floor division and modulo (Python's // and %, not C++'s truncation): -7 / 2 == -4, -7 % 2 == 1.
inline reg operator/(detail::reg_arg a, detail::reg_arg b) { return detail::alu(ir::AluOp::divide, a, b); }
inline reg operator%(detail::reg_arg a, detail::reg_arg b) { return detail::alu(ir::AluOp::mod, a, b); }
// Comparisons give 1 or 0 in a new register. == and != too: unlike Python, a C++ reg is never a
// dictionary key, so they need not keep identity semantics.
inline reg operator<(detail::reg_arg a, detail::reg_arg b) { return detail::alu(ir::AluOp::less, a, b); }
inline reg operator<=(detail::reg_arg a, detail::reg_arg b) { return detail::alu(ir::AluOp::less_equal, a, b); }
inline reg operator>(detail::reg_arg a, detail::reg_arg b) { return detail::alu(ir::AluOp::greater, a, b); }
inline reg operator>=(detail::reg_arg a, detail::reg_arg b) { return detail::alu(ir::AluOp::greater_equal, a, b); }
inline reg operator==(detail::reg_arg a, detail::reg_arg b) { return detail::alu(ir::AluOp::equal, a, b); }
inline reg operator!=(detail::reg_arg a, detail::reg_arg b) { return detail::alu(ir::AluOp::not_equal, a, b); }
inline reg operator&(detail::reg_arg a, detail::reg_arg b) { return detail::alu(ir::AluOp::bitwise_and, a, b); }
inline reg operator|(detail::reg_arg a, detail::reg_arg b) { return detail::alu(ir::AluOp::bitwise_or, a, b); }
inline reg operator^(detail::reg_arg a, detail::reg_arg b) { return detail::alu(ir::AluOp::bitwise_xor, a, b); }
inline reg operator<<(detail::reg_arg a, detail::reg_arg b) { return detail::alu(ir::AluOp::left_shift, a, b); }
// Arithmetic (sign-extending) shift.
inline reg operator>>(detail::reg_arg a, detail::reg_arg b) { return detail::alu(ir::AluOp::right_shift, a, b); }

// ---- device control flow: each body is traced once and runs on the device ------------------

// for (i = start; i < stop; i += step) body(i), with i a register. start / stop may be ints or
// regs (bounds read once, at loop entry); step is a positive int.
template <class Body>
  requires std::invocable<Body&, reg>
void dynamic_range(const reg& start, const reg& stop, int64_t step, Body&& body,
                   std::source_location l = std::source_location::current()) {
  const SourceLoc loc = loc_of(l);
  const int iv = knit::detail::new_register(loc);
  knit::detail::append(ir::Loop{ir::Reg{iv}, start.operand(loc), stop.operand(loc), step}, loc);
  body(reg::of(iv));
  knit::detail::append(ir::End{}, loc);
}
template <class Body>
  requires std::invocable<Body&, reg>
void dynamic_range(const reg& start, const reg& stop, Body&& body,
                   std::source_location l = std::source_location::current()) {
  dynamic_range(start, stop, 1, body, l);
}
template <class Body>
  requires std::invocable<Body&, reg>
void dynamic_range(const reg& stop, Body&& body, std::source_location l = std::source_location::current()) {
  dynamic_range(0, stop, 1, body, l);
}

// NKI's fori_loop(lower, upper, body): dynamic_range with the bounds first. (To unroll at trace
// time, write an ordinary C++ loop.)
template <class Body>
  requires std::invocable<Body&, reg>
void fori_loop(const reg& lower, const reg& upper, Body&& body, int64_t step = 1,
               std::source_location l = std::source_location::current()) {
  dynamic_range(lower, upper, step, body, l);
}

// Runs body(cond) while the condition register is non-zero (checked before each iteration);
// body returns the next condition (a reg or an int). Returns the condition register.
template <class Body>
  requires std::invocable<Body&, reg>
reg while_loop(const reg& init, Body&& body, std::source_location l = std::source_location::current()) {
  static_assert(std::is_convertible_v<std::invoke_result_t<Body&, reg>, reg>,
                "the while_loop body must return the next condition (a nl::reg or an int)");
  const SourceLoc loc = loc_of(l);
  const int cond = knit::detail::new_register(loc);
  knit::detail::append(ir::RegisterMove{ir::Reg{cond}, init.operand(loc)}, loc);
  knit::detail::append(ir::While{ir::Reg{cond}}, loc);
  const reg next = body(reg::of(cond));
  knit::detail::append(ir::RegisterMove{ir::Reg{cond}, next.operand(loc)}, loc);
  knit::detail::append(ir::End{}, loc);
  return reg::of(cond);
}

// A device branch on cond != 0; else_fn is optional. A cond known while tracing (an int) picks
// the branch at trace time, as NKI does.
template <class Then, class Else = std::nullptr_t>
  requires std::invocable<Then&>
void if_else(const reg& cond, Then&& then_fn, Else&& else_fn = nullptr,
             std::source_location l = std::source_location::current()) {
  constexpr bool has_else = !std::is_null_pointer_v<std::remove_cvref_t<Else>>;
  if (cond.is_static()) {
    if (cond.constant() != 0) then_fn();
    else if constexpr (has_else) else_fn();
    return;
  }
  const SourceLoc loc = loc_of(l);
  knit::detail::append(ir::If{ir::Reg{cond.materialize(loc)}}, loc);
  then_fn();
  if constexpr (has_else) {
    knit::detail::append(ir::Else{}, loc);
    else_fn();
  }
  knit::detail::append(ir::End{}, loc);
}

}  // namespace nl
}  // namespace knit
