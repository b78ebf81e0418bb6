// Knit's in-process C++ kernel compiler: compiles a .cpp file written against the header-only
// API (<knit/knit.h>) with Clang's libraries, loads it with Knit's ORC JIT and traces the
// kernels it marks with KNIT_KERNEL(fn) into the IR. No build system, no process spawned.
//
// Compiler diagnostics become knit::Error (user errors) with the file, line, column and source
// line of the first error and Clang's full report. Compiled objects go through Knit's disk
// cache (codegen/jit/disk_cache.h), keyed by the contents of the file and of every non-system
// header it includes, the flags, the host CPU and the Knit and LLVM versions: a second load of
// an unchanged file skips Clang entirely.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "knit/ir/ir.h"

namespace knit::codegen {
class DiskObjectCache;
class OrcJit;
}  // namespace knit::codegen

namespace knit::frontend {

class CollectingConsumer;  // Clang's diagnostics (src/clang_session.h)

struct CppKernelInfo {
  std::string name;                 // as written in KNIT_KERNEL(...), e.g. "knit::examples::rmsnorm"
  size_t arity = 0;                 // tensor parameters
  int line = 0;                     // of its KNIT_KERNEL(...) in the file
  std::vector<std::string> params;  // parameter names as written (arg0, arg1, ... if unnamed)
};

struct CppTensorSpec {
  ir::DType dtype = ir::DType::float32;
  std::vector<int64_t> shape;
  std::string name;  // "": the kernel's own parameter name
};

class CppKernelFile {
 public:
  // Compiles (or loads from the disk cache) `path`. extra_args are added to the compiler's
  // command line (e.g. "-DTILE=256", "-I/some/dir").
  static std::unique_ptr<CppKernelFile> load(const std::string& path, const std::vector<std::string>& extra_args = {});
  ~CppKernelFile();

  const std::vector<CppKernelInfo>& kernels() const { return kernels_; }
  // Whether the object came from the disk cache (Clang did not run).
  bool from_cache() const { return from_cache_; }
  // The object's disk cache key: a hash of everything the compiled code came from (the file and
  // every header it read, the flags, the target, Knit's and LLVM's versions); "" without a cache.
  const std::string& cache_key() const { return cache_key_; }
  // Clang's warnings, each a diagnostic ("file:line:col: warning: message" and the source
  // line), empty when the object came from the cache.
  const std::vector<std::string>& warnings() const { return warnings_; }
  // Traces kernel `name` (as listed in kernels(), or its last `::` component) for these
  // argument shapes and dtypes.
  ir::Kernel trace(const std::string& name, const std::vector<CppTensorSpec>& args, ir::Target target) const;

 private:
  CppKernelFile() = default;
  // One attempt at compiling (or loading from `cache`) with this command line; false if Clang
  // failed, with `diags` saying why. Fills `out`'s cache flag and warnings and the entry names.
  static bool compile_or_load(const std::vector<std::string>& args, codegen::DiskObjectCache* cache,
                              codegen::OrcJit& jit, CollectingConsumer& diags, CppKernelFile& out,
                              std::vector<std::string>& entry_names);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::vector<CppKernelInfo> kernels_;
  std::vector<void*> entries_;  // knit_kernel_entry_<n> functions, in kernels_ order
  bool from_cache_ = false;
  std::string cache_key_;
  std::vector<std::string> warnings_;
};

// The include directories Knit's headers live in (the -I flags of every compile).
std::vector<std::string> knit_include_dirs();

// Builds the precompiled header into the build's folder (a source build's build/pch), where
// knit_pch looks before the cache, so that no user's first compile pays for it; the build runs
// this (python/CMakeLists.txt). Returns its path, or "" when there is no such folder or building
// failed. KNIT_PREBUILT_PCH=0 makes knit_pch ignore that folder.
std::string precompile_header();

}  // namespace knit::frontend
