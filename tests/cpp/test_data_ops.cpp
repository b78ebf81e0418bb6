// Semantics of the data-movement and Tensor Engine instructions (dma_copy, dma_transpose,
// nc_matmul, nc_transpose, tensor_copy, tensor_copy_predicated, memset) and of the reference
// interpreter's memory model (uninitialized reads, placement, address pins), against values
// computed by hand or with plain loops in the test.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include <catch2/catch.hpp>

#include "test_util.h"

using namespace knit;
using knit::test::host;
using knit::test::random_values;
using knit::test::rounded;

namespace {

// HBM [P, F] -> SBUF -> HBM, copying through a tile of `tile_dtype`.
ir::Kernel roundtrip_kernel(int64_t P, int64_t F, ir::DType in, ir::DType tile_dtype, ir::DType out_dtype) {
  return trace("roundtrip",
               [&](nl::tensor x) {
                 auto tile = nl::ndarray({P, F}, tile_dtype);
                 auto out = nl::ndarray({P, F}, out_dtype, nl::shared_hbm);
                 isa::dma_copy(tile, x);
                 isa::dma_copy(out, tile);
                 return out;
               },
               {arg({P, F}, in, "x")});
}

}  // namespace

TEST_CASE("dma_copy converts through fp32 with the destination's rounding", "[data][dma_copy]") {
  const std::vector<float> v{1.0f, 1.00390625f, 1.01171875f, -3.3f, 65504.0f, 1e-8f, 70000.0f, -0.0f};
  for (ir::DType tile_dtype : {ir::DType::bfloat16, ir::DType::float16, ir::DType::float8_e4m3, ir::DType::int8}) {
    ir::Kernel k = roundtrip_kernel(2, 4, ir::DType::float32, tile_dtype, ir::DType::float32);
    auto out = run(k, {host(ir::DType::float32, {2, 4}, v)});
    for (size_t i = 0; i < v.size(); ++i) CHECK(out[0].get(i) == ir::round_to(tile_dtype, v[i]));
  }
}

TEST_CASE("dma_copy of equal dtypes is bit exact, NaN payloads included", "[data][dma_copy]") {
  ir::Kernel k = roundtrip_kernel(1, 2, ir::DType::float32, ir::DType::float32, ir::DType::float32);
  HostTensor in = HostTensor::zeros(ir::DType::float32, {1, 2});
  const uint32_t payload_nan = 0x7fc01234u, neg_zero = 0x80000000u;
  std::memcpy(in.bytes.data(), &payload_nan, 4);
  std::memcpy(in.bytes.data() + 4, &neg_zero, 4);
  auto out = run(k, {in});
  CHECK(out[0].bytes == in.bytes);
}

TEST_CASE("dma_copy needs only equal element counts; shapes may differ", "[data][dma_copy]") {
  // A [4, 6] HBM tensor copied into a [3, 8] tile and back out flat: element order is row-major.
  ir::Kernel k = trace("reflow",
                       [](nl::tensor x) {
                         auto tile = nl::ndarray({3, 8}, nl::float32);
                         auto out = nl::ndarray({24}, nl::float32, nl::shared_hbm);
                         isa::dma_copy(tile, x);
                         isa::dma_copy(out, tile);
                         return out;
                       },
                       {arg({4, 6}, nl::float32)});
  std::vector<float> v(24);
  for (int i = 0; i < 24; ++i) v[i] = static_cast<float>(i);
  auto out = run(k, {host(ir::DType::float32, {4, 6}, v)});
  CHECK(out[0].to_floats() == v);
}

