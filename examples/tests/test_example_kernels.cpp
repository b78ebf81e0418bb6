// Kernel unit tests as a kernel author writes them in C++: the example kernels
// (examples/kernels/cpp) against double-precision references on every target, and a latency
// bound, with <knit/testing.h> in an ordinary Catch2 binary (examples/tests/CMakeLists.txt).
// Latency bounds are trn1's simulated time for these shapes (the slowest target) plus about 10%.
#include <algorithm>
#include <cmath>
#include <vector>

#include <knit/testing.h>
#include <catch2/catch.hpp>

#include "kernels.h"

using namespace knit;
namespace kt = knit::testing;

namespace {

std::vector<double> softmax_reference(const HostTensor& x) {
  const int64_t rows = x.shape[0], cols = x.shape[1];
  std::vector<double> v = kt::values(x), out(v.size());
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = &v[r * cols];
    const double mx = *std::max_element(row, row + cols);
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(row[c] - mx);
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = std::exp(row[c] - mx) / sum;
  }
  return out;
}

std::vector<double> matmul_reference(const HostTensor& lhsT, const HostTensor& rhs) {
  const int64_t K = lhsT.shape[0], M = lhsT.shape[1], N = rhs.shape[1];
  const std::vector<double> a = kt::values(lhsT), b = kt::values(rhs);
  std::vector<double> out(M * N, 0.0);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) out[m * N + n] += a[k * M + m] * b[k * N + n];
  return out;
}

}  // namespace

TEST_CASE("example softmax is correct on every target and within its latency bound", "[examples]") {
  const ir::Target target = GENERATE(ir::Target::trn1, ir::Target::trn2, ir::Target::trn3);
  const ir::DType dtype = GENERATE(nl::float32, nl::bfloat16);
  INFO(ir::to_string(target) << " " << ir::to_string(dtype));
  HostTensor x = kt::normal({256, 512}, dtype, /*seed=*/1, 0, 4);
  ir::Kernel k = trace("softmax", examples::softmax, {kt::spec_of(x, "x")}, target);
  kt::Profile prof = kt::profile(k, {x});
  REQUIRE_THAT(prof.outputs[0], kt::IsCloseTo(softmax_reference(x)));
  REQUIRE_THAT(prof, kt::LatencyAtMost(30.0));
}

TEST_CASE("example matmul is correct on every target and within its latency bound", "[examples]") {
  const ir::Target target = GENERATE(ir::Target::trn1, ir::Target::trn2, ir::Target::trn3);
  INFO(ir::to_string(target));
  HostTensor lhsT = kt::normal({256, 128}, nl::bfloat16, 2), rhs = kt::normal({256, 512}, nl::bfloat16, 3);
  ir::Kernel k = trace("matmul", examples::matmul, {kt::spec_of(lhsT, "lhsT"), kt::spec_of(rhs, "rhs")}, target);
  kt::Profile prof = kt::profile(k, {lhsT, rhs});
  REQUIRE_THAT(prof.outputs[0], kt::IsCloseTo(matmul_reference(lhsT, rhs)));
  REQUIRE_THAT(kt::profile(k, {kt::placeholder({256, 128}, nl::bfloat16), kt::placeholder({256, 512}, nl::bfloat16)}),
               kt::LatencyAtMost(26.0));  // timing only: placeholders, no data
}
