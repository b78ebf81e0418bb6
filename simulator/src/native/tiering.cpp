#include "tiering.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>

namespace knit::sim::native {

int64_t break_even_work(const std::vector<codegen::SpecializeRequest>& requests,
                        const codegen::Specializer::Pending& pending, int64_t dynamic_bodies, int threads) {
  double ns = static_cast<double>(pending.modules_to_load) * kLoadNsPerModule;
  const int64_t n = static_cast<int64_t>(pending.to_build.size()) + dynamic_bodies;
  if (n > 0) {
    double build = static_cast<double>(dynamic_bodies) * kBuildNsPerBody;
    for (size_t i : pending.to_build)
      build += requests[i].body == "knit_matmul_body" ? kBuildNsPerMatmulBody : kBuildNsPerBody;
    ns += kBuildSetupNs + build / static_cast<double>(std::min<int64_t>(std::max(threads, 1), n));
  }
  return static_cast<int64_t>(ns / kSavedNsPerElement);
}

namespace {

struct Ledger {
  std::mutex mutex;
  std::unordered_map<uint64_t, int64_t> work;
};

Ledger& ledger() {
  static Ledger l;
  return l;
}

}  // namespace

int64_t interpreted_work(uint64_t shapes_key) {
  Ledger& l = ledger();
  std::lock_guard<std::mutex> lock(l.mutex);
  auto it = l.work.find(shapes_key);
  return it == l.work.end() ? 0 : it->second;
}

void add_interpreted_work(uint64_t shapes_key, int64_t work) {
  Ledger& l = ledger();
  std::lock_guard<std::mutex> lock(l.mutex);
  l.work[shapes_key] += work;
}

}  // namespace knit::sim::native
