// IR -> text. Each operand prints as name=value; operands equal to their NKI default are left
// out, so the text shows what the kernel chose. Grammar: docs/ir.md.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "knit/ir/op_traits.h"
#include "knit/ir/text.h"

namespace knit::ir {
namespace {

void print_quoted(std::ostream& out, std::string_view s) {
  out << '"';
  for (char c : s) {
    if (c == '"' || c == '\\') out << '\\' << c;
    else if (c == '\n') out << "\\n";
    else out << c;
  }
  out << '"';
}

void print_number(std::ostream& out, double v) {
  if (std::isnan(v)) {
    out << (std::signbit(v) ? "-nan" : "nan");
    return;
  }
  if (std::isinf(v)) {
    out << (v < 0 ? "-inf" : "inf");
    return;
  }
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);  // shortest text that reads back exactly
  out << std::string_view(buf, res.ptr - buf);
}

void print_pattern(std::ostream& out, const Pattern& p) {
  out << '[';
  for (size_t k = 0; k < p.size(); ++k) out << (k ? "," : "") << '[' << p[k].step << ',' << p[k].num << ']';
  out << ']';
}

void print_shape(std::ostream& out, const std::vector<int64_t>& shape) {
  out << '[';
  for (size_t k = 0; k < shape.size(); ++k) out << (k ? ", " : "") << shape[k];
  out << ']';
}

void print_loc(std::ostream& out, const SourceLoc& loc) {
  if (!loc.known()) return;
  out << " @ ";
  print_quoted(out, loc.file);
  out << ':' << loc.line;
  if (loc.column > 0) out << ':' << loc.column;
}

class Printer {
 public:
  Printer(const Kernel& k, std::ostream& out) : k_(k), out_(out) {}

  // %id[:dtype]@offset[+coeff*rN...][pattern][<dim:index-view>] (DMA rows) or
  // [<cols[gather-pattern]:index-view>] (compute .indirect() columns)
  void view(const View& v) {
    out_ << '%' << v.tensor;
    if (v.tensor >= 0 && v.tensor < static_cast<int>(k_.tensors.size()) && v.dtype != k_.tensors[v.tensor].dtype)
      out_ << ':' << to_string(v.dtype);
    out_ << '@' << v.offset;
    for (const RegTerm& t : v.dynamic) out_ << (t.coeff < 0 ? "-" : "+") << std::abs(t.coeff) << "*r" << t.reg;
    print_pattern(out_, v.dims);
    if (const View* index = v.index_view()) {
      out_ << '<';
      if (v.indexes_columns()) {
        out_ << "cols";
        print_pattern(out_, v.gather);
      } else {
        out_ << v.indirect_dim;
      }
      out_ << ':';
      view(*index);
      out_ << '>';
    }
  }

  void value(const View& v) { view(v); }
  void value(const std::optional<View>& v) {
    if (v) view(*v);
    else out_ << "none";
  }
  void value(const Operand& o) {
    if (o.is_tile()) view(o.tile);
    else if (o.is_imm()) print_number(out_, o.imm);
    else out_ << "none";
  }
  void value(bool b) { out_ << (b ? "true" : "false"); }
  void value(double d) { print_number(out_, d); }
  void value(int64_t i) { out_ << i; }
  void value(const IntList& l) {
    out_ << '[';
    for (size_t k = 0; k < l.size(); ++k) out_ << (k ? "," : "") << l[k];
    out_ << ']';
  }
  void value(const Pattern& p) { print_pattern(out_, p); }
  void value(const ViewList& l) {
    out_ << '[';
    for (size_t k = 0; k < l.size(); ++k) {
      if (k) out_ << ", ";
      view(l[k]);
    }
    out_ << ']';
  }
  void value(const std::vector<double>& l) {
    out_ << '[';
    for (size_t k = 0; k < l.size(); ++k) {
      if (k) out_ << ',';
      print_number(out_, l[k]);
    }
    out_ << ']';
  }
  void value(const Reg& r) { out_ << 'r' << r.id; }
  void value(const IntValue& v) {
    if (v.is_reg()) out_ << 'r' << v.reg;
    else out_ << v.imm;
  }
  template <class E>
    requires std::is_enum_v<E>
  void value(E e) {
    out_ << to_string(e);
  }

