// Small helpers shared by the Catch2 tests.
#pragma once

#include <cstring>
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

// int32 tensors: built from values, and read back.
inline HostTensor ints(std::vector<int64_t> shape, const std::vector<int32_t>& values) {
  HostTensor h = HostTensor::zeros(ir::DType::int32, std::move(shape));
  std::memcpy(h.bytes.data(), values.data(), values.size() * 4);
  return h;
}
inline std::vector<int32_t> ints_of(const HostTensor& h) {
  std::vector<int32_t> v(static_cast<size_t>(h.num_elements()));
  std::memcpy(v.data(), h.bytes.data(), v.size() * 4);
  return v;
}

// Values as the kernel sees them after rounding to dtype.
inline std::vector<float> rounded(ir::DType dtype, std::vector<float> v) {
  for (float& x : v) x = ir::round_to(dtype, x);
  return v;
}

// An SBUF copy of an HBM kernel input, and a new kernel output holding a copy of an on-chip tile.
inline nl::tensor sbuf_copy(const nl::tensor& x) {
  auto t = nl::ndarray(x.shape(), x.dtype());
  isa::dma_copy(t, x);
  return t;
}
inline nl::tensor output_copy(const nl::tensor& t) {
  auto out = nl::ndarray(t.shape(), t.dtype(), nl::shared_hbm);
  isa::dma_copy(out, t);
  return out;
}
// Element i of a 32-bit tensor, as its raw bits.
inline uint32_t raw_u32(const HostTensor& t, int64_t i) {
  uint32_t v;
  std::memcpy(&v, t.bytes.data() + 4 * i, 4);
  return v;
}

}  // namespace knit::test
