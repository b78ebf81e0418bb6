// The example kernels (examples/kernels/cpp) at realistic sizes, checked element by element
// against scalar references computed here in double precision.
#include <cmath>

#include <catch2/catch.hpp>

#include "kernels.h"
#include "test_util.h"

using namespace knit;
using knit::test::host;
using knit::test::random_values;
using knit::test::rounded;

TEST_CASE("example tensor_add matches a + b rounded to the dtype", "[examples]") {
  const int64_t R = 384, C = 1024;  // three row tiles
  for (ir::DType d : {ir::DType::float32, ir::DType::bfloat16}) {
    ir::Kernel k = trace("tensor_add", examples::tensor_add, {arg({R, C}, d, "a"), arg({R, C}, d, "b")});
    const auto a = rounded(d, random_values(R * C, 11)), b = rounded(d, random_values(R * C, 12));
    auto out = run(k, {host(d, {R, C}, a), host(d, {R, C}, b)});
    for (int64_t i = 0; i < R * C; ++i) REQUIRE(out[0].get(i) == ir::round_to(d, a[i] + b[i]));
  }
}

TEST_CASE("example tensor_add handles a ragged last row tile", "[examples]") {
  const int64_t R = 200, C = 64;
  ir::Kernel k = trace("tensor_add", examples::tensor_add,
                       {arg({R, C}, nl::float32, "a"), arg({R, C}, nl::float32, "b")});
  const auto a = random_values(R * C, 13), b = random_values(R * C, 14);
  auto out = run(k, {host(ir::DType::float32, {R, C}, a), host(ir::DType::float32, {R, C}, b)});
  for (int64_t i = 0; i < R * C; ++i) REQUIRE(out[0].get(i) == a[i] + b[i]);
}

TEST_CASE("example matmul 512x512x512 bf16 matches a double reference", "[examples]") {
  const int64_t K = 512, M = 512, N = 512;
  ir::Kernel k = trace("matmul", examples::matmul,
                       {arg({K, M}, nl::bfloat16, "lhsT"), arg({K, N}, nl::bfloat16, "rhs")});
  const auto a = rounded(ir::DType::bfloat16, random_values(K * M, 21));
  const auto b = rounded(ir::DType::bfloat16, random_values(K * N, 22));
  auto out = run(k, {host(ir::DType::bfloat16, {K, M}, a), host(ir::DType::bfloat16, {K, N}, b)});
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double ref = 0, mag = 0;
      for (int64_t kk = 0; kk < K; ++kk) {
        const double p = double(a[kk * M + m]) * b[kk * N + n];
        ref += p;
        mag += std::fabs(p);
      }
      // bf16 output rounding (half an ulp, 2^-8 relative) plus fp32 accumulation error.
      REQUIRE(std::fabs(out[0].get(m * N + n) - ref) <= std::ldexp(std::fabs(ref), -8) + K * std::ldexp(mag, -24));
    }
}

TEST_CASE("example matmul with fp32 inputs is exact to fp32 accumulation", "[examples]") {
  const int64_t K = 256, M = 128, N = 512;
  ir::Kernel k = trace("matmul", examples::matmul, {arg({K, M}, nl::float32, "lhsT"), arg({K, N}, nl::float32, "rhs")});
  const auto a = random_values(K * M, 23), b = random_values(K * N, 24);
  auto out = run(k, {host(ir::DType::float32, {K, M}, a), host(ir::DType::float32, {K, N}, b)});
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double ref = 0, mag = 0;
      for (int64_t kk = 0; kk < K; ++kk) {
        ref += double(a[kk * M + m]) * b[kk * N + n];
        mag += std::fabs(double(a[kk * M + m]) * b[kk * N + n]);
      }
      REQUIRE(std::fabs(out[0].get(m * N + n) - ref) <= K * std::ldexp(mag, -24));
    }
}