TEST_CASE("dma_copy with a strided and broadcast source view", "[data][dma_copy]") {
  // src = x[:, ::2] (every other column) and a stride-0 partition broadcast of row 1.
  ir::Kernel k = trace("strided",
                       [](nl::tensor x) {
                         auto a = nl::ndarray({4, 3}, nl::float32);
                         auto b = nl::ndarray({4, 6}, nl::float32);
                         isa::dma_copy(a, x(nl::all, nl::slice(0, 6, 2)));
                         isa::dma_copy(b, x(nl::ds(1, 1), nl::all).broadcast(0, 4));
                         auto out = nl::ndarray({4, 9}, nl::float32, nl::shared_hbm);
                         isa::dma_copy(out(nl::all, nl::ds(0, 3)), a);
                         isa::dma_copy(out(nl::all, nl::ds(3, 6)), b);
                         return out;
                       },
                       {arg({4, 6}, nl::float32)});
  std::vector<float> v(24);
  for (int i = 0; i < 24; ++i) v[i] = static_cast<float>(i);
  auto out = run(k, {host(ir::DType::float32, {4, 6}, v)});
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 3; ++c) CHECK(out[0].get(r * 9 + c) == v[r * 6 + 2 * c]);
    for (int c = 0; c < 6; ++c) CHECK(out[0].get(r * 9 + 3 + c) == v[6 + c]);
  }
}

TEST_CASE("dma_transpose permutes 2-D and 3-D sources", "[data][dma_transpose]") {
  ir::Kernel k2 = trace("t2",
                        [](nl::tensor x) {
                          auto tile = nl::ndarray({6, 4}, nl::bfloat16);
                          isa::dma_transpose(tile, x);
                          auto out = nl::ndarray({6, 4}, nl::bfloat16, nl::shared_hbm);
                          isa::dma_copy(out, tile);
                          return out;
                        },
                        {arg({4, 6}, nl::bfloat16)});
  std::vector<float> v(24);
  for (int i = 0; i < 24; ++i) v[i] = static_cast<float>(i);
  auto out = run(k2, {host(ir::DType::bfloat16, {4, 6}, v)});
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) CHECK(out[0].get(j * 4 + i) == v[i * 6 + j]);

  ir::Kernel k3 = trace("t3",
                        [](nl::tensor x) {
                          auto tile = nl::ndarray({4, 3, 2}, nl::bfloat16);
                          isa::dma_transpose(tile, x);  // axes (2, 1, 0)
                          auto out = nl::ndarray({4, 3, 2}, nl::bfloat16, nl::shared_hbm);
                          isa::dma_copy(out, tile);
                          return out;
                        },
                        {arg({2, 3, 4}, nl::bfloat16)});
  out = run(k3, {host(ir::DType::bfloat16, {2, 3, 4}, v)});
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c) CHECK(out[0].get((c * 3 + b) * 2 + a) == v[(a * 3 + b) * 4 + c]);
}

namespace {

// out[M, N] = a[K, M].T @ b[K, N], one matmul, PSUM evicted to fp32.
ir::Kernel single_matmul(int64_t K, int64_t M, int64_t N, ir::DType in) {
  return trace("mm",
               [=](nl::tensor a, nl::tensor b) {
                 auto ta = nl::ndarray({K, M}, in);
                 auto tb = nl::ndarray({K, N}, in);
                 isa::dma_copy(ta, a);
                 isa::dma_copy(tb, b);
                 auto acc = nl::ndarray({M, N}, nl::float32, nl::psum);
                 isa::nc_matmul(acc, ta, tb);
                 auto res = nl::ndarray({M, N}, nl::float32);
                 isa::tensor_copy(res, acc);
                 auto out = nl::ndarray({M, N}, nl::float32, nl::shared_hbm);
                 isa::dma_copy(out, res);
                 return out;
               },
               {arg({K, M}, in), arg({K, N}, in)});
}

}  // namespace

TEST_CASE("nc_matmul computes stationary.T @ moving with fp32 accumulation in k order", "[data][nc_matmul]") {
  const int64_t K = 64, M = 16, N = 40;
  for (ir::DType in : {ir::DType::float32, ir::DType::bfloat16, ir::DType::float8_e4m3}) {
    const auto a = rounded(in, random_values(K * M, 1));
    const auto b = rounded(in, random_values(K * N, 2));
    auto out = run(single_matmul(K, M, N, in), {host(in, {K, M}, a), host(in, {K, N}, b)});
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        float acc = 0.0f;  // fp32, k ascending: the documented order
        for (int64_t k = 0; k < K; ++k) acc += a[k * M + m] * b[k * N + n];
        REQUIRE(out[0].get(m * N + n) == acc);
      }
  }
}

