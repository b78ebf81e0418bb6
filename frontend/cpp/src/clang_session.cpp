#include "clang_session.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <clang/Frontend/CompilerInvocation.h>
#include <clang/Frontend/Utils.h>

#include "knit/frontend/cpp_compiler.h"

namespace knit::frontend {

void CollectingConsumer::HandleDiagnostic(clang::DiagnosticsEngine::Level level, const clang::Diagnostic& info) {
  DiagnosticConsumer::HandleDiagnostic(level, info);
  if (level < clang::DiagnosticsEngine::Warning) return;
  llvm::SmallString<256> text;
  info.FormatDiagnostic(text);
  Item item;
  item.severity = level >= clang::DiagnosticsEngine::Error ? "error" : "warning";
  item.message = text.str().str();
  if (info.getLocation().isValid() && info.hasSourceManager()) {
    const clang::PresumedLoc p = info.getSourceManager().getPresumedLoc(info.getLocation());
    if (p.isValid()) item.loc = {p.getFilename(), static_cast<int>(p.getLine()), static_cast<int>(p.getColumn())};
  }
  items.push_back(std::move(item));
}

void CollectingConsumer::fail(const std::string& path) const {
  const Item* first = nullptr;
  std::vector<std::string> others;  // where the further errors are (the message quotes the first's line)
  for (const Item& i : items) {
    if (i.severity != "error") continue;
    if (!first) first = &i;
    else
      others.push_back((i.loc.file == first->loc.file ? "" : i.loc.file + ":") + std::to_string(i.loc.line) + ":" +
                       std::to_string(i.loc.column));
  }
  if (!first) user_error(SourceLoc{path, 0, 0}, "cpp-compile", "Clang could not compile " + path);
  std::string message = first->message + " (Clang";
  if (!others.empty()) {
    message += "; " + std::to_string(others.size()) + " more error(s), at";
    for (size_t k = 0; k < others.size() && k < 8; ++k) message += (k ? ", " : " ") + others[k];
    if (others.size() > 8) message += ", ...";
  }
  message += "; fix the C++ source)";
  user_error(first->loc.known() ? first->loc : SourceLoc{path, 0, 0}, "cpp-compile", message);
}

std::string clang_driver() {
  const char* set = std::getenv("KNIT_CLANGXX");
  const std::string driver = set && *set ? set : KNIT_CLANGXX;
  if (!std::filesystem::exists(driver))
    user_error(SourceLoc{}, "cpp-toolchain",
               "C++ kernel files need Clang 19's driver and headers, and " + driver +
                   " does not exist; install them (Debian: apt-get install clang-19 libclang-cpp19-dev) or "
                   "point $KNIT_CLANGXX at a clang++ 19");
  return driver;
}

std::vector<std::string> base_flags() {
  std::vector<std::string> args{clang_driver(), "-std=c++20", "-O0", "-fPIC", "-Wno-unused-command-line-argument"};
  for (const std::string& dir : knit_include_dirs()) args.push_back("-I" + dir);
  return args;
}

std::vector<std::string> command_line(const std::string& path, const std::vector<std::string>& extra,
                                      const std::string& pch) {
  std::vector<std::string> args = base_flags();
  if (!pch.empty()) {
    args.push_back("-include-pch");
    args.push_back(pch);
  }
  args.push_back("-I" + std::filesystem::path(path).parent_path().string());
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back("-c");
  args.push_back(path);
  return args;
}

bool CollectingConsumer::refused_pch() const {
  for (const Item& i : items)
    if (i.severity == "error" &&
        (i.message.find("PCH") != std::string::npos || i.message.find("precompiled") != std::string::npos ||
         i.message.find("AST file") != std::string::npos))
      return true;
  return false;
}

std::unique_ptr<clang::CompilerInstance> instance(const std::vector<std::string>& args, CollectingConsumer& diags) {
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  clang::CreateInvocationOptions options;
  options.Diags = clang::CompilerInstance::createDiagnostics(new clang::DiagnosticOptions, &diags,
                                                             /*ShouldOwnClient=*/false);
  std::shared_ptr<clang::CompilerInvocation> invocation = clang::createInvocation(argv, options);
  if (!invocation) diags.fail(args.back());
  invocation->getDiagnosticOpts().ShowCarets = false;  // also silences Clang's "N errors generated." on stderr
  auto ci = std::make_unique<clang::CompilerInstance>();
  ci->setInvocation(std::move(invocation));
  ci->createDiagnostics(&diags, /*ShouldOwnClient=*/false);
  return ci;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace knit::frontend
