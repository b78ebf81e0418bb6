// Text -> IR: a recursive-descent parser for the grammar in docs/ir.md over the lexer of
// knit/ir/text_lexer.h. Instruction operands are parsed through the same `fields` list the
// printer walks.
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

#include "knit/ir/text.h"
#include "knit/ir/text_lexer.h"

namespace knit::ir {
namespace {

class Parser {
 public:
  explicit Parser(Lexer& lex) : lex_(lex) {}

  Kernel kernel() {
    lex_.expect_word("kernel");
    k_.name = lex_.quoted();
    lex_.expect_word("target");
    lex_.expect('=');
    k_.target = enum_value<Target>("target");
    lex_.expect('{');
    while (true) {
      if (lex_.accept_word("param")) declaration(true);
      else if (lex_.accept_word("tensor")) declaration(false);
      else if (lex_.accept_word("return")) break;
      else instruction();
    }
    check_later_edges();
    if (lex_.peek() == '%') {
      do k_.outputs.push_back(tensor_ref());
      while (lex_.accept(','));
    }
    lex_.expect('}');
    return std::move(k_);
  }

 private:
  template <class E>
  E enum_value(const char* what) {
    const std::string name = lex_.ident();
    auto v = parse_enum<E>(name);
    if (!v) lex_.fail("unknown " + std::string(what) + " '" + name + "'");
    return *v;
  }

  int tensor_ref() {
    lex_.expect('%');
    const int64_t id = lex_.integer();
    if (id < 0 || id >= static_cast<int64_t>(k_.tensors.size()))
      lex_.fail("tensor %" + std::to_string(id) + " is not declared");
    return static_cast<int>(id);
  }

  // A line or column number of a location, at least `min` and within int.
  int location_number(int64_t min, const char* rule) {
    const int64_t n = lex_.integer();
    if (n < min || n > std::numeric_limits<int>::max()) lex_.fail(rule);
    return static_cast<int>(n);
  }

  SourceLoc loc() {
    SourceLoc l;
    if (!lex_.accept('@')) return l;
    l.file = lex_.quoted();
    lex_.expect(':');
    // Line 0 means "unknown", which the printer writes as no location at all: accepting it here
    // would lose the file name on the next print.
    l.line = location_number(1, "source lines count from 1; leave the @ location out when it is unknown");
    if (lex_.accept(':')) l.column = location_number(0, "source columns count from 1 (0: unknown)");
    return l;
  }

  void declaration(bool is_param) {
    lex_.expect('%');
    const int64_t id = lex_.integer();
    if (id != static_cast<int64_t>(k_.tensors.size()))
      lex_.fail("tensors must be declared in order: expected %" + std::to_string(k_.tensors.size()));
    TensorDecl t;
    t.is_param = is_param;
    t.name = lex_.quoted();
    t.buffer = enum_value<Buffer>("buffer");
    t.dtype = enum_value<DType>("dtype");
    lex_.expect('[');
    if (!lex_.accept(']')) {
      do t.shape.push_back(lex_.integer());
      while (lex_.accept(','));
      lex_.expect(']');
    }
    for (int64_t s : t.shape)
      if (s < 1) lex_.fail("tensor dims must be >= 1");
    if (lex_.accept_word("address")) {
      lex_.expect('=');
      lex_.expect('(');
      const int64_t p = lex_.integer();
      lex_.expect(',');
      const int64_t f = lex_.integer();
      lex_.expect(')');
      t.address = std::array<int64_t, 2>{p, f};
    }
    if (lex_.accept_word("spill_of")) {
      lex_.expect('=');
      lex_.expect('%');
      const int64_t of = lex_.integer();
      if (of < 0 || of >= static_cast<int64_t>(k_.tensors.size())) lex_.fail("spill_of must name an earlier tensor");
      t.spill_of = static_cast<int>(of);
    }
    t.loc = loc();
    if (is_param) k_.params.push_back(static_cast<int>(k_.tensors.size()));
    k_.tensors.push_back(std::move(t));
  }

  Pattern pattern() {
    Pattern p;
    lex_.expect('[');
    if (lex_.accept(']')) return p;
    do {
      lex_.expect('[');
      ApDim d;
      d.step = lex_.integer();
      lex_.expect(',');
      d.num = lex_.integer();
      lex_.expect(']');
      p.push_back(d);
    } while (lex_.accept(','));
    lex_.expect(']');
    return p;
  }

  View view() {
    View v;
    v.tensor = tensor_ref();
    v.dtype = k_.tensors[v.tensor].dtype;
    if (lex_.accept(':')) v.dtype = enum_value<DType>("dtype");
    lex_.expect('@');
    v.offset = lex_.integer();
    while (lex_.next_is('+') || lex_.next_is('-')) {  // dynamic terms: +coeff*rN
      RegTerm t;
      t.coeff = lex_.integer();
      lex_.expect('*');
      t.reg = reg();
      v.dynamic.push_back(t);
    }
    v.dims = pattern();
    if (lex_.next_is('<')) {  // indirect: <dim:index-view> (rows) or <cols[pattern]:index-view>
      lex_.expect('<');
      if (lex_.accept_word("cols")) {
        v.gather = pattern();
        if (v.gather.empty()) lex_.fail("an .indirect() view needs a non-empty gather pattern after 'cols'");
      } else {
        v.indirect_dim = static_cast<int>(lex_.integer());
        if (v.indirect_dim < 0) lex_.fail("the indirect dim must be >= 0");
      }
      lex_.expect(':');
      v.indirect.push_back(view());
      lex_.expect('>');
    }
    return v;
  }