TEST_CASE("nc_matmul accumulate: None overwrites then adds, True adds, False overwrites", "[data][nc_matmul]") {
  const int64_t K = 4, M = 2, N = 3;
  auto kernel = [&](std::optional<bool> second) {
    return trace("acc",
                 [=](nl::tensor a, nl::tensor b) {
                   auto ta = nl::ndarray({K, M}, nl::float32);
                   auto tb = nl::ndarray({K, N}, nl::float32);
                   isa::dma_copy(ta, a);
                   isa::dma_copy(tb, b);
                   auto acc = nl::ndarray({M, N}, nl::float32, nl::psum);
                   isa::nc_matmul(acc, ta, tb);                          // first: overwrite (None)
                   isa::nc_matmul(acc, ta, tb, {.accumulate = second});  // second: per mode
                   auto res = nl::ndarray({M, N}, nl::float32);
                   isa::tensor_copy(res, acc);
                   auto out = nl::ndarray({M, N}, nl::float32, nl::shared_hbm);
                   isa::dma_copy(out, res);
                   return out;
                 },
                 {arg({K, M}, nl::float32), arg({K, N}, nl::float32)});
  };
  std::vector<float> a(K * M), b(K * N);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 3) - 1.0f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 5);
  std::vector<float> once(M * N, 0.0f);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) once[m * N + n] += a[k * M + m] * b[k * N + n];
  auto args = [&] {
    return std::vector<HostTensor>{host(ir::DType::float32, {K, M}, a), host(ir::DType::float32, {K, N}, b)};
  };
  auto none = run(kernel(std::nullopt), args());
  auto on = run(kernel(true), args());
  auto off = run(kernel(false), args());
  for (int64_t i = 0; i < M * N; ++i) {
    CHECK(none[0].get(i) == 2 * once[i]);
    CHECK(on[0].get(i) == 2 * once[i]);
    CHECK(off[0].get(i) == once[i]);
  }
}

TEST_CASE("nc_matmul accumulate=True on fresh PSUM warns, adds to the NaN sentinel, and is poison",
          "[data][nc_matmul]") {
  ir::Kernel k = trace("bad_acc",
                       [](nl::tensor a) {
                         auto ta = nl::ndarray({4, 4}, nl::float32);
                         isa::dma_copy(ta, a);
                         auto acc = nl::ndarray({4, 4}, nl::float32, nl::psum);
                         isa::nc_matmul(acc, ta, ta, {.accumulate = true});
                         auto res = nl::ndarray({4, 4}, nl::float32);
                         isa::tensor_copy(res, acc);
                         auto out = nl::ndarray({4, 4}, nl::float32, nl::shared_hbm);
                         isa::dma_copy(out, res);
                         return out;
                       },
                       {arg({4, 4}, nl::float32)});
  std::vector<HostTensor> args{host(ir::DType::float32, {4, 4}, std::vector<float>(16, 1.0f))};
  // Every output element depends on the never-written PSUM: an error by default.
  CHECK_THROWS_WITH(sim::interpret(k, args), Catch::Contains("[uninitialized-output]"));
  for (sim::Uninitialized mode : {sim::Uninitialized::warn, sim::Uninitialized::error}) {
    sim::RunResult r = sim::interpret(k, args, {.uninitialized = mode});
    for (int i = 0; i < 16; ++i) CHECK(std::isnan(r.outputs[0].get(i)));
    // Strict mode only warns here, as NKI's simulator; warn mode also reports the poisoned output.
    REQUIRE(r.warnings.size() == (mode == sim::Uninitialized::warn ? 2 : 1));
    CHECK(r.warnings[0].find("accumulate=True") != std::string::npos);
    if (mode == sim::Uninitialized::warn) CHECK(r.warnings[1].find("[uninitialized-output]") != std::string::npos);
  }
}

