// Small helpers shared by the Catch2 tests.
#pragma once

#include <random>
#include <vector>

#include <knit/knit.h>

namespace knit::test {

inline std::vector<float> random_values(size_t n, unsigned seed, float lo = -2.0f, float hi = 2.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline HostTensor host(ir::DType dtype, std::vector<int64_t> shape, const std::vector<float>& values) {
  return HostTensor::from_floats(dtype, std::move(shape), values);
}

// Values as the kernel sees them after rounding to dtype.
inline std::vector<float> rounded(ir::DType dtype, std::vector<float> v) {
  for (float& x : v) x = ir::round_to(dtype, x);
  return v;
}

}  // namespace knit::test
