// Knit's three kinds of error (see docs/architecture.md):
//  - UserError:    the kernel broke a rule (shape, dtype, buffer, limit). Names the kernel's file and
//                  line, shows the source line with a caret, names the rule and says how to fix it.
//  - RuntimeError: executing the kernel went wrong (out-of-bounds access, read of never-written
//                  memory). Names the instruction and the kernel line that issued it.
//  - InternalError: a bug in Knit itself.
// All derive from knit::Error (a std::runtime_error), so callers can catch one type.
#pragma once

#include <stdexcept>
#include <string>

namespace knit {

// Where in the user's kernel an IR object came from. line == 0 means unknown.
struct SourceLoc {
  std::string file;
  int line = 0;
  int column = 0;
  bool known() const { return line > 0; }
  bool operator==(const SourceLoc&) const = default;
};

enum class ErrorKind { User, Runtime, Internal };

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string rule, std::string message, SourceLoc loc);
  ErrorKind kind() const { return kind_; }
  // Short identifier of the broken rule, e.g. "partition-limit"; tests match on it.
  const std::string& rule() const { return rule_; }
  // The message without location decoration.
  const std::string& message() const { return message_; }
  const SourceLoc& loc() const { return loc_; }

 private:
  ErrorKind kind_;
  std::string rule_;
  std::string message_;
  SourceLoc loc_;
};

// Formats "file:line: error: [rule] message" followed by the source line and a caret when the
// file is readable. This is what Error::what() returns.
std::string format_diagnostic(const char* severity, const std::string& rule, const std::string& message,
                              const SourceLoc& loc);

[[noreturn]] void user_error(const SourceLoc& loc, const std::string& rule, const std::string& message);
[[noreturn]] void runtime_error(const SourceLoc& loc, const std::string& rule, const std::string& message);
[[noreturn]] void internal_error(const std::string& message);

}  // namespace knit