  // rN
  int reg() {
    const std::string word = lex_.ident();
    int64_t id = -1;
    if (word.size() > 1 && word[0] == 'r') {
      auto [ptr, ec] = std::from_chars(word.data() + 1, word.data() + word.size(), id);
      if (ec != std::errc() || ptr != word.data() + word.size()) id = -1;
    }
    if (id < 0 || id > 1'000'000) lex_.fail("expected a register such as r0, found '" + word + "'");
    return static_cast<int>(id);
  }

  void value(View& v) { v = view(); }
  void value(std::optional<View>& v) {
    if (lex_.accept_word("none")) v.reset();
    else v = view();
  }
  void value(Operand& o) {
    if (lex_.accept_word("none")) o = Operand::none();
    else if (lex_.peek() == '%') o = Operand::of(view());
    else o = Operand::immediate(lex_.number());
  }
  void value(bool& b) {
    if (lex_.accept_word("true")) b = true;
    else if (lex_.accept_word("false")) b = false;
    else lex_.fail("expected true or false" + lex_.found());
  }
  void value(double& d) { d = lex_.number(); }
  void value(int64_t& i) { i = lex_.integer(); }
  void value(IntList& l) {
    l.clear();
    lex_.expect('[');
    if (lex_.accept(']')) return;
    do l.push_back(lex_.integer());
    while (lex_.accept(','));
    lex_.expect(']');
  }
  void value(Pattern& p) { p = pattern(); }
  void value(ViewList& l) {
    l.clear();
    lex_.expect('[');
    if (lex_.accept(']')) return;
    do l.push_back(view());
    while (lex_.accept(','));
    lex_.expect(']');
  }
  void value(std::vector<double>& l) {
    l.clear();
    lex_.expect('[');
    if (lex_.accept(']')) return;
    do l.push_back(lex_.number());
    while (lex_.accept(','));
    lex_.expect(']');
  }
  void value(Reg& r) { r.id = reg(); }
  void value(IntValue& v) {
    if (lex_.peek() == 'r') v = IntValue::of_reg(reg());
    else v = IntValue::of(lex_.integer());
  }
  template <class E>
    requires std::is_enum_v<E>
  void value(E& e) {
    e = enum_value<E>(field_);
  }

  template <class Op>
  void operands(Op& op, Instruction& inst) {
    while (!lex_.at_line_end()) {
      const char c = lex_.peek();
      if (c == '@' || !(std::isalpha(static_cast<unsigned char>(c)) || c == '_')) break;
      const std::string name = lex_.ident();
      bool known = name == "name" || name == "after";
      op.fields([&](const char* field, auto&) { known = known || name == field; });
      if (!known) lex_.fail("instruction " + std::string(inst.opcode_name()) + " has no operand '" + name + "'");
      lex_.expect('=');
      if (name == "name") {
        inst.name = lex_.quoted();
        continue;
      }
      if (name == "after") {
        after_edges(inst);
        continue;
      }
      op.fields([&](const char* field, auto& v) {
        if (name != field) return;
        field_ = field;
        value(v);
      });
    }
  }

  // after=[i,j,...]: body indices of other instructions (scheduling edges; a later one is a
  // backward with_schedule edge, checked against the body's size when the body is complete).
  void after_edges(Instruction& inst) {
    lex_.expect('[');
    do {
      const int64_t i = lex_.integer();
      if (i < 0 || i == static_cast<int64_t>(k_.body.size()))
        lex_.fail("after=[...] names body index " + std::to_string(i) +
                  "; name another instruction's index (counting from 0)");
      inst.after.push_back(static_cast<uint32_t>(i));
    } while (lex_.accept(','));
    lex_.expect(']');
  }

  void check_later_edges() const {
    for (size_t n = 0; n < k_.body.size(); ++n)
      for (uint32_t i : k_.body[n].after)
        if (i >= k_.body.size())
          user_error(k_.body[n].loc, "ir-parse",
                     "after=[...] names body index " + std::to_string(i) + ", but the kernel has " +
                         std::to_string(k_.body.size()) + " instructions");
  }

  void instruction() {
    const int line = lex_.line();
    const std::string name = lex_.ident();
    auto opcode = parse_opcode(name);
    if (!opcode) lex_.fail("unknown instruction '" + name + "'");
    Instruction inst;
    inst.op = default_op(*opcode);
    std::visit(
        [&](auto& op) {
          if constexpr (!std::is_same_v<std::decay_t<decltype(op)>, std::monostate>) operands(op, inst);
        },
        inst.op);
    inst.loc = loc();
    (void)line;
    k_.body.push_back(std::move(inst));
  }

  Lexer& lex_;
  Kernel k_;
  const char* field_ = "value";  // the operand being parsed, for enum error messages
};

}  // namespace

Kernel parse_kernel(Lexer& lex) { return Parser(lex).kernel(); }

Kernel parse(std::string_view text, const std::string& source_name) {
  Lexer lex(text, source_name);
  Kernel k = parse_kernel(lex);
  if (!lex.at_end()) lex.fail("unexpected text after the kernel" + lex.found());
  return k;
}

}  // namespace knit::ir