  void instruction(const Instruction& inst) {
    out_ << inst.opcode_name();
    std::visit(
        [&](const auto& op) {
          using Op = std::decay_t<decltype(op)>;
          if constexpr (!std::is_same_v<Op, std::monostate>) {
            // Walk the op and a default-constructed one side by side; print what differs.
            Op defaults;
            size_t idx = 0;
            std::vector<const void*> default_ptrs;
            defaults.fields([&](const char*, auto& dv) { default_ptrs.push_back(&dv); });
            for_each_field(inst, [&](const char* name, const auto& v) {
              using T = std::decay_t<decltype(v)>;
              const T& dv = *static_cast<const T*>(default_ptrs[idx++]);
              if (same(v, dv)) return;
              out_ << ' ' << name << '=';
              value(v);
            });
          }
        },
        inst.op);
    if (!inst.name.empty()) {
      out_ << " name=";
      print_quoted(out_, inst.name);
    }
    if (!inst.after.empty()) {
      out_ << " after=[";
      for (size_t k = 0; k < inst.after.size(); ++k) out_ << (k ? "," : "") << inst.after[k];
      out_ << ']';
    }
    print_loc(out_, inst.loc);
  }

  void kernel() {
    out_ << "kernel ";
    print_quoted(out_, k_.name);
    out_ << " target=" << to_string(k_.target) << " {\n";
    for (size_t id = 0; id < k_.tensors.size(); ++id) {
      const TensorDecl& t = k_.tensors[id];
      out_ << "  " << (t.is_param ? "param" : "tensor") << " %" << id << ' ';
      print_quoted(out_, t.name);
      out_ << ' ' << to_string(t.buffer) << ' ' << to_string(t.dtype);
      print_shape(out_, t.shape);
      if (t.address) out_ << " address=(" << (*t.address)[0] << ", " << (*t.address)[1] << ')';
      if (t.spill_of) out_ << " spill_of=%" << *t.spill_of;
      print_loc(out_, t.loc);
      out_ << '\n';
    }
    int depth = 0;  // block nesting, shown as indentation
    for (const Instruction& inst : k_.body) {
      const BlockPart part = op_traits(inst.opcode()).block;
      if (part == BlockPart::middle || part == BlockPart::close) depth = std::max(0, depth - 1);
      out_ << std::string(2 + 2 * depth, ' ');
      instruction(inst);
      out_ << '\n';
      if (part == BlockPart::open || part == BlockPart::middle) ++depth;
    }
    out_ << "  return";
    for (size_t i = 0; i < k_.outputs.size(); ++i) out_ << (i ? ", %" : " %") << k_.outputs[i];
    out_ << "\n}\n";
  }

 private:
  // Equality for "is this the default?": -0.0 differs from 0.0 (its sign must survive the round
  // trip) and two NaNs count as the same (so a NaN default is not printed).
  template <class T>
  static bool same(const T& a, const T& b) {
    if constexpr (std::is_same_v<T, double>)
      return (a == b && std::signbit(a) == std::signbit(b)) || (std::isnan(a) && std::isnan(b));
    else if constexpr (std::is_same_v<T, Operand>) return a.kind == b.kind && a.tile == b.tile && same(a.imm, b.imm);
    else return a == b;
  }

  const Kernel& k_;
  std::ostream& out_;
};

}  // namespace

std::string print(const Kernel& kernel) {
  std::ostringstream out;
  Printer(kernel, out).kernel();
  return out.str();
}

std::string print(const Kernel& kernel, const Instruction& inst) {
  std::ostringstream out;
  Printer(kernel, out).instruction(inst);
  return out.str();
}

std::string print(const Kernel& kernel, const View& view) {
  std::ostringstream out;
  Printer(kernel, out).value(view);
  return out.str();
}

}  // namespace knit::ir