TEST_CASE("example softmax matches a double reference", "[examples]") {
  const int64_t R = 256, C = 512;
  ir::Kernel k = trace("softmax", examples::softmax, {arg({R, C}, nl::float32, "x")});
  const auto x = random_values(R * C, 31, -8.0f, 8.0f);
  auto out = run(k, {host(ir::DType::float32, {R, C}, x)});
  for (int64_t r = 0; r < R; ++r) {
    double mx = -INFINITY, sum = 0;
    for (int64_t c = 0; c < C; ++c) mx = std::max(mx, double(x[r * C + c]));
    for (int64_t c = 0; c < C; ++c) sum += std::exp(x[r * C + c] - mx);
    for (int64_t c = 0; c < C; ++c) {
      const double ref = std::exp(x[r * C + c] - mx) / sum;
      REQUIRE(std::fabs(out[0].get(r * C + c) - ref) <= 1e-5 * ref + 1e-9);
    }
  }
}

TEST_CASE("example rmsnorm matches a double reference", "[examples]") {
  const int64_t R = 256, C = 1024;
  for (ir::DType d : {ir::DType::float32, ir::DType::bfloat16}) {
    ir::Kernel k = trace("rmsnorm", examples::rmsnorm, {arg({R, C}, d, "x"), arg({C}, d, "w")});
    const auto x = rounded(d, random_values(R * C, 41)), w = rounded(d, random_values(C, 42, 0.5f, 1.5f));
    auto out = run(k, {host(d, {R, C}, x), host(d, {C}, w)});
    const double tol = d == ir::DType::float32 ? 1e-5 : std::ldexp(1.0, -7);
    for (int64_t r = 0; r < R; ++r) {
      double ss = 0;
      for (int64_t c = 0; c < C; ++c) ss += double(x[r * C + c]) * x[r * C + c];
      const double inv = 1.0 / std::sqrt(ss / C + 1e-6);
      for (int64_t c = 0; c < C; ++c) {
        const double ref = x[r * C + c] * inv * w[c];
        REQUIRE(std::fabs(out[0].get(r * C + c) - ref) <= tol * std::fabs(ref) + 1e-6);
      }
    }
  }
}

TEST_CASE("example transpose moves every element exactly", "[examples]") {
  const int64_t M = 256, N = 384;
  ir::Kernel k = trace("transpose", examples::transpose, {arg({M, N}, nl::bfloat16, "x")});
  const auto x = rounded(ir::DType::bfloat16, random_values(M * N, 51));
  auto out = run(k, {host(ir::DType::bfloat16, {M, N}, x)});
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) REQUIRE(out[0].get(j * M + i) == x[i * N + j]);
}

TEST_CASE("example gather_rows copies the indexed table rows exactly", "[examples]") {
  const int64_t V = 1000, D = 64, N = 300;  // two full 128-id tiles (the device loop) and a tail of 44
  std::vector<int32_t> ids(N);
  std::mt19937 rng(61);
  for (int32_t& id : ids) id = static_cast<int32_t>(rng() % V);
  for (ir::DType d : {ir::DType::float32, ir::DType::bfloat16}) {
    ir::Kernel k = trace("gather_rows", examples::gather_rows, {arg({V, D}, d, "table"), arg({N}, nl::int32, "ids")});
    const auto table = rounded(d, random_values(V * D, 62));
    auto out = run(k, {host(d, {V, D}, table), test::ints({N}, ids)});
    for (int64_t r = 0; r < N; ++r)
      for (int64_t c = 0; c < D; ++c) REQUIRE(out[0].get(r * D + c) == table[ids[r] * D + c]);
  }
  ids[200] = static_cast<int32_t>(V);  // one id past the table: a run-time error naming it
  ir::Kernel k = trace("gather_rows", examples::gather_rows,
                       {arg({V, D}, nl::float32, "table"), arg({N}, nl::int32, "ids")});
  CHECK_THROWS_WITH(run(k, {host(ir::DType::float32, {V, D}, random_values(V * D, 63)), test::ints({N}, ids)}),
                    Catch::Contains("index 1000"));
}
