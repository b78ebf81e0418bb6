// Text -> IR: a hand-written lexer and recursive-descent parser for the grammar in docs/ir.md.
// Instruction operands are parsed through the same `fields` list the printer walks.
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

#include "knit/ir/text.h"

namespace knit::ir {
namespace {

class Lexer {
 public:
  Lexer(std::string_view text, std::string source) : text_(text), source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& message) const {
    user_error(SourceLoc{source_, line_, col_}, "ir-parse", message);
  }

  void skip_space() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '#') {  // comment to end of line
        while (pos_ < text_.size() && text_[pos_] != '\n') advance();
      } else if (std::isspace(static_cast<unsigned char>(c))) {
        advance();
      } else {
        break;
      }
    }
  }

  bool at_end() {
    skip_space();
    return pos_ >= text_.size();
  }

  char peek() {
    skip_space();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }

  // The very next character, without skipping blanks: for suffixes written without spaces.
  bool next_is(char c) const { return pos_ < text_.size() && text_[pos_] == c; }

  bool accept(char c) {
    if (peek() != c) return false;
    advance();
    return true;
  }

  void expect(char c) {
    if (!accept(c)) fail(std::string("expected '") + c + "'" + found());
  }

  // identifier: [A-Za-z_][A-Za-z0-9_]*
  std::string ident() {
    skip_space();
    const size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_'))
      advance();
    if (start == pos_) fail("expected a name" + found());
    return std::string(text_.substr(start, pos_ - start));
  }

  bool accept_word(std::string_view w) {
    skip_space();
    if (text_.substr(pos_, w.size()) != w) return false;
    const size_t end = pos_ + w.size();
    if (end < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[end])) || text_[end] == '_'))
      return false;
    for (size_t i = 0; i < w.size(); ++i) advance();
    return true;
  }

  void expect_word(std::string_view w) {
    if (!accept_word(w)) fail("expected '" + std::string(w) + "'" + found());
  }

  int64_t integer() {
    skip_space();
    const size_t start = pos_;
    if (pos_ < text_.size() && (text_[pos_] == '-' || text_[pos_] == '+')) advance();
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) advance();
    int64_t v = 0;
    const bool plus = start < text_.size() && text_[start] == '+';
    auto [ptr, ec] = std::from_chars(text_.data() + start + plus, text_.data() + pos_, v);
    if (ec != std::errc() || ptr != text_.data() + pos_) {
      pos_ = start;
      fail("expected an integer" + found());
    }
    return v;
  }

  double number() {
    skip_space();
    const size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '.' ||
                                   text_[pos_] == '-' || text_[pos_] == '+'))
      advance();
    std::string_view tok = text_.substr(start, pos_ - start);
    if (!tok.empty() && tok[0] == '+') tok.remove_prefix(1);  // from_chars takes no '+'; integers allow it
    double v = 0;
    auto [ptr, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
    if (ec != std::errc() || ptr != tok.data() + tok.size() || tok.empty()) {
      pos_ = start;
      fail("expected a number" + found());
    }
    return v;
  }

  std::string quoted() {
    skip_space();
    const int open_line = line_, open_col = col_;
    expect('"');
    std::string s;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      char c = text_[pos_];
      advance();
      if (c == '\\' && pos_ < text_.size()) {
        c = text_[pos_] == 'n' ? '\n' : text_[pos_];
        advance();
      }
      s += c;
    }
    if (pos_ >= text_.size())
      user_error(SourceLoc{source_, open_line, open_col}, "ir-parse", "unterminated string (no closing '\"')");
    advance();
    return s;
  }

  std::string found() {
    skip_space();
    if (pos_ >= text_.size()) return ", found end of text";
    size_t end = pos_;
    while (end < text_.size() && end - pos_ < 16 && !std::isspace(static_cast<unsigned char>(text_[end]))) ++end;
    return ", found '" + std::string(text_.substr(pos_, end - pos_)) + "'";
  }

  int line() const { return line_; }

  // True when only blanks (and a comment) remain on the current line: an instruction's operands
  // and location end with its line.
  bool at_line_end() {
    size_t p = pos_;
    while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t' || text_[p] == '\r')) ++p;
    return p >= text_.size() || text_[p] == '\n' || text_[p] == '#';
  }

 private:
  void advance() {
    if (text_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }

  std::string_view text_;
  std::string source_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
};

class Parser {
 public:
  Parser(std::string_view text, const std::string& source) : lex_(text, source) {}

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
    if (lex_.peek() == '%') {
      do k_.outputs.push_back(tensor_ref());
      while (lex_.accept(','));
    }
    lex_.expect('}');
    if (!lex_.at_end()) lex_.fail("unexpected text after the kernel" + lex_.found());
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

  SourceLoc loc() {
    SourceLoc l;
    if (!lex_.accept('@')) return l;
    l.file = lex_.quoted();
    lex_.expect(':');
    l.line = static_cast<int>(lex_.integer());
    if (lex_.accept(':')) l.column = static_cast<int>(lex_.integer());
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
    if (lex_.next_is('<')) {  // indirect: <dim:index-view>
      lex_.expect('<');
      v.indirect_dim = static_cast<int>(lex_.integer());
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
  void value(E& e) { e = enum_value<E>(field_); }

  template <class Op>
  void operands(Op& op, Instruction& inst) {
    while (!lex_.at_line_end()) {
      const char c = lex_.peek();
      if (c == '@' || !(std::isalpha(static_cast<unsigned char>(c)) || c == '_')) break;
      const std::string name = lex_.ident();
      bool known = name == "name";
      op.fields([&](const char* field, auto&) { known = known || name == field; });
      if (!known) lex_.fail("instruction " + std::string(inst.opcode_name()) + " has no operand '" + name + "'");
      lex_.expect('=');
      if (name == "name") {
        inst.name = lex_.quoted();
        continue;
      }
      op.fields([&](const char* field, auto& v) {
        if (name != field) return;
        field_ = field;
        value(v);
      });
    }
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

  Lexer lex_;
  Kernel k_;
  const char* field_ = "value";  // the operand being parsed, for enum error messages
};

}  // namespace

Kernel parse(std::string_view text, const std::string& source_name) {
  return Parser(text, source_name).kernel();
}

}  // namespace knit::ir
