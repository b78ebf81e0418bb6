// Specializing a bitcode library's functions on constant arguments, compiled with the ORC JIT.
//
// A library (LLVM bitcode built with Knit) defines bodies `void body(const Shape*, uint8_t* const*
// data, float* const* columns)`. A request names a body and the bytes of one Shape; the
// specializer emits `void spec(uint8_t* const* data, float* const* columns)` that calls the body
// with a pointer to those bytes as a constant global, inlines the body, and optimizes at -O3 for
// the host CPU, so the constant shape folds into loop bounds, strides and operator choices.
// Compiled objects go to the disk cache (knit/jit/disk_cache.h) unless caching is off.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace knit::codegen {

class OrcJit;

using SpecializedFn = void (*)(uint8_t* const* data, float* const* columns);

// Threads Knit uses for parallel work (compiling a batch here, running split instructions in the
// simulator's worker pool): KNIT_THREADS if set (at least 1), else the host's cores; at most 64.
int knit_threads();

struct SpecializeRequest {
  std::string body;      // the library function's symbol
  std::string constant;  // the bytes its first argument points to
};

class Specializer {
 public:
  // `library` must stay alive as long as the specializer.
  explicit Specializer(std::string_view library);
  ~Specializer();
  Specializer(const Specializer&) = delete;
  Specializer& operator=(const Specializer&) = delete;

  // Compiles the requests and returns their functions, in request order: one module per
  // compiling thread (KNIT_THREADS, default the host's cores), built in parallel, each cached on
  // its own. Requests already compiled earlier are served from memory.
  std::vector<SpecializedFn> compile(const std::vector<SpecializeRequest>& requests);

  // What compile(requests) would do now, without doing it: the requests it would build with LLVM
  // (indices into `requests`), and how many modules it would load from the disk cache instead
  // (the simulator weighs that against interpreting).
  struct Pending {
    std::vector<size_t> to_build;
    int64_t modules_to_load = 0;
  };
  Pending pending(const std::vector<SpecializeRequest>& requests);

  // What the generated code depends on besides the requests: target triple, CPU, features and
  // the LLVM version (part of any cache key).
  std::string host_description() const;
  // Modules compiled so far, and modules loaded from the disk cache instead (a request served
  // from memory counts in neither). The cache key hashes Knit's version, the library, LLVM's
  // version, the host CPU and features, and the requests.
  int64_t modules_compiled() const;
  int64_t modules_from_cache() const;
  // Cache entries found corrupt (failing their checksum), deleted and compiled again.
  int64_t cache_entries_rejected() const;
  // The directory of compiled objects, or "" when the disk cache is off.
  std::string cache_directory() const;

 private:
  // The indices of requests not compiled yet in this process, dealt into one group per compiling
  // thread (each group one module, its cache key module_key).
  std::vector<std::vector<size_t>> missing_groups(const std::vector<SpecializeRequest>& requests) const;
  std::string module_key(const std::vector<SpecializeRequest>& requests, const std::vector<size_t>& indices) const;
  void compile_group(const std::vector<SpecializeRequest>& requests, const std::vector<size_t>& indices,
                     std::vector<SpecializedFn>& out);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace knit::codegen