TEST_CASE("nc_matmul transpose mode passes NaN and Inf through", "[data][nc_matmul]") {
  ir::Kernel k = trace("tmode",
                       [](nl::tensor a, nl::tensor eye) {
                         auto ta = nl::ndarray({4, 3}, nl::float32);
                         auto te = nl::ndarray({4, 4}, nl::float32);
                         isa::dma_copy(ta, a);
                         isa::dma_copy(te, eye);
                         auto acc = nl::ndarray({3, 4}, nl::float32, nl::psum);
                         isa::nc_matmul(acc, ta, te, {.is_transpose = true});
                         auto res = nl::ndarray({3, 4}, nl::float32);
                         isa::tensor_copy(res, acc);
                         auto out = nl::ndarray({3, 4}, nl::float32, nl::shared_hbm);
                         isa::dma_copy(out, res);
                         return out;
                       },
                       {arg({4, 3}, nl::float32), arg({4, 4}, nl::float32)});
  std::vector<float> a(12);
  for (int i = 0; i < 12; ++i) a[i] = static_cast<float>(i);
  a[1] = std::numeric_limits<float>::infinity();
  a[5] = std::nanf("");
  std::vector<float> eye(16, 0.0f);
  for (int i = 0; i < 4; ++i) eye[i * 4 + i] = 1.0f;
  auto out = run(k, {host(ir::DType::float32, {4, 3}, a), host(ir::DType::float32, {4, 4}, eye)});
  for (int m = 0; m < 3; ++m)
    for (int n = 0; n < 4; ++n) {
      const float want = a[n * 3 + m];
      if (std::isnan(want)) CHECK(std::isnan(out[0].get(m * 4 + n)));
      else CHECK(out[0].get(m * 4 + n) == want);
    }
}

TEST_CASE("a fresh PSUM tensor per loop iteration resets accumulation", "[data][nc_matmul]") {
  // Two output blocks, each with its own PSUM tile: the second block must not add to the first.
  ir::Kernel k = trace("blocks",
                       [](nl::tensor a) {
                         auto ta = nl::ndarray({2, 2}, nl::float32);
                         isa::dma_copy(ta, a);
                         auto out = nl::ndarray({2, 4}, nl::float32, nl::shared_hbm);
                         for (int blk = 0; blk < 2; ++blk) {
                           auto acc = nl::ndarray({2, 2}, nl::float32, nl::psum);
                           isa::nc_matmul(acc, ta, ta);
                           isa::nc_matmul(acc, ta, ta);
                           auto res = nl::ndarray({2, 2}, nl::float32);
                           isa::tensor_copy(res, acc);
                           isa::dma_copy(out(nl::all, nl::ds(2 * blk, 2)), res);
                         }
                         return out;
                       },
                       {arg({2, 2}, nl::float32)});
  auto out = run(k, {host(ir::DType::float32, {2, 2}, {1, 2, 3, 4})});
  // a.T @ a = [[10, 14], [14, 20]], accumulated twice per block.
  const std::vector<float> want{20, 28, 20, 28, 28, 40, 28, 40};
  CHECK(out[0].to_floats() == want);
}

TEST_CASE("nc_transpose on the Tensor and Vector engines", "[data][nc_transpose]") {
  for (ir::Engine e : {ir::Engine::tensor, ir::Engine::vector}) {
    const int64_t P = 32, F = 24;
    ir::Kernel k = trace("tr",
                         [=](nl::tensor x) {
                           auto t = nl::ndarray({P, F}, nl::bfloat16);
                           isa::dma_copy(t, x);
                           auto flipped = nl::ndarray({F, P}, nl::bfloat16,
                                                      e == ir::Engine::tensor ? nl::psum : nl::sbuf);
                           isa::nc_transpose(flipped, t, e);
                           auto res = nl::ndarray({F, P}, nl::bfloat16);
                           isa::tensor_copy(res, flipped);
                           auto out = nl::ndarray({F, P}, nl::bfloat16, nl::shared_hbm);
                           isa::dma_copy(out, res);
                           return out;
                         },
                         {arg({P, F}, nl::bfloat16)});
    const auto v = rounded(ir::DType::bfloat16, random_values(P * F, 3));
    auto out = run(k, {host(ir::DType::bfloat16, {P, F}, v)});
    for (int64_t p = 0; p < P; ++p)
      for (int64_t f = 0; f < F; ++f) REQUIRE(out[0].get(f * P + p) == v[p * F + f]);
  }
}

