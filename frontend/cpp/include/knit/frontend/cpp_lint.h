// Kernel lint: static checks over a C++ kernel file's AST (Clang), for what will fail or be slow
// once the kernel is traced, reported with source ranges before anything runs.
#pragma once

#include <string>
#include <vector>

#include "knit/ir/error.h"

namespace knit::frontend {

struct LintFinding {
  std::string severity;              // "error": tracing will fail; "warning": it may fail, or be slow
  std::string rule;                  // partition-dim, psum-bank, device-branch
  std::string message;               // what is wrong and how to fix it
  SourceLoc begin;                   // the flagged expression's first character
  int end_line = 0, end_column = 0;  // and its last (same file)
};

// Parses `path` as Knit compiles it (extra_args added) and runs every check on the code in the
// file itself (not its headers). A file that does not compile is a user error, as in load().
std::vector<LintFinding> lint_file(const std::string& path, const std::vector<std::string>& extra_args = {});

}  // namespace knit::frontend
