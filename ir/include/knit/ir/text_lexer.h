// The lexer of Knit's text forms: the tile IR's (ir/src/parser.cpp) and the engine program's,
// which is a kernel's IR text followed by its schedule (codegen/src/engine_program_text.cpp).
// Blanks and `#` comments between tokens are skipped; errors are user errors (rule "ir-parse")
// at the source name, line and column.
#pragma once

#include <cctype>
#include <charconv>
#include <string>
#include <string_view>

#include "knit/ir/error.h"
#include "knit/ir/ir.h"

namespace knit::ir {

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
    if (end < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[end])) || text_[end] == '_')) return false;
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

// Parses one kernel (`kernel "name" target=... { ... }`) at the lexer's position and leaves the
// lexer after its closing brace: for text forms that extend the IR's.
Kernel parse_kernel(Lexer& lex);

}  // namespace knit::ir
