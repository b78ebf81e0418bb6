// The disk-cache key of a kernel file's compiled object: a hash of everything that changes the
// object (Knit's and LLVM's versions, the target, the command line, and the contents of every
// file the compile reads besides system headers).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <clang/Frontend/Utils.h>

#include "clang_session.h"

namespace knit::codegen {
class DiskObjectCache;
class OrcJit;
}  // namespace knit::codegen

namespace knit::frontend {

// Which files a compile reads is only known by preprocessing the file (tens of milliseconds,
// most of a warm start). So the list is kept in the cache too, in a manifest for the command
// line, with each file's content hash and the modification time of each folder an #include
// could have searched. While every file still has its recorded contents and no folder changed
// (no header added, removed or renamed that could now be found first), preprocessing would read
// the same files again, and the key is computed without it; otherwise the file is preprocessed
// and the manifest rewritten. A command line with no manifest at all was never compiled, so
// there is nothing to look up: nullopt, and the caller compiles with Dependencies watching and
// keys the object by key_of_compile, which writes the first manifest. "" if preprocessing
// failed (`diags` says why).
std::optional<std::string> kernel_file_key(const std::vector<std::string>& args, const codegen::OrcJit& jit,
                                           codegen::DiskObjectCache& cache, CollectingConsumer& diags);
// The key by a manifest's text (read back from the cache, so outside bytes: tests/fuzz feeds it),
// if every file and folder it records is as recorded; nothing otherwise.
std::optional<std::string> key_by_manifest(const std::string& head, llvm::StringRef manifest);
std::string key_of_compile(const std::vector<std::string>& args, const codegen::OrcJit& jit,
                           codegen::DiskObjectCache& cache, const std::vector<std::string>& files);

// Collects the files a compile reads besides system headers (the kernel file, its own headers,
// Knit's headers), in reading order. Not the precompiled header itself: its name is already a
// hash of what it was built from, and it is on the command line.
class Dependencies : public clang::DependencyCollector {
 public:
  bool needSystemDependencies() override { return false; }
  bool sawDependency(llvm::StringRef file, bool from_module, bool is_system, bool is_module_file,
                     bool is_missing) override {
    return !is_module_file &&
           DependencyCollector::sawDependency(file, from_module, is_system, is_module_file, is_missing);
  }
};

}  // namespace knit::frontend
