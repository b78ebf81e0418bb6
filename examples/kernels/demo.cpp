// Knit demo: trace a tiled bf16 matmul written in C++, print its IR, run it on the reference
// interpreter and check it against a double-precision reference; then show the diagnostic a
// malformed kernel gets.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <random>
#include <sstream>

#include "kernels.h"

using namespace knit;

namespace {

// A kernel with a bug: a 256-partition SBUF tile (the limit is 128).
nl::tensor too_many_partitions(nl::tensor a) {
  auto out = nl::ndarray(a.shape(), a.dtype(), nl::shared_hbm, "out");
  auto tile = nl::ndarray({256, 64}, a.dtype(), nl::sbuf, "tile");
  isa::dma_copy(tile, a);
  isa::dma_copy(out, tile);
  return out;
}

}  // namespace

int main() {
  const int64_t K = 512, M = 512, N = 512;
  ir::Kernel kernel = trace("matmul", examples::matmul,
                            {arg({K, M}, nl::bfloat16, "lhsT"), arg({K, N}, nl::bfloat16, "rhs")});
  const std::string text = ir::print(kernel);
  std::istringstream lines(text);
  std::string line;
  std::cout << "== IR of the tiled matmul (" << kernel.body.size() << " instructions), first lines ==\n";
  for (int i = 0; i < 12 && std::getline(lines, line); ++i) std::cout << line << '\n';
  std::cout << "  ...\n";

  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> a(K * M), b(K * N);
  for (float& v : a) v = dist(rng);
  for (float& v : b) v = dist(rng);
  std::vector<HostTensor> args{HostTensor::from_floats(nl::bfloat16, {K, M}, a),
                               HostTensor::from_floats(nl::bfloat16, {K, N}, b)};
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<HostTensor> out = run(kernel, args);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // Reference from the same bf16 inputs, accumulated in double.
  const std::vector<float> ai = args[0].to_floats(), bi = args[1].to_floats();
  double max_rel = 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double ref = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        ref += double(ai[k * M + m]) * bi[k * N + n];
        mag += std::fabs(double(ai[k * M + m]) * bi[k * N + n]);
      }
      max_rel = std::max(max_rel, std::fabs(out[0].get(m * N + n) - ref) / mag);
    }
  std::printf(
      "== matmul %lldx%lldx%lld bf16 on the reference interpreter: %.2f s, max |error| / sum|a*b| = %.2e"
      " (bf16 output rounding bound 3.9e-03) ==\n",
      (long long)M, (long long)K, (long long)N, secs, max_rel);

  std::cout << "\n== a malformed kernel gets a diagnostic naming its line ==\n";
  try {
    trace("too_many_partitions", too_many_partitions, {arg({256, 64}, nl::float32, "a")});
  } catch (const Error& e) {
    std::cout << e.what() << '\n';
  }
  return max_rel < 3.9e-3 ? 0 : 1;
}
