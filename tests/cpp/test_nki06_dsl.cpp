// The NKI 0.6 instructions through the C++ DSL (isa.h): each one's worked example from the
// additions reference, run on the reference interpreter (the Python tests compare the native
// path and NumPy models).
#include <cstring>
#include <limits>
#include <vector>

#include <catch2/catch.hpp>

#include "test_util.h"

using namespace knit;
using knit::test::host;
using DT = ir::DType;

using knit::test::output_copy;
using knit::test::raw_u32;
using knit::test::sbuf_copy;

TEST_CASE("tensor_scalar_cumulative: scans, goes on from the accumulator, loads imm1", "[nki06][cumulative]") {
  ir::Kernel k = trace("cumulative",
                       [](nl::tensor a, nl::tensor b, nl::tensor c) {
                         auto ya = nl::ndarray({1, 4}, nl::float32), yb = nl::ndarray({1, 2}, nl::float32);
                         auto yc = nl::ndarray({1, 3}, nl::float32);
                         isa::tensor_scalar_cumulative(ya, sbuf_copy(a), nl::multiply, nl::add, 2.0);
                         isa::tensor_scalar_cumulative(yb, sbuf_copy(b), nl::add, nl::add, 0.0,
                                                       {.reduce_cmd = ir::ReduceCmd::reduce});
                         isa::tensor_scalar_cumulative(yc, sbuf_copy(c), nl::add, nl::maximum, 0.0,
                                                       {.imm1 = 10.0, .reduce_cmd = ir::ReduceCmd::load_reduce});
                         return std::make_tuple(output_copy(ya), output_copy(yb), output_copy(yc));
                       },
                       {arg({1, 4}, nl::float32), arg({1, 2}, nl::float32), arg({1, 3}, nl::float32)});
  auto out = run(k, {host(DT::float32, {1, 4}, {1, 2, 3, 4}), host(DT::float32, {1, 2}, {1, 1}),
                     host(DT::float32, {1, 3}, {5, 12, 7})});
  const std::vector<std::vector<float>> want{{2, 6, 12, 20}, {21, 22}, {10, 12, 12}};
  for (size_t o = 0; o < want.size(); ++o)
    for (size_t i = 0; i < want[o].size(); ++i) CHECK(out[o].get(static_cast<int64_t>(i)) == want[o][i]);
}

TEST_CASE("nc_match_replace8 claims positions from the last slot down", "[nki06][nc_match_replace8]") {
  ir::Kernel k = trace("match",
                       [](nl::tensor d, nl::tensor v) {
                         auto dst = nl::ndarray({1, 10}, nl::float32);
                         auto idx = nl::ndarray({1, 8}, nl::uint32);
                         isa::nc_match_replace8(dst, sbuf_copy(d), sbuf_copy(v), 0.0, idx);
                         return std::make_tuple(output_copy(dst), output_copy(idx));
                       },
                       {arg({1, 10}, nl::float32), arg({1, 8}, nl::float32)});
  auto out = run(k, {host(DT::float32, {1, 10}, {5, 1, 5, 3, 9, 5, 2, 7, 4, 5}),
                     host(DT::float32, {1, 8}, {9, 7, 5, 5, 4, 3, 2, 5})});
  const std::vector<float> dst{0, 1, 0, 0, 0, 0, 0, 0, 0, 5};
  const std::vector<uint32_t> idx{4, 7, 5, 2, 8, 3, 6, 0};
  for (int64_t i = 0; i < 10; ++i) CHECK(out[0].get(i) == dst[i]);
  for (int64_t i = 0; i < 8; ++i) CHECK(raw_u32(out[1], i) == idx[i]);
}

