#include "knit/ir/error.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace knit {
namespace {

// Returns line `line` (1-based) of `file`, or "" when the file cannot be read. A location comes
// from user input (IR text, a cache entry), so only a regular file is read, and at most
// kMaxScan bytes of it: a location naming /dev/zero or a FIFO must not hang or exhaust memory.
std::string read_source_line(const std::string& file, int line) {
  constexpr size_t kMaxScan = size_t{64} << 20, kMaxLine = 4096;
  std::error_code ec;
  if (file.empty() || !std::filesystem::is_regular_file(file, ec)) return {};
  std::ifstream in(file, std::ios::binary);
  std::string text;
  size_t scanned = 0;
  int at = 1;
  for (char c; at <= line && scanned < kMaxScan && in.get(c); ++scanned) {
    if (c == '\n') {
      if (at++ == line) return text;
      text.clear();
    } else if (at == line && text.size() < kMaxLine) {
      text += c;
    }
  }
  return at == line && !text.empty() ? text : std::string();
}

}  // namespace

std::string format_diagnostic(const char* severity, const std::string& rule, const std::string& message,
                              const SourceLoc& loc) {
  std::ostringstream out;
  if (loc.known()) {
    out << (loc.file.empty() ? "<unknown>" : loc.file) << ':' << loc.line;
    if (loc.column > 0) out << ':' << loc.column;
    out << ": ";
  }
  out << severity << ": ";
  if (!rule.empty()) out << '[' << rule << "] ";
  out << message;
  if (loc.known()) {
    std::string src = read_source_line(loc.file, loc.line);
    if (!src.empty()) {
      out << "\n  " << src << "\n  ";
      // Point at the column when known, else at the first non-blank character.
      size_t col = loc.column > 0 ? static_cast<size_t>(loc.column - 1) : src.find_first_not_of(" \t");
      if (col == std::string::npos || col > src.size()) col = 0;
      for (size_t i = 0; i < col; ++i) out << (src[i] == '\t' ? '\t' : ' ');
      out << '^';
    }
  }
  return out.str();
}

static const char* severity_of(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::User: return "error";
    case ErrorKind::Runtime: return "runtime error";
    case ErrorKind::Internal: return "internal error (a bug in Knit, please report it)";
  }
  return "error";
}

Error::Error(ErrorKind kind, std::string rule, std::string message, SourceLoc loc)
    : std::runtime_error(format_diagnostic(severity_of(kind), rule, message, loc)),
      kind_(kind),
      rule_(std::move(rule)),
      message_(std::move(message)),
      loc_(std::move(loc)) {}

void user_error(const SourceLoc& loc, const std::string& rule, const std::string& message) {
  throw Error(ErrorKind::User, rule, message, loc);
}
void runtime_error(const SourceLoc& loc, const std::string& rule, const std::string& message) {
  throw Error(ErrorKind::Runtime, rule, message, loc);
}
void internal_error(const std::string& message) { throw Error(ErrorKind::Internal, "internal", message, SourceLoc{}); }

}  // namespace knit
