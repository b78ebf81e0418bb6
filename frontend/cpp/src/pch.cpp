#include "pch.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/FrontendActions.h>
#include <llvm/Config/llvm-config.h>

#include "clang_session.h"
#include "knit/frontend/cpp_compiler.h"
#include "knit/jit/disk_cache.h"

namespace knit::frontend {

namespace fs = std::filesystem;

namespace {

// Everything the precompiled header depends on: Knit's and LLVM's versions, the flags, and the
// contents of every header in Knit's include folders (a superset of what knit.h includes, and
// cheap to read: a change to any of them builds a new one).
std::string pch_key(const std::vector<std::string>& flags) {
  std::string text = "knit " KNIT_VERSION "\nLLVM " LLVM_VERSION_STRING "\n";
  for (const std::string& f : flags) text += f + "\n";
  for (const std::string& dir : knit_include_dirs()) {
    std::vector<std::string> headers;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
      if (it->is_regular_file() && it->path().extension() == ".h") headers.push_back(it->path().string());
    std::sort(headers.begin(), headers.end());
    for (const std::string& h : headers) text += "file " + h + "\n" + read_file(h) + "\n";
  }
  return codegen::content_hash(text);
}

std::string knit_header() {
  for (const std::string& dir : knit_include_dirs())
    if (fs::exists(fs::path(dir) / "knit" / "knit.h")) return (fs::path(dir) / "knit" / "knit.h").string();
  return "";
}

// Builds the header into `path` (an existing file is kept); "" if it could not. It is built under
// a name of this process's own, then renamed: concurrent builders each write a whole file and the
// last rename wins; readers never see a partial one.
std::string build_pch(const fs::path& path, const std::vector<std::string>& base_flags, const std::string& header) {
  std::error_code ec;
  if (fs::exists(path)) {
    fs::last_write_time(path, fs::file_time_type::clock::now(), ec);  // used: the cache's eviction order
    return path.string();
  }
  fs::create_directories(path.parent_path(), ec);
  const std::string tmp = path.string() + ".tmp." + std::to_string(::getpid());
  std::vector<std::string> args(base_flags);
  // Templates the header instantiates are compiled into the PCH once, not in every kernel file.
  for (const char* a : {"-fpch-instantiate-templates", "-x", "c++-header"}) args.push_back(a);
  args.push_back(header);
  CollectingConsumer diags;
  auto ci = instance(args, diags);
  ci->getFrontendOpts().OutputFile = tmp;  // (the driver's -o does not reach an in-process invocation)
  clang::GeneratePCHAction action;
  const bool ok = ci->ExecuteAction(action) && !ci->getDiagnostics().hasErrorOccurred();
  if (ok) fs::rename(tmp, path, ec);
  if (!ok || ec) {
    fs::remove(tmp, ec);
    return "";  // a folder that cannot be written is only slower
  }
  return path.string();
}

// The build's folder of precompiled headers (KNIT_PREBUILT_PCH_DIR, a source build's
// build/pch), or "" (an installed package, or KNIT_PREBUILT_PCH=0).
std::string prebuilt_dir() {
  const char* use = std::getenv("KNIT_PREBUILT_PCH");
  return use && std::string(use) == "0" ? "" : KNIT_PREBUILT_PCH_DIR;
}

// The header's file name for these flags, in the build's folder or the cache's.
std::string pch_name(const std::vector<std::string>& base_flags) { return pch_key(base_flags) + ".pch"; }

}  // namespace

std::string knit_pch(const std::vector<std::string>& base_flags) {
  const std::string header = knit_header();
  if (header.empty()) return "";
  const std::string name = pch_name(base_flags);
  if (const std::string dir = prebuilt_dir(); !dir.empty() && fs::exists(fs::path(dir) / name))
    return (fs::path(dir) / name).string();
  const std::string cache = codegen::cache_directory();
  if (cache.empty() || codegen::cache_unwritable(cache)) return "";
  const fs::path path = fs::path(cache) / "pch" / name;
  std::error_code ec;
  if (!fs::exists(path)) {  // building it takes seconds: not into a folder that cannot take it
    fs::create_directories(path.parent_path(), ec);
    if (ec || ::access(path.parent_path().c_str(), W_OK) != 0) {
      codegen::note_cache_unwritable(cache, ec ? ec.value() : errno);
      return "";
    }
  }
  return build_pch(path, base_flags, header);
}

std::string precompile_header() {
  const std::string dir = prebuilt_dir(), header = knit_header();
  if (dir.empty() || header.empty()) return "";
  const std::vector<std::string> flags = base_flags();
  const std::string built = build_pch(fs::path(dir) / pch_name(flags), flags, header);
  // The build's folder keeps only the header of the current sources (18 MB each).
  std::error_code ec;
  if (!built.empty())
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
      if (it->path().extension() == ".pch" && it->path() != fs::path(built)) fs::remove(it->path(), ec);
  return built;
}

void discard_pch(const std::string& path) {
  std::error_code ec;
  fs::remove(path, ec);
}

}  // namespace knit::frontend