TEST_CASE("nonzero_with_count fills partitions 0 and 16 only", "[nki06][nonzero_with_count]") {
  std::vector<float> src(32 * 6, 0.0f);
  const float row0[6] = {0, 2.5f, 0, -1, 0, 7};
  std::copy(row0, row0 + 6, src.begin());
  for (int64_t i = 6; i < 16 * 6; ++i) src[i] = 3.0f;  // partitions 1-15: not read
  ir::Kernel k = trace("nonzero",
                       [](nl::tensor s) {
                         auto dst = nl::ndarray({32, 7}, nl::int32);
                         isa::memset(dst, 42);
                         isa::nonzero_with_count(dst, sbuf_copy(s), 100, -9);
                         return output_copy(dst);
                       },
                       {arg({32, 6}, nl::float32)});
  auto out = run(k, {host(DT::float32, {32, 6}, src)});
  const std::vector<float> p0{101, 103, 105, -9, -9, -9, 3}, p16{-9, -9, -9, -9, -9, -9, 0};
  for (int64_t j = 0; j < 7; ++j) {
    CHECK(out[0].get(j) == p0[j]);
    CHECK(out[0].get(16 * 7 + j) == p16[j]);
    CHECK(out[0].get(7 + j) == 42);  // partition 1 left as it was
  }
}

TEST_CASE("sequence_bounds gives run starts and exclusive ends, padding n and -1", "[nki06][sequence_bounds]") {
  ir::Kernel k = trace("bounds",
                       [](nl::tensor ids) {
                         auto dst = nl::ndarray({1, 2, 7}, nl::int32);
                         isa::sequence_bounds(dst, sbuf_copy(ids));
                         return output_copy(dst);
                       },
                       {arg({1, 7}, nl::int32)});
  auto out = run(k, {test::ints({1, 7}, {2, 2, 0, 5, 5, 5, 7})});
  const std::vector<int32_t> want{0, 0, 7, 3, 3, 3, 6, 2, 2, -1, 6, 6, 6, 7};
  CHECK(test::ints_of(out[0]) == want);
}

TEST_CASE("topk keeps the K largest snake values, ascending, in every partition of the group", "[nki06][topk]") {
  std::vector<float> src(32);
  for (int s = 0; s < 32; ++s) src[(s % 16) * 2 + s / 16] = static_cast<float>(s);
  src[5 * 2 + 0] = 100.0f;  // position 5
  src[1 * 2 + 1] = 50.0f;   // position 17
  ir::Kernel k = trace("topk",
                       [](nl::tensor s) {
                         auto v = nl::ndarray({16, 3}, nl::bfloat16);
                         auto i = nl::ndarray({16, 3}, nl::uint32);
                         isa::topk(v, i, sbuf_copy(s), 20);
                         return std::make_tuple(output_copy(v), output_copy(i));
                       },
                       {arg({16, 2}, nl::bfloat16)});
  auto out = run(k, {host(DT::bfloat16, {16, 2}, src)});
  const float vals[3] = {19, 50, 100};
  const uint32_t idx[3] = {19, 17, 5};
  for (int64_t p = 0; p < 16; ++p)
    for (int64_t j = 0; j < 3; ++j) {
      CHECK(out[0].get(p * 3 + j) == vals[j]);
      CHECK(raw_u32(out[1], p * 3 + j) == idx[j]);
    }
}

TEST_CASE("activate2 runs its tensor-scalar stage, prelu and a max into the accumulator", "[nki06][activate2]") {
  ir::Kernel k = trace(
      "activate2",
      [](nl::tensor x, nl::tensor c) {
        auto y = nl::ndarray({2, 3}, nl::float32), res = nl::ndarray({2, 1}, nl::float32);
        isa::activate2(y, nl::prelu, sbuf_copy(x), 2.0, sbuf_copy(c), nl::multiply, nl::subtract,
                       {.relu_param = 0.1,
                        .reduce_op = nl::maximum,
                        .reduce_res = res,
                        .reduce_cmd = ir::ReduceCmd::reset_reduce});
        return std::make_tuple(output_copy(y), output_copy(res));
      },
      {arg({2, 3}, nl::float32), arg({2, 1}, nl::float32)}, ir::Target::trn3);
  auto out = run(k, {host(DT::float32, {2, 3}, {-2, 0.5f, 3, 1, -1, 0}), host(DT::float32, {2, 1}, {1.0f, 0.5f})});
  const std::vector<float> y{-0.5f, 0, 5, 1.5f, -0.25f, -0.05f};
  for (int64_t i = 0; i < 6; ++i) CHECK(out[0].get(i) == Approx(y[i]).epsilon(1e-6));
  CHECK(out[1].get(0) == 5.0f);
  CHECK(out[1].get(1) == 1.5f);
}