TEST_CASE("tensor_copy converts with rounding and saturation", "[data][tensor_copy]") {
  const std::vector<float> v{0.5f, 1.5f, 2.5f, -2.5f, 300.0f, -300.0f, std::nanf(""), 127.4f};
  for (ir::DType to : {ir::DType::int8, ir::DType::uint8, ir::DType::bfloat16, ir::DType::float8_e5m2}) {
    ir::Kernel k = trace("cast",
                         [=](nl::tensor x) {
                           auto a = nl::ndarray({1, 8}, nl::float32);
                           isa::dma_copy(a, x);
                           auto b = nl::ndarray({1, 8}, to);
                           isa::tensor_copy(b, a);
                           auto c = nl::ndarray({1, 8}, nl::float32);
                           isa::tensor_copy(c, b);
                           auto out = nl::ndarray({1, 8}, nl::float32, nl::shared_hbm);
                           isa::dma_copy(out, c);
                           return out;
                         },
                         {arg({1, 8}, nl::float32)});
    auto out = run(k, {host(ir::DType::float32, {1, 8}, v)});
    for (size_t i = 0; i < v.size(); ++i) {
      const float want = ir::round_to(to, v[i]);
      if (std::isnan(want)) CHECK(std::isnan(out[0].get(i)));
      else CHECK(out[0].get(i) == want);
    }
  }
  // Hand-checked int8 values: half-even rounding and saturation, NaN -> 0.
  CHECK(ir::round_to(ir::DType::int8, 2.5f) == 2.0f);
  CHECK(ir::round_to(ir::DType::int8, -2.5f) == -2.0f);
  CHECK(ir::round_to(ir::DType::int8, 300.0f) == 127.0f);
  CHECK(ir::round_to(ir::DType::uint8, -300.0f) == 0.0f);
  CHECK(ir::round_to(ir::DType::int8, std::nanf("")) == 0.0f);
}

TEST_CASE("tensor_copy_predicated copies where the predicate holds", "[data][tensor_copy_predicated]") {
  for (bool reverse : {false, true}) {
    for (bool scalar_src : {false, true}) {
      ir::Kernel k = trace("pred",
                           [=](nl::tensor x, nl::tensor p) {
                             auto dst = nl::ndarray({2, 3}, nl::float32);
                             auto src = nl::ndarray({2, 3}, nl::float32);
                             auto pred = nl::ndarray({2, 3}, nl::uint8);
                             isa::memset(dst, -1.0);
                             isa::dma_copy(src, x);
                             isa::dma_copy(pred, p);
                             if (scalar_src) isa::tensor_copy_predicated(dst, 7.0, pred, reverse);
                             else isa::tensor_copy_predicated(dst, src, pred, reverse);
                             auto out = nl::ndarray({2, 3}, nl::float32, nl::shared_hbm);
                             isa::dma_copy(out, dst);
                             return out;
                           },
                           {arg({2, 3}, nl::float32), arg({2, 3}, nl::uint8)});
      const std::vector<float> x{1, 2, 3, 4, 5, 6}, p{0, 1, 0, 2, 0, 255};
      auto out = run(k, {host(ir::DType::float32, {2, 3}, x), host(ir::DType::uint8, {2, 3}, p)});
      for (int i = 0; i < 6; ++i) {
        const bool take = (p[i] != 0) != reverse;
        CHECK(out[0].get(i) == (take ? (scalar_src ? 7.0f : x[i]) : -1.0f));
      }
    }
  }
}

