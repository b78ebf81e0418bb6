// What the C++ kernel compiler and the kernel lint share: the command line Knit compiles a kernel
// file with, a Clang compiler instance for it, and the consumer that turns Clang's diagnostics
// into Knit errors.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <clang/Basic/Diagnostic.h>
#include <clang/Frontend/CompilerInstance.h>

#include "knit/ir/error.h"

namespace knit::frontend {

// Every error and warning Clang reports, with where it points.
class CollectingConsumer : public clang::DiagnosticConsumer {
 public:
  struct Item {
    SourceLoc loc;
    std::string severity, message;
  };
  std::vector<Item> items;

  void HandleDiagnostic(clang::DiagnosticsEngine::Level level, const clang::Diagnostic& info) override;

  // Throws the first error as a Knit user error (its place and source line); any further
  // errors follow the message, each with its place.
  [[noreturn]] void fail(const std::string& path) const;

  // Whether an error says Clang refused the precompiled header (corrupt, or another build's).
  bool refused_pch() const;

  void reset() {
    items.clear();
    clear();
  }
};

// The clang++ 19 driver: $KNIT_CLANGXX, else the one next to the LLVM Knit was built with; a
// user error saying what to install when it is missing.
std::string clang_driver();

// The compiler's flags: the clang++ driver next to LLVM (it finds Clang's own headers and the
// system's C++ library from there), C++20 at -O0, Knit's headers. -O0 because a kernel file is
// code that runs once, to trace (calling into Knit's optimized library): -O1 cost 2.5x the compile
// time of a file with the precompiled header, -O2 more still.
std::vector<std::string> base_flags();

// The command line of one kernel file: base_flags, the precompiled <knit/knit.h> if `pch` is
// not "", the file's folder, the user's `extra` flags.
std::vector<std::string> command_line(const std::string& path, const std::vector<std::string>& extra,
                                      const std::string& pch = "");

// A compiler instance for `args` (a command_line) reporting to `diags`.
std::unique_ptr<clang::CompilerInstance> instance(const std::vector<std::string>& args, CollectingConsumer& diags);

std::string read_file(const std::string& path);

}  // namespace knit::frontend
