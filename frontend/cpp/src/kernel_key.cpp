#include "kernel_key.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>

#include <clang/Frontend/FrontendActions.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/Support/MemoryBuffer.h>

#include "knit/jit/object_cache.h"
#include "knit/jit/orc_jit.h"

namespace knit::frontend {

namespace fs = std::filesystem;

namespace {

std::optional<std::vector<std::string>> preprocessed_dependencies(const std::vector<std::string>& args,
                                                                  CollectingConsumer& diags) {
  auto ci = instance(args, diags);
  auto deps = std::make_shared<Dependencies>();
  ci->addDependencyCollector(deps);
  clang::PreprocessOnlyAction preprocess;
  if (!ci->ExecuteAction(preprocess) || ci->getDiagnostics().hasErrorOccurred()) return std::nullopt;
  return deps->getDependencies();
}

// Each file's contents enter the key by their hash, the same hash the manifest records, so a
// file is read and hashed once per start.
std::string file_hash(const std::string& path) { return codegen::content_hash(read_file(path)); }

std::string key_of(const std::string& head, const std::vector<std::string>& files,
                   const std::vector<std::string>& hashes) {
  std::string text = head;
  for (size_t i = 0; i < files.size(); ++i) text += "file " + files[i] + " " + hashes[i] + "\n";
  return codegen::content_hash(text);
}

// The folders an #include of the compile could have searched: those the command line names
// (-I, -iquote, -isystem, -idirafter, joined to the flag or after it) and each read file's own
// (quoted includes look there first). Their modification times change when an entry is added,
// removed or renamed. (The compiler's own system folders are not followed, as system headers
// are not part of the key.)
std::set<std::string> searched_folders(const std::vector<std::string>& args, const std::vector<std::string>& files) {
  std::set<std::string> dirs;
  for (size_t i = 0; i < args.size(); ++i)
    for (const char* flag : {"-I", "-iquote", "-isystem", "-idirafter"})
      if (args[i] == flag && i + 1 < args.size()) dirs.insert(args[i + 1]);
      else if (args[i].size() > std::string_view(flag).size() && args[i].starts_with(flag))
        dirs.insert(args[i].substr(std::string_view(flag).size()));
  for (const std::string& f : files) dirs.insert(fs::path(f).parent_path().string());
  return dirs;
}

std::optional<int64_t> modified_ns(const std::string& dir) {
  std::error_code ec;
  const auto t = fs::last_write_time(dir, ec);
  if (ec) return std::nullopt;
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// A folder changed less than this before the manifest would be written may change again within
// the same timestamp tick unseen: the manifest then records nothing to trust (see manifest_of).
constexpr int64_t kSettledNs = 1'000'000'000;

// Manifest lines: "file <content hash> <path>" per read file, in the order of the key, then
// "dir <modification ns> <path>" per searched folder. Just "seen" when a folder is too new to
// record: the command line has been compiled, but its next start preprocesses. (Not empty: the
// cache does not keep empty entries.)
std::string manifest_of(const std::vector<std::string>& args, const std::vector<std::string>& files,
                        const std::vector<std::string>& hashes) {
  std::string text;
  for (size_t i = 0; i < files.size(); ++i) text += "file " + hashes[i] + " " + files[i] + "\n";
  const int64_t now =
      std::chrono::duration_cast<std::chrono::nanoseconds>(fs::file_time_type::clock::now().time_since_epoch()).count();
  for (const std::string& dir : searched_folders(args, files)) {
    const std::optional<int64_t> t = modified_ns(dir);
    if (!t || now - *t < kSettledNs) return "seen\n";
    text += "dir " + std::to_string(*t) + " " + dir + "\n";
  }
  return text;
}

std::string manifest_key(const std::string& head) { return codegen::content_hash("manifest\n" + head); }

}  // namespace

std::optional<std::string> key_by_manifest(const std::string& head, llvm::StringRef manifest) {
  std::vector<std::string> files, hashes;
  std::istringstream in(manifest.str());
  for (std::string kind, stamp, path; in >> kind >> stamp && in.get() == ' ' && std::getline(in, path);) {
    if (kind == "file") {
      std::error_code ec;  // (a path too long for the file system is a stale manifest, not an exception)
      if (!fs::is_regular_file(path, ec) || file_hash(path) != stamp) return std::nullopt;
      files.push_back(path);
      hashes.push_back(stamp);
    } else if (kind == "dir") {
      const std::optional<int64_t> t = modified_ns(path);
      if (!t || std::to_string(*t) != stamp) return std::nullopt;
    } else {
      return std::nullopt;  // not a manifest this version wrote
    }
  }
  if (files.empty()) return std::nullopt;
  return key_of(head, files, hashes);
}

namespace {

// The key of the files a compile read, recording them as the manifest. Sorted: preprocessing
// lists the kernel file first, a compile after the precompiled header's inputs.
std::string record(const std::string& head, codegen::DiskObjectCache& cache, const std::vector<std::string>& args,
                   std::vector<std::string> files) {
  std::sort(files.begin(), files.end());
  std::vector<std::string> hashes;
  for (const std::string& f : files) hashes.push_back(file_hash(f));
  cache.store(manifest_key(head), manifest_of(args, files, hashes));
  return key_of(head, files, hashes);
}

std::string head_of(const std::vector<std::string>& args, const codegen::OrcJit& jit) {
  std::string head = "knit " KNIT_VERSION " " + std::string(codegen::kEntryFormat) +
                     "\nLLVM " LLVM_VERSION_STRING "\n" + jit.target_triple() + ";" + jit.cpu() + "\n";
  for (const std::string& a : args) head += a + "\n";
  return head;
}

}  // namespace

std::optional<std::string> kernel_file_key(const std::vector<std::string>& args, const codegen::OrcJit& jit,
                                           codegen::DiskObjectCache& cache, CollectingConsumer& diags) {
  const std::string head = head_of(args, jit);
  auto manifest = cache.load(manifest_key(head));
  if (!manifest) return std::nullopt;  // a command line never compiled: nothing to look up
  if (std::optional<std::string> key = key_by_manifest(head, manifest->getBuffer())) return *key;
  const std::optional<std::vector<std::string>> files = preprocessed_dependencies(args, diags);
  if (!files) return "";
  return record(head, cache, args, *files);
}

std::string key_of_compile(const std::vector<std::string>& args, const codegen::OrcJit& jit,
                           codegen::DiskObjectCache& cache, const std::vector<std::string>& files) {
  return record(head_of(args, jit), cache, args, files);
}

}  // namespace knit::frontend