TEST_CASE("memset fills with the value rounded to the tile dtype", "[data][memset]") {
  for (ir::DType d : {ir::DType::bfloat16, ir::DType::float16, ir::DType::int32, ir::DType::uint16}) {
    const double value = d == ir::DType::int32 ? 70000.0 : d == ir::DType::uint16 ? 65535.0 : 3.14159;
    ir::Kernel k = trace("fill",
                         [=](nl::tensor) {
                           auto t = nl::ndarray({3, 5}, d);
                           isa::memset(t, value);
                           auto out = nl::ndarray({3, 5}, d, nl::shared_hbm);
                           isa::dma_copy(out, t);
                           return out;
                         },
                         {arg({1, 1}, nl::float32)});
    auto out = run(k, {host(ir::DType::float32, {1, 1}, {0})});
    const float want = ir::round_to(d, static_cast<float>(value));
    for (int i = 0; i < 15; ++i) CHECK(out[0].get(i) == want);
  }
}

TEST_CASE("storing a never-written tile is a runtime error naming the line", "[data][interpreter]") {
  int line = 0;
  ir::Kernel k = trace("uninit",
                       [&](nl::tensor x) {
                         auto t = nl::ndarray({2, 2}, nl::float32);
                         auto out = nl::ndarray({2, 2}, nl::float32, nl::shared_hbm);
                         line = __LINE__ + 1;
                         isa::dma_copy(out, t);
                         return out;
                       },
                       {arg({2, 2}, nl::float32)});
  // By default the never-written values read are poison, an error once in an output; strict mode
  // stops at the read. Both name the reading line.
  for (sim::Uninitialized mode : {sim::Uninitialized::report, sim::Uninitialized::error}) {
    try {
      run(k, {host(ir::DType::float32, {2, 2}, {1, 2, 3, 4})}, {.uninitialized = mode});
      FAIL("expected an error");
    } catch (const Error& e) {
      CHECK(e.rule() == (mode == sim::Uninitialized::error ? "uninitialized-read" : "uninitialized-output"));
      CHECK(e.loc().line == line);
      CHECK(std::string(e.what()).find("test_data_ops.cpp:" + std::to_string(line)) != std::string::npos);
      CHECK(std::string(e.what()).find("element [0, 0]") != std::string::npos);
    }
  }
  // Off: no check; the output holds the fresh-memory NaN.
  auto out = run(k, {host(ir::DType::float32, {2, 2}, {1, 2, 3, 4})}, {.uninitialized = sim::Uninitialized::off});
  for (int i = 0; i < 4; ++i) CHECK(std::isnan(out[0].get(i)));
}

TEST_CASE("tensors pinned to the same address alias", "[data][interpreter]") {
  ir::Kernel k = trace("alias",
                       [](nl::tensor x) {
                         auto a = nl::ndarray({2, 4}, nl::float32, nl::sbuf, "a", std::array<int64_t, 2>{0, 1024});
                         auto b = nl::ndarray({2, 4}, nl::float32, nl::sbuf, "b", std::array<int64_t, 2>{0, 1024});
                         isa::dma_copy(a, x);
                         auto out = nl::ndarray({2, 4}, nl::float32, nl::shared_hbm);
                         isa::dma_copy(out, b);  // reads what was written through a
                         isa::dma_copy(out(nl::ds(0, 1), nl::all), a(nl::ds(1, 1), nl::all));
                         return out;
                       },
                       {arg({2, 4}, nl::float32)});
  const std::vector<float> v{1, 2, 3, 4, 5, 6, 7, 8};
  auto out = run(k, {host(ir::DType::float32, {2, 4}, v)});
  const std::vector<float> want{5, 6, 7, 8, 5, 6, 7, 8};  // b == a; then row 0 <- a's row 1
  CHECK(out[0].to_floats() == want);
}

