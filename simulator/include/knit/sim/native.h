// The native (JIT) execution path seen from outside the simulator: what it has compiled in this
// process and where its disk cache lives (knit/jit/disk_cache.h for the rules).
#pragma once

#include <cstdint>
#include <string>

namespace knit::sim {

struct NativeCacheStats {
  int64_t modules_compiled = 0;    // compiled by LLVM in this process
  int64_t modules_from_cache = 0;  // loaded from the disk cache instead
  int64_t entries_rejected = 0;    // corrupt cache entries deleted and compiled again
  std::string directory;           // compiled objects' directory; "" when the cache is off
};

NativeCacheStats native_cache_stats();

}  // namespace knit::sim