TEST_CASE("on-chip placement reports SBUF over-subscription with the live tensors", "[data][interpreter]") {
  // Four 64 KiB-per-partition tiles alive at once exceed trn2's 224 KiB partition. Each is written
  // only in part, so none can be spilled to HBM (a spill copies a value written whole).
  ir::Kernel k = trace("too_big",
                       [](nl::tensor x) {
                         std::vector<nl::tensor> tiles;
                         for (int i = 0; i < 4; ++i) {
                           tiles.push_back(nl::ndarray({128, 16384}, nl::float32, nl::sbuf, "big" + std::to_string(i)));
                           isa::memset(tiles.back()(nl::all, nl::ds(0, 8)), 0.0);
                         }
                         auto out = nl::ndarray({128, 1}, nl::float32, nl::shared_hbm);
                         for (auto& t : tiles) isa::dma_copy(out, t(nl::all, nl::ds(0, 1)));
                         return out;
                       },
                       {arg({1, 1}, nl::float32)});
  try {
    run(k, {host(ir::DType::float32, {1, 1}, {0})});
    FAIL("expected a capacity error");
  } catch (const Error& e) {
    CHECK(e.rule() == "capacity");
    const std::string what = e.what();
    CHECK(what.find("big0") != std::string::npos);
    CHECK(what.find("229376") != std::string::npos);  // 224 KiB per partition on trn2
    CHECK(what.find("has not been written whole yet") != std::string::npos);
  }
}

TEST_CASE("nc_stream_shuffle moves partitions within each 32-partition quadrant", "[data][nc_stream_shuffle]") {
  std::vector<int64_t> mask(32);
  for (int i = 0; i < 32; ++i) mask[i] = 31 - i;  // reverse each quadrant
  mask[5] = 255;                                  // partition 5 of each quadrant is left alone
  ir::Kernel k = trace("shuffle",
                       [&](nl::tensor x) {
                         auto src = nl::ndarray({64, 3}, nl::bfloat16);
                         auto dst = nl::ndarray({64, 3}, nl::bfloat16);
                         isa::dma_copy(src, x);
                         isa::memset(dst, -1.0);
                         isa::nc_stream_shuffle(dst, src, mask);
                         auto out = nl::ndarray({64, 3}, nl::bfloat16, nl::shared_hbm);
                         isa::dma_copy(out, dst);
                         return out;
                       },
                       {arg({64, 3}, nl::bfloat16)});
  const auto v = rounded(ir::DType::bfloat16, random_values(64 * 3, 61));
  auto out = run(k, {host(ir::DType::bfloat16, {64, 3}, v)});
  for (int q = 0; q < 64; q += 32)
    for (int i = 0; i < 32; ++i)
      for (int f = 0; f < 3; ++f) {
        const float want = mask[i] == 255 ? -1.0f : v[(q + mask[i]) * 3 + f];
        REQUIRE(out[0].get((q + i) * 3 + f) == want);
      }
}

TEST_CASE("nc_stream_shuffle rules: mask size, entries and start partitions", "[data][nc_stream_shuffle]") {
  auto rule_of = [](std::vector<int64_t> mask, int64_t start, int64_t parts) {
    try {
      trace("bad_shuffle",
            [&](nl::tensor) {
              auto t = nl::ndarray({128, 4}, nl::float32);
              isa::nc_stream_shuffle(t(nl::ds(start, parts), nl::all), t(nl::ds(start, parts), nl::all), mask);
            },
            {arg({1, 1}, nl::float32)});
    } catch (const Error& e) {
      return e.rule();
    }
    return std::string("<no error>");
  };
  const std::vector<int64_t> ok(32, 0);
  CHECK(rule_of(ok, 0, 128) == "<no error>");
  CHECK(rule_of(ok, 64, 32) == "<no error>");
  CHECK(rule_of(std::vector<int64_t>(16, 0), 0, 32) == "operand-shape");
  CHECK(rule_of(std::vector<int64_t>(32, 40), 0, 32) == "operand");
  CHECK(rule_of(ok, 32, 64) == "partition-start");
  CHECK(rule_of(ok, 0, 48) == "partition-start");
}
