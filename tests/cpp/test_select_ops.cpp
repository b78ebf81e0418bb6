// Semantics and verifier rules of select_reduce, range_select, bn_stats, bn_aggr, max8,
// nc_find_index8, iota, affine_select, tensor_partition_reduce, local_gather and nc_n_gather.
// Expected values are computed here with plain loops (fp32 or double) and ir::round_to.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <tuple>

#include <catch2/catch.hpp>

#include "test_util.h"

// Options structs are filled with designated initializers that name only the fields they set.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

using namespace knit;
using knit::test::host;
using knit::test::random_values;
using DT = ir::DType;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// HBM -> SBUF tile of `dtype` (dma_copy converts through fp32).
nl::tensor load(const nl::tensor& x, DT dtype) {
  auto t = nl::ndarray(x.shape(), dtype);
  isa::dma_copy(t, x);
  return t;
}
nl::tensor load(const nl::tensor& x) { return load(x, x.dtype()); }

// SBUF tile -> a new kernel output of the same shape and dtype.
nl::tensor store(const nl::tensor& t) {
  auto out = nl::ndarray(t.shape(), t.dtype(), nl::shared_hbm);
  isa::dma_copy(out, t);
  return out;
}

// `body` must throw knit::Error for `rule`, pointing at line `line` of this file.
void expect_error(const std::function<void()>& body, const std::string& rule, const int& line) {
  try {
    body();
  } catch (const knit::Error& e) {
    INFO(e.what());
    CHECK(e.rule() == rule);
    CHECK_THAT(e.what(), Catch::Contains("test_select_ops.cpp:" + std::to_string(line) + ":"));
    return;
  }
  FAIL("expected a knit::Error with rule " << rule);
}

// A kernel traced directly in a test body, for verifier-rule checks: a rejected instruction
// throws before it is appended, so one tracer serves many checks.
struct Tracer {
  explicit Tracer(ir::Target target = ir::Target::trn2) : builder("rules", target), scope(builder) {}
  frontend::Builder builder;
  frontend::Builder::Scope scope;
};

uint32_t raw_u32(const HostTensor& t, int64_t i) {
  uint32_t v;
  std::memcpy(&v, t.bytes.data() + 4 * i, 4);
  return v;
}
uint16_t raw_u16(const HostTensor& t, int64_t i) {
  uint16_t v;
  std::memcpy(&v, t.bytes.data() + 2 * i, 2);
  return v;
}

std::vector<float> iota_values(size_t n, float start = 0.0f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

}  // namespace

// ---- select_reduce ----------------------------------------------------------------------------

TEST_CASE("select_reduce picks on_true where the predicate is nonzero", "[select][select_reduce]") {
  const int64_t P = 4, F = 6;
  const std::vector<float> x = random_values(P * F, 1);
  std::vector<float> mask(P * F);
  for (int64_t i = 0; i < P * F; ++i) mask[i] = static_cast<float>(i % 3);  // 0, 1, 2: nonzero = true
  for (bool reverse : {false, true}) {
    ir::Kernel k = trace("select",
                         [&](nl::tensor xs, nl::tensor ms) {
                           auto dst = nl::ndarray({P, F}, nl::float32);
                           isa::select_reduce(dst, load(ms, nl::uint8), load(xs), -5.0, {.reverse_pred = reverse});
                           return store(dst);
                         },
                         {arg({P, F}, nl::float32), arg({P, F}, nl::float32)});
    auto out = run(k, {host(DT::float32, {P, F}, x), host(DT::float32, {P, F}, mask)});
    for (int64_t i = 0; i < P * F; ++i) CHECK(out[0].get(i) == (((mask[i] != 0) != reverse) ? x[i] : -5.0f));
  }
}

TEST_CASE("select_reduce with a [P,1] on_false, bf16 dst and a local max into reduce_res", "[select][select_reduce]") {
  const int64_t P = 3, F = 5;
  const std::vector<float> x = random_values(P * F, 2, -3.0f, 3.0f);
  const std::vector<float> fill{-10.0f, 0.5f, 100.0f};
  std::vector<float> mask(P * F);
  for (int64_t i = 0; i < P * F; ++i) mask[i] = (i % 4 == 1) ? 0.0f : -1.0f;  // int16 -1 is "true"
  ir::Kernel k = trace("select_column",
                       [&](nl::tensor xs, nl::tensor ms, nl::tensor fs) {
                         auto dst = nl::ndarray({P, F}, nl::bfloat16);
                         auto res = nl::ndarray({P, 1}, nl::float32);
                         isa::select_reduce(dst, load(ms, nl::int16), load(xs), load(fs), {.reduce_res = res});
                         return std::make_tuple(store(dst), store(res));
                       },
                       {arg({P, F}, nl::float32), arg({P, F}, nl::float32), arg({P, 1}, nl::float32)});
  auto out = run(k, {host(DT::float32, {P, F}, x), host(DT::float32, {P, F}, mask), host(DT::float32, {P, 1}, fill)});
  for (int64_t p = 0; p < P; ++p) {
    float best = -kInf;
    for (int64_t j = 0; j < F; ++j) {
      const int64_t i = p * F + j;
      const float v = mask[i] != 0 ? x[i] : fill[p];
      best = std::max(best, v);
      CHECK(out[0].get(i) == ir::round_to(DT::bfloat16, v));
    }
    CHECK(out[1].get(p) == best);  // the reduction sees fp32 values, not the bf16 dst
  }
}

TEST_CASE("select_reduce reduce_cmd sequences drive the Vector Engine accumulators", "[select][select_reduce]") {
  const int64_t P = 2, F = 4;
  const std::vector<float> x = random_values(P * F, 3), y = random_values(P * F, 4);
  const std::vector<float> mask{1, 0, 1, 1, 0, 1, 1, 0};  // every row has a false element
  using isa::reduce_cmd;
  ir::Kernel k = trace(
      "accumulate",
      [&](nl::tensor xs, nl::tensor ys, nl::tensor ms) {
        auto xt = load(xs), yt = load(ys), pred = load(ms, nl::uint8);
        auto dst = nl::ndarray({P, F}, nl::float32);
        std::vector<nl::tensor> outs;
        auto step = [&](const nl::tensor& on_true, double on_false, reduce_cmd cmd, nl::Op op = nl::maximum) {
          auto res = nl::ndarray({P, 1}, nl::float32);
          isa::select_reduce(dst, pred, on_true, on_false, {.reduce_res = res, .reduce_cmd = cmd, .reduce_op = op});
          outs.push_back(store(res));
        };
        step(xt, -100, reduce_cmd::reset_reduce);            // r0 = max(sel x)
        step(yt, -100, reduce_cmd::reduce);                  // r1 = max(r0, max(sel y))
        step(yt, 50, reduce_cmd::idle);                      // r2 = local max (50); registers untouched
        step(xt, 7, reduce_cmd::reduce);                     // r3 = max(r1, 7): not 50
        step(xt, 7, reduce_cmd::reset);                      // r4 = -inf
        step(xt, 9, reduce_cmd::reset_reduce, nl::minimum);  // r5 = min(sel x with 9)
        step(yt, 9, reduce_cmd::reduce, nl::minimum);        // r6 = min(r5, min(sel y with 9))
        step(xt, 0.25, reduce_cmd::reset_reduce, nl::add);   // r7 = sum(sel x with 0.25)
        return outs;
      },
      {arg({P, F}, nl::float32), arg({P, F}, nl::float32), arg({P, F}, nl::float32)});
  auto out = run(k, {host(DT::float32, {P, F}, x), host(DT::float32, {P, F}, y), host(DT::float32, {P, F}, mask)});
  for (int64_t p = 0; p < P; ++p) {
    auto sel = [&](const std::vector<float>& v, float f, int64_t j) { return mask[p * F + j] != 0 ? v[p * F + j] : f; };
    float mx = -kInf, my = -kInf, mn = kInf, mny = kInf, sum = 0;
    for (int64_t j = 0; j < F; ++j) {
      mx = std::max(mx, sel(x, -100, j));
      my = std::max(my, sel(y, -100, j));
      mn = std::min(mn, sel(x, 9, j));
      mny = std::min(mny, sel(y, 9, j));
      sum = j == 0 ? sel(x, 0.25f, j) : sum + sel(x, 0.25f, j);
    }
    CHECK(out[0].get(p) == mx);
    CHECK(out[1].get(p) == std::max(mx, my));
    CHECK(out[2].get(p) == 50.0f);
    CHECK(out[3].get(p) == 7.0f);
    CHECK(out[4].get(p) == -kInf);
    CHECK(out[5].get(p) == mn);
    CHECK(out[6].get(p) == std::min(mn, mny));
    CHECK(out[7].get(p) == sum);
  }
}

TEST_CASE("select_reduce on a partition sub-range leaves the other partitions alone", "[select][select_reduce]") {
  const std::vector<float> x = random_values(8 * 4, 5);
  ir::Kernel k = trace("subrange",
                       [&](nl::tensor xs) {
                         auto xt = load(xs);
                         auto pred = nl::ndarray({8, 4}, nl::uint8);
                         auto dst = nl::ndarray({8, 4}, nl::float32);
                         auto res = nl::ndarray({2, 1}, nl::float32);
                         isa::memset(pred, 1);
                         isa::memset(dst, 0);
                         isa::select_reduce(dst(nl::ds(3, 2), nl::all), pred(nl::ds(3, 2), nl::all),
                                            xt(nl::ds(3, 2), nl::all), 0.0,
                                            {.reduce_res = res, .reduce_cmd = isa::reduce_cmd::reset_reduce});
                         return std::make_tuple(store(dst), store(res));
                       },
                       {arg({8, 4}, nl::float32)});
  auto out = run(k, {host(DT::float32, {8, 4}, x)});
  for (int64_t p = 0; p < 8; ++p)
    for (int64_t j = 0; j < 4; ++j) CHECK(out[0].get(p * 4 + j) == ((p == 3 || p == 4) ? x[p * 4 + j] : 0.0f));
  for (int64_t r = 0; r < 2; ++r)
    CHECK(out[1].get(r) == *std::max_element(x.begin() + (3 + r) * 4, x.begin() + (4 + r) * 4));
}

TEST_CASE("select_reduce verifier rules", "[select][select_reduce][verifier]") {
  Tracer tr;
  auto d = nl::ndarray({4, 8}, nl::float32), t = nl::ndarray({4, 8}, nl::float32);
  auto p = nl::ndarray({4, 8}, nl::uint8), pf = nl::ndarray({4, 8}, nl::float32);
  auto ti = nl::ndarray({4, 8}, nl::int32), f2 = nl::ndarray({4, 2}, nl::float32);
  auto pp = nl::ndarray({4, 8}, nl::uint8, nl::psum), tp = nl::ndarray({4, 8}, nl::float32, nl::psum);
  auto ri = nl::ndarray({4, 1}, nl::int32);
  expect_error([&] { isa::select_reduce(d, pf, t, 0.0); }, "dtype", __LINE__);
  expect_error([&] { isa::select_reduce(d, p, ti, 0.0); }, "dtype", __LINE__);
  expect_error([&] { isa::select_reduce(d, pp, tp, 0.0); }, "buffer", __LINE__);
  expect_error([&] { isa::select_reduce(d, p(nl::ds(0, 2), nl::all), t, 0.0); }, "partition-mismatch", __LINE__);
  expect_error([&] { isa::select_reduce(d, p, t(nl::all, nl::ds(0, 4)), 0.0); }, "free-size-mismatch", __LINE__);
  expect_error([&] { isa::select_reduce(d, p, t, f2); }, "operand-shape", __LINE__);
  expect_error([&] { isa::select_reduce(d, p, t, isa::operand{}); }, "operand", __LINE__);
  expect_error([&] { isa::select_reduce(d, p, t, 0.0, {.reduce_res = ri}); }, "dtype", __LINE__);
  expect_error([&] { isa::select_reduce(d, p, t, 0.0, {.reduce_op = nl::multiply}); }, "alu-op", __LINE__);
  const auto load = isa::reduce_cmd::load_reduce;
  expect_error([&] { isa::select_reduce(d, p, t, 0.0, {.reduce_cmd = load}); }, "reduce-cmd", __LINE__);
}

// ---- range_select -----------------------------------------------------------------------------

namespace {

bool compare(const nl::Op& op, float a, float b) {
  const std::string name = op.name;
  if (name == "equal") return a == b;
  if (name == "less") return a < b;
  if (name == "less_equal") return a <= b;
  if (name == "greater") return a > b;
  return a >= b;  // greater_equal
}

// Runs range_select on x [P, F] with per-partition bounds; returns {dst, reduce_res}.
std::vector<HostTensor> run_range_select(const std::vector<float>& x, int64_t P, int64_t F, DT dst_dtype,
                                         const nl::Op& c0, const nl::Op& c1, const std::vector<float>& b0,
                                         const std::vector<float>& b1, double start) {
  ir::Kernel k = trace("range_select",
                       [&](nl::tensor xs, nl::tensor b0s, nl::tensor b1s) {
                         auto dst = nl::ndarray({P, F}, dst_dtype);
                         auto res = nl::ndarray({P, 1}, nl::float32);
                         isa::range_select(dst, load(xs), c0, c1, load(b0s), load(b1s),
                                           {.reduce_res = res, .range_start = start});
                         return std::make_tuple(store(dst), store(res));
                       },
                       {arg({P, F}, nl::float32), arg({P, 1}, nl::float32), arg({P, 1}, nl::float32)});
  return run(k, {host(DT::float32, {P, F}, x), host(DT::float32, {P, 1}, b0), host(DT::float32, {P, 1}, b1)});
}

void check_range_select(const std::vector<float>& x, int64_t P, int64_t F, DT dst_dtype, const nl::Op& c0,
                        const nl::Op& c1, const std::vector<float>& b0, const std::vector<float>& b1, float start) {
  auto out = run_range_select(x, P, F, dst_dtype, c0, c1, b0, b1, start);
  for (int64_t p = 0; p < P; ++p) {
    float best = -FLT_MAX;
    for (int64_t j = 0; j < F; ++j) {
      const float idx = start + static_cast<float>(j);
      const bool keep = compare(c0, idx, b0[p]) && compare(c1, idx, b1[p]);
      const float v = keep ? x[p * F + j] : -FLT_MAX;
      best = std::max(best, v);
      CHECK(out[0].get(p * F + j) == ir::round_to(dst_dtype, v));
    }
    CHECK(out[1].get(p) == best);
  }
}

}  // namespace

TEST_CASE("range_select keeps the index window and max-reduces", "[select][range_select]") {
  const int64_t P = 3, F = 8;
  const std::vector<float> x = random_values(P * F, 6);
  // Row 2's window [5, 5) is empty: its reduce_res is the fill, -FLT_MAX.
  check_range_select(x, P, F, DT::float32, nl::greater_equal, nl::less, {1, 0, 5}, {4, 8, 5}, 0.0f);
  check_range_select(x, P, F, DT::float32, nl::greater, nl::less_equal, {3, 2.5f, -1}, {6.5f, 9, 100}, 2.5f);
  check_range_select(x, P, F, DT::float32, nl::equal, nl::less_equal, {3, 2, 9}, {3, 2, 9}, 0.0f);
}

TEST_CASE("range_select fill becomes -inf in low-precision destinations", "[select][range_select]") {
  REQUIRE(ir::round_to(DT::bfloat16, -FLT_MAX) == -kInf);
  REQUIRE(ir::round_to(DT::float16, -FLT_MAX) == -kInf);
  const int64_t P = 2, F = 6;
  const std::vector<float> x = random_values(P * F, 7);
  for (DT d : {DT::bfloat16, DT::float16}) {
    auto out = run_range_select(x, P, F, d, nl::greater_equal, nl::less, {2, 0}, {4, 1}, 0.0);
    CHECK(out[0].get(0) == -kInf);
    CHECK(out[0].get(2) == ir::round_to(d, x[2]));
    CHECK(out[0].get(F + 1) == -kInf);
    CHECK(out[1].get(0) == std::max(x[2], x[3]));  // reduce_res (fp32) sees fp32 values
  }
  check_range_select(x, P, F, DT::bfloat16, nl::greater_equal, nl::less, {2, 0}, {4, 1}, 0.0f);
}

TEST_CASE("range_select reduce then reduce accumulates across windows", "[select][range_select]") {
  const int64_t P = 2, F = 6;
  const std::vector<float> x = random_values(P * F, 8);
  ir::Kernel k = trace("windows",
                       [&](nl::tensor xs) {
                         auto xt = load(xs);
                         auto lo = nl::ndarray({P, 1}, nl::float32), mid = nl::ndarray({P, 1}, nl::float32);
                         auto hi = nl::ndarray({P, 1}, nl::float32);
                         isa::memset(lo, 0);
                         isa::memset(mid, 2);
                         isa::memset(hi, 4);
                         auto dst = nl::ndarray({P, F}, nl::float32);
                         auto r0 = nl::ndarray({P, 1}, nl::float32), r1 = nl::ndarray({P, 1}, nl::float32);
                         isa::range_select(dst, xt, nl::greater_equal, nl::less, lo, mid, {.reduce_res = r0});
                         isa::range_select(dst, xt, nl::greater_equal, nl::less, mid, hi,
                                           {.reduce_cmd = isa::reduce_cmd::reduce, .reduce_res = r1});
                         return std::make_tuple(store(r0), store(r1));
                       },
                       {arg({P, F}, nl::float32)});
  auto out = run(k, {host(DT::float32, {P, F}, x)});
  for (int64_t p = 0; p < P; ++p) {
    const float* row = x.data() + p * F;
    CHECK(out[0].get(p) == std::max(row[0], row[1]));
    CHECK(out[1].get(p) == std::max({row[0], row[1], row[2], row[3]}));
  }
}

TEST_CASE("range_select verifier rules", "[select][range_select][verifier]") {
  {
    Tracer trn1(ir::Target::trn1);
    auto d = nl::ndarray({4, 8}, nl::float32), b = nl::ndarray({4, 1}, nl::float32);
    expect_error([&] { isa::range_select(d, d, nl::greater_equal, nl::less, b, b); }, "target", __LINE__);
  }
  Tracer tr;
  auto d = nl::ndarray({4, 8}, nl::float32), ti = nl::ndarray({4, 8}, nl::int32);
  auto b = nl::ndarray({4, 1}, nl::float32), bh = nl::ndarray({4, 1}, nl::bfloat16);
  auto b2 = nl::ndarray({4, 2}, nl::float32);
  const auto ge = nl::greater_equal, lt = nl::less;
  expect_error([&] { isa::range_select(d, d, nl::not_equal, lt, b, b); }, "alu-op", __LINE__);
  expect_error([&] { isa::range_select(d, d, ge, lt, b, b, {.on_false_value = -1e30}); }, "operand", __LINE__);
  expect_error([&] { isa::range_select(d, d, ge, lt, bh, b); }, "dtype", __LINE__);
  expect_error([&] { isa::range_select(d, d, ge, lt, b, b2); }, "operand-shape", __LINE__);
  expect_error([&] { isa::range_select(d, ti, ge, lt, b, b); }, "dtype", __LINE__);
  expect_error([&] { isa::range_select(d, d, ge, lt, b, b, {.reduce_op = nl::add}); }, "alu-op", __LINE__);
}

// ---- bn_stats / bn_aggr -----------------------------------------------------------------------

TEST_CASE("bn_stats gives count, mean and var*count of the even then the odd elements", "[select][bn_stats]") {
  const int64_t P = 3, F = 7;
  std::vector<float> x = iota_values(F, 1.0f);  // row 0: 1..7
  const std::vector<float> r = random_values(2 * F, 9);
  x.insert(x.end(), r.begin(), r.end());
  ir::Kernel k = trace("bn_stats",
                       [&](nl::tensor xs) {
                         auto dst = nl::ndarray({P, 6}, nl::float32);
                         isa::bn_stats(dst, load(xs));
                         return store(dst);
                       },
                       {arg({P, F}, nl::float32)});
  auto out = run(k, {host(DT::float32, {P, F}, x)});
  // Row 0 by hand: evens {1,3,5,7} mean 4, sum sq dev 20; odds {2,4,6} mean 4, sum sq dev 8.
  const std::vector<float> row0{4, 4, 20, 3, 4, 8};
  for (int i = 0; i < 6; ++i) CHECK(out[0].get(i) == row0[i]);
  for (int64_t p = 1; p < P; ++p)
    for (int parity = 0; parity < 2; ++parity) {
      double n = 0, sum = 0, m2 = 0;
      for (int64_t j = parity; j < F; j += 2) n += 1, sum += x[p * F + j];
      const double mean = sum / n;
      for (int64_t j = parity; j < F; j += 2) m2 += (x[p * F + j] - mean) * (x[p * F + j] - mean);
      CHECK(out[0].get(p * 6 + 3 * parity) == n);
      CHECK(out[0].get(p * 6 + 3 * parity + 1) == Approx(mean).margin(1e-6));
      CHECK(out[0].get(p * 6 + 3 * parity + 2) == Approx(m2).epsilon(1e-5));
    }
}

TEST_CASE("bn_stats of a single element has an empty odd group", "[select][bn_stats]") {
  ir::Kernel k = trace("bn_stats1",
                       [](nl::tensor xs) {
                         auto dst = nl::ndarray({1, 6}, nl::float32);
                         isa::bn_stats(dst, load(xs));
                         return store(dst);
                       },
                       {arg({1, 1}, nl::float32)});
  auto out = run(k, {host(DT::float32, {1, 1}, {5.0f})});
  CHECK(out[0].to_floats() == std::vector<float>{1, 5, 0, 0, 0, 0});
}

TEST_CASE("bn_aggr of chunked bn_stats gives the row mean and population variance", "[select][bn_aggr]") {
  const int64_t P = 4, F = 1024;
  const std::vector<float> x = random_values(P * F, 10, -1.0f, 3.0f);
  ir::Kernel k = trace("mean_var",
                       [&](nl::tensor xs) {
                         auto xt = load(xs);
                         auto stats = nl::ndarray({P, 12}, nl::float32);
                         for (int64_t c = 0; c < 2; ++c)
                           isa::bn_stats(stats(nl::all, nl::ds(6 * c, 6)), xt(nl::all, nl::ds(512 * c, 512)));
                         auto mv = nl::ndarray({P, 2}, nl::float32);
                         isa::bn_aggr(mv, stats);
                         return store(mv);
                       },
                       {arg({P, F}, nl::float32)});
  auto out = run(k, {host(DT::float32, {P, F}, x)});
  for (int64_t p = 0; p < P; ++p) {
    double sum = 0, sq = 0;
    for (int64_t j = 0; j < F; ++j) sum += x[p * F + j];
    const double mean = sum / F;
    for (int64_t j = 0; j < F; ++j) sq += (x[p * F + j] - mean) * (x[p * F + j] - mean);
    CHECK(out[0].get(2 * p) == Approx(mean).epsilon(1e-5));
    CHECK(out[0].get(2 * p + 1) == Approx(sq / F).epsilon(1e-5));
  }
}

TEST_CASE("bn_aggr combines hand-written triples; empty triples are ignored", "[select][bn_aggr]") {
  ir::Kernel k = trace("aggr",
                       [](nl::tensor s) {
                         auto mv = nl::ndarray({2, 2}, nl::float32);
                         isa::bn_aggr(mv, load(s));
                         return store(mv);
                       },
                       {arg({2, 6}, nl::float32)});
  // Row 0: samples {0, 2} (2, 1, 2) and {2, 4, 6} (3, 4, 8): mean 2.8, var (2+8+2*3.24+3*1.44)/5.
  auto out = run(k, {host(DT::float32, {2, 6}, {2, 1, 2, 3, 4, 8, 0, 0, 0, 4, 2, 8})});
  CHECK(out[0].get(0) == Approx(2.8));
  CHECK(out[0].get(1) == Approx((2 + 8 + 2 * 3.24 + 3 * 1.44) / 5));
  CHECK(out[0].get(2) == 2.0f);
  CHECK(out[0].get(3) == 2.0f);
}

TEST_CASE("bn_stats and bn_aggr verifier rules", "[select][bn_stats][bn_aggr][verifier]") {
  Tracer tr;
  auto d6 = nl::ndarray({4, 6}, nl::float32), d5 = nl::ndarray({4, 5}, nl::float32);
  auto x = nl::ndarray({4, 16}, nl::float32), wide = nl::ndarray({4, 513}, nl::float32);
  auto d2 = nl::ndarray({4, 2}, nl::float32), d3 = nl::ndarray({4, 3}, nl::float32);
  expect_error([&] { isa::bn_stats(d6, wide); }, "free-size-limit", __LINE__);
  expect_error([&] { isa::bn_stats(d5, x); }, "operand-shape", __LINE__);
  expect_error([&] { isa::bn_stats(d6(nl::ds(0, 2), nl::all), x); }, "partition-mismatch", __LINE__);
  expect_error([&] { isa::bn_aggr(d2, x(nl::all, nl::ds(0, 7))); }, "operand-shape", __LINE__);
  expect_error([&] { isa::bn_aggr(d3, d6); }, "operand-shape", __LINE__);
}

// ---- max8 / nc_find_index8 --------------------------------------------------------------------

TEST_CASE("max8 returns the 8 largest values per partition, descending, ties kept", "[select][max8]") {
  const int64_t P = 3, F = 20;
  std::vector<float> x = random_values(P * F, 11, 0.0f, 5.0f);
  for (float& v : x) v = std::floor(v) - 2.0f;  // -2..2: many ties
  for (DT d : {DT::float32, DT::bfloat16}) {
    ir::Kernel k = trace("max8",
                         [&](nl::tensor xs) {
                           auto dst = nl::ndarray({P, 8}, d);
                           isa::max8(dst, load(xs));
                           return store(dst);
                         },
                         {arg({P, F}, nl::float32)});
    std::vector<float> xs = x;
    xs[5] = 1.00390625f;  // rounds to 1 in bf16 but ranks above the 1s
    auto out = run(k, {host(DT::float32, {P, F}, xs)});
    for (int64_t p = 0; p < P; ++p) {
      std::vector<float> row(xs.begin() + p * F, xs.begin() + (p + 1) * F);
      std::sort(row.begin(), row.end(), std::greater<float>());
      for (int64_t i = 0; i < 8; ++i) CHECK(out[0].get(p * 8 + i) == ir::round_to(d, row[i]));
    }
  }
}

TEST_CASE("max8 of exactly 8 elements sorts them; NaN ranks first", "[select][max8]") {
  const std::vector<float> x{3, -1, 7, 7, -8, 0, 2, 5, 1, NAN, -kInf, 4, 4, 9, 0, 6};
  ir::Kernel k = trace("max8_small",
                       [](nl::tensor xs) {
                         auto dst = nl::ndarray({2, 8}, nl::float32);
                         isa::max8(dst, load(xs));
                         return store(dst);
                       },
                       {arg({2, 8}, nl::float32)});
  auto out = run(k, {host(DT::float32, {2, 8}, x)});
  const std::vector<float> row0{7, 7, 5, 3, 2, 0, -1, -8};
  for (int i = 0; i < 8; ++i) CHECK(out[0].get(i) == row0[i]);
  CHECK(std::isnan(out[0].get(8)));
  const std::vector<float> row1{9, 6, 4, 4, 1, 0, -kInf};
  for (int i = 0; i < 7; ++i) CHECK(out[0].get(9 + i) == row1[i]);
}

TEST_CASE("nc_find_index8 finds first occurrences; duplicates take the next; missing is all-ones",
          "[select][nc_find_index8]") {
  const std::vector<float> data{5, 3, 5, 7, 1, 5, 9, 3, 0, 2,  //
                                0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<float> vals{5, 5, 3, 42, 5, 5, 3, 3,  //
                                9, 8, 7, 0,  1, 2, 3, 4};
  const int64_t missing = -1;
  const std::vector<int64_t> want{0, 2, 1, missing, 5, missing, 7, missing, 9, 8, 7, 0, 1, 2, 3, 4};
  for (DT d : {DT::uint32, DT::uint16}) {
    ir::Kernel k = trace("find8",
                         [&](nl::tensor ds, nl::tensor vs) {
                           auto dst = nl::ndarray({2, 8}, d);
                           isa::nc_find_index8(dst, load(ds), load(vs));
                           return store(dst);
                         },
                         {arg({2, 10}, nl::float32), arg({2, 8}, nl::float32)});
    auto out = run(k, {host(DT::float32, {2, 10}, data), host(DT::float32, {2, 8}, vals)});
    for (size_t i = 0; i < want.size(); ++i) {
      if (d == DT::uint32) CHECK(raw_u32(out[0], i) == (want[i] < 0 ? 0xFFFFFFFFu : uint32_t(want[i])));
      else CHECK(raw_u16(out[0], i) == (want[i] < 0 ? 0xFFFFu : uint16_t(want[i])));
    }
  }
}

TEST_CASE("max8 and nc_find_index8 verifier rules", "[select][max8][nc_find_index8][verifier]") {
  Tracer tr;
  auto d = nl::ndarray({4, 8}, nl::float32), d4 = nl::ndarray({4, 4}, nl::float32);
  auto x = nl::ndarray({4, 64}, nl::float32), huge = nl::ndarray({4, 16385}, nl::bfloat16);
  auto u = nl::ndarray({4, 8}, nl::uint32);
  expect_error([&] { isa::max8(d, x(nl::all, nl::ds(0, 7))); }, "free-size-limit", __LINE__);
  expect_error([&] { isa::max8(d, huge); }, "free-size-limit", __LINE__);
  expect_error([&] { isa::max8(d4, x); }, "operand-shape", __LINE__);
  expect_error([&] { isa::nc_find_index8(d, x, d); }, "dtype", __LINE__);
  expect_error([&] { isa::nc_find_index8(u, x, d4); }, "operand-shape", __LINE__);
  expect_error([&] { isa::nc_find_index8(u, x(nl::all, nl::ds(0, 4)), d); }, "free-size-limit", __LINE__);
  expect_error([&] { isa::nc_find_index8(u, x, d(nl::ds(0, 2), nl::all)); }, "partition-mismatch", __LINE__);
}

// ---- iota / affine_select ---------------------------------------------------------------------

namespace {

// Runs iota into a [P, F] tile of `dtype` and returns it.
HostTensor run_iota(int64_t P, int64_t F, DT dtype, std::vector<ir::ApDim> pattern, int64_t offset, int64_t cm) {
  ir::Kernel k = trace("iota",
                       [&]() {
                         auto dst = nl::ndarray({P, F}, dtype);
                         isa::iota(dst, pattern, offset, cm);
                         return store(dst);
                       },
                       {});
  return run(k, {})[0];
}

}  // namespace

TEST_CASE("iota computes offset + p*channel_multiplier + sum(i*step)", "[select][iota]") {
  SECTION("2-D pattern, int32") {
    auto out = run_iota(4, 12, DT::int32, {{10, 3}, {1, 4}}, 5, 100);
    for (int64_t p = 0; p < 4; ++p)
      for (int64_t a = 0; a < 3; ++a)
        for (int64_t b = 0; b < 4; ++b) CHECK(out.get(p * 12 + a * 4 + b) == 5 + 100 * p + 10 * a + b);
  }
  SECTION("negative steps, fp32") {
    auto out = run_iota(2, 8, DT::float32, {{-1, 8}}, 3, 2);
    for (int64_t p = 0; p < 2; ++p)
      for (int64_t j = 0; j < 8; ++j) CHECK(out.get(p * 8 + j) == static_cast<float>(3 + 2 * p - j));
  }
  SECTION("3-D pattern with a zero step") {
    auto out = run_iota(1, 8, DT::int32, {{0, 2}, {3, 2}, {1, 2}}, 0, 0);
    CHECK(out.to_floats() == std::vector<float>{0, 1, 3, 4, 0, 1, 3, 4});
  }
  SECTION("empty pattern: one value per partition") {
    auto out = run_iota(5, 1, DT::int16, {}, -2, 3);
    CHECK(out.to_floats() == std::vector<float>{-2, 1, 4, 7, 10});
  }
  SECTION("integer destinations saturate") {
    auto i8 = run_iota(1, 8, DT::int8, {{50, 8}}, -200, 0);
    CHECK(i8.to_floats() == std::vector<float>{-128, -128, -100, -50, 0, 50, 100, 127});
    auto u8 = run_iota(1, 4, DT::uint8, {{200, 4}}, -100, 0);
    CHECK(u8.to_floats() == std::vector<float>{0, 100, 255, 255});
  }
  SECTION("float destinations round") {
    auto out = run_iota(1, 4, DT::bfloat16, {{1, 4}}, 255, 0);
    for (int j = 0; j < 4; ++j) CHECK(out.get(j) == ir::round_to(DT::bfloat16, 255.0f + j));
  }
}

TEST_CASE("affine_select builds a causal mask", "[select][affine_select]") {
  const int64_t P = 4, F = 6;
  const std::vector<float> x = random_values(P * F, 12);
  ir::Kernel k = trace("causal",
                       [&](nl::tensor xs) {
                         auto dst = nl::ndarray({P, F}, nl::float32);
                         // value = p - j; keep x where p - j >= 0 (lower triangle).
                         isa::affine_select(dst, {{-1, F}}, 1, load(xs), -1e9, {.cmp_op = nl::greater_equal});
                         return store(dst);
                       },
                       {arg({P, F}, nl::float32)});
  auto out = run(k, {host(DT::float32, {P, F}, x)});
  for (int64_t p = 0; p < P; ++p)
    for (int64_t j = 0; j < F; ++j) CHECK(out[0].get(p * F + j) == (p - j >= 0 ? x[p * F + j] : -1e9f));
}

TEST_CASE("affine_select with offset, equal, dtype conversion and bit-exact copies", "[select][affine_select]") {
  SECTION("sub-diagonal into bf16") {
    const std::vector<float> x = random_values(3 * 5, 13);
    ir::Kernel k = trace("diag",
                         [&](nl::tensor xs) {
                           auto dst = nl::ndarray({3, 5}, nl::bfloat16);
                           isa::affine_select(dst, {{-1, 5}}, 1, load(xs), 1.00390625,
                                              {.cmp_op = nl::equal, .offset = -1});
                           return store(dst);
                         },
                         {arg({3, 5}, nl::float32)});
    auto out = run(k, {host(DT::float32, {3, 5}, x)});
    for (int64_t p = 0; p < 3; ++p)
      for (int64_t j = 0; j < 5; ++j)
        CHECK(out[0].get(p * 5 + j) == ir::round_to(DT::bfloat16, j == p - 1 ? x[p * 5 + j] : 1.00390625f));
  }
  SECTION("int32 on_true into int32 dst keeps every bit") {
    HostTensor in = HostTensor::zeros(DT::int32, {2, 4});
    const int32_t big[8] = {16777217, -16777217, 2147483647, 5, -3, 123456789, 7, 0};
    std::memcpy(in.bytes.data(), big, sizeof(big));
    ir::Kernel k = trace("exact",
                         [](nl::tensor xs) {
                           auto dst = nl::ndarray({2, 4}, nl::int32);
                           isa::affine_select(dst, {{1, 4}}, 0, load(xs), -7,
                                              {.cmp_op = nl::less, .offset = -2});  // j < 2
                           return store(dst);
                         },
                         {arg({2, 4}, nl::int32)});
    auto out = run(k, {in});
    for (int i = 0; i < 8; ++i) {
      int32_t v;
      std::memcpy(&v, out[0].bytes.data() + 4 * i, 4);
      CHECK(v == (i % 4 < 2 ? big[i] : -7));
    }
  }
}

TEST_CASE("iota and affine_select verifier rules", "[select][iota][affine_select][verifier]") {
  Tracer tr;
  auto d = nl::ndarray({4, 8}, nl::float32), dp = nl::ndarray({4, 8}, nl::float32, nl::psum);
  auto d32 = nl::ndarray({4, 32}, nl::int32), t6 = nl::ndarray({4, 6}, nl::float32);
  expect_error([&] { isa::iota(dp, {{1, 8}}); }, "buffer", __LINE__);
  expect_error([&] { isa::iota(d, {{1, 4}}); }, "free-size-mismatch", __LINE__);
  expect_error([&] { isa::iota(d32, {{16, 2}, {8, 2}, {4, 2}, {2, 2}, {1, 2}}); }, "operand-shape", __LINE__);
  expect_error([&] { isa::iota(d, {{1 << 30, 8}}); }, "operand", __LINE__);  // 7 * 2^30 > INT32_MAX
  expect_error([&] { isa::affine_select(d, {{1, 8}}, 1, d, 0.0, {.cmp_op = nl::add}); }, "alu-op", __LINE__);
  expect_error([&] { isa::affine_select(d, {{1, 8}}, 1, dp, 0.0); }, "buffer", __LINE__);
  expect_error([&] { isa::affine_select(d, {{1, 8}}, 1, t6, 0.0); }, "free-size-mismatch", __LINE__);
}

// ---- tensor_partition_reduce ------------------------------------------------------------------

TEST_CASE("tensor_partition_reduce folds partitions in fp32", "[select][tensor_partition_reduce]") {
  const int64_t P = 5, F = 3;
  const std::vector<float> x = random_values(P * F, 14);
  for (nl::Op op : {nl::add, nl::average, nl::maximum}) {
    ir::Kernel k = trace("preduce",
                         [&](nl::tensor xs) {
                           auto dst = nl::ndarray({1, F}, nl::float32);
                           isa::tensor_partition_reduce(dst, op, load(xs));
                           return store(dst);
                         },
                         {arg({P, F}, nl::float32)});
    auto out = run(k, {host(DT::float32, {P, F}, x)});
    for (int64_t j = 0; j < F; ++j) {
      float sum = x[j], mx = x[j];
      for (int64_t p = 1; p < P; ++p) sum += x[p * F + j], mx = std::max(mx, x[p * F + j]);
      const std::string name = op.name;
      CHECK(out[0].get(j) == (name == "add" ? sum : name == "average" ? sum / 5.0f : mx));
    }
  }
}

TEST_CASE("tensor_partition_reduce bitwise ops combine bit patterns", "[select][tensor_partition_reduce]") {
  const std::vector<float> x{1, 6, 0x70, 3, 12, 0x0F, 5, 4, 0xFF};  // [3, 3]
  for (DT d : {DT::int32, DT::uint8}) {
    ir::Kernel k = trace("bits",
                         [&](nl::tensor xs) {
                           auto xt = load(xs, d);
                           auto o = nl::ndarray({1, 3}, d), a = nl::ndarray({1, 3}, d);
                           isa::tensor_partition_reduce(o, nl::bitwise_or, xt);
                           isa::tensor_partition_reduce(a, nl::bitwise_and, xt);
                           return std::make_tuple(store(o), store(a));
                         },
                         {arg({3, 3}, nl::float32)});
    auto out = run(k, {host(DT::float32, {3, 3}, x)});
    CHECK(out[0].to_floats() == std::vector<float>{1 | 3 | 5, 6 | 12 | 4, 0x70 | 0x0F | 0xFF});
    CHECK(out[1].to_floats() == std::vector<float>{1 & 3 & 5, 6 & 12 & 4, 0x70 & 0x0F & 0xFF});
  }
}

TEST_CASE("tensor_partition_reduce verifier rules", "[select][tensor_partition_reduce][verifier]") {
  Tracer tr;
  auto d = nl::ndarray({1, 8}, nl::float32), x = nl::ndarray({4, 8}, nl::float32);
  auto xp = nl::ndarray({4, 8}, nl::float32, nl::psum);
  expect_error([&] { isa::tensor_partition_reduce(d, nl::add, xp); }, "buffer", __LINE__);
  expect_error([&] { isa::tensor_partition_reduce(d, nl::multiply, x); }, "alu-op", __LINE__);
  expect_error([&] { isa::tensor_partition_reduce(x(nl::ds(0, 2), nl::all), nl::add, x); }, "operand-shape", __LINE__);
  auto d4 = d(nl::all, nl::ds(0, 4));
  expect_error([&] { isa::tensor_partition_reduce(d4, nl::add, x); }, "free-size-mismatch", __LINE__);
  expect_error([&] { isa::tensor_partition_reduce(d, nl::bitwise_or, x); }, "dtype", __LINE__);
}

// ---- local_gather -----------------------------------------------------------------------------

namespace {

// NKI's numpy reference: per 16-partition core c, indices_1d = index[16c:16c+16].flatten('F');
// every partition q of the core takes src[q, idx + e] for e < E.
std::vector<float> local_gather_expected(const std::vector<float>& src, int64_t P, int64_t F,
                                         const std::vector<float>& index, int64_t IF, int64_t E, int64_t valid) {
  std::vector<float> out(P * valid * E);
  for (int64_t c = 0; c < P / 16; ++c) {
    std::vector<int64_t> flat;
    for (int64_t col = 0; col < IF; ++col)
      for (int64_t q = 0; q < 16; ++q) flat.push_back(static_cast<int64_t>(index[(16 * c + q) * IF + col]));
    for (int64_t q = 16 * c; q < 16 * c + 16; ++q)
      for (int64_t k = 0; k < valid; ++k)
        for (int64_t e = 0; e < E; ++e) out[q * valid * E + k * E + e] = src[q * F + flat[k] + e];
  }
  return out;
}

std::vector<HostTensor> run_local_gather(const std::vector<float>& src, int64_t P, int64_t F, DT dtype,
                                         const std::vector<float>& index, int64_t IF, int64_t E, int64_t valid,
                                         int* line = nullptr) {
  ir::Kernel k = trace("local_gather",
                       [&](nl::tensor s, nl::tensor i) {
                         auto dst = nl::ndarray({P, valid * E}, dtype);
                         auto st = load(s), it = load(i);
                         if (line) *line = __LINE__ + 1;
                         isa::local_gather(dst, st, it, E, valid);
                         return store(dst);
                       },
                       {arg({P, F}, dtype), arg({P, IF}, nl::uint16)});
  return run(k, {host(dtype, {P, F}, src), host(DT::uint16, {P, IF}, index)});
}

}  // namespace

TEST_CASE("local_gather gathers within each 16-partition core group", "[select][local_gather]") {
  SECTION("two cores, two elements per index, all indices") {
    const int64_t P = 32, F = 16, IF = 2, E = 2;
    std::vector<float> src(P * F), index(P * IF);
    for (int64_t i = 0; i < P * F; ++i) src[i] = static_cast<float>((i / F) * 100 + i % F);
    for (int64_t p = 0; p < P; ++p)
      for (int64_t c = 0; c < IF; ++c) index[p * IF + c] = static_cast<float>((3 * p + 5 * c) % 15);
    auto out = run_local_gather(src, P, F, DT::float32, index, IF, E, 16 * IF);
    CHECK(out[0].to_floats() == local_gather_expected(src, P, F, index, IF, E, 16 * IF));
  }
  SECTION("fewer valid indices, bf16 bit exact") {
    const int64_t P = 16, F = 8, IF = 2;
    const std::vector<float> src = knit::test::rounded(DT::bfloat16, random_values(P * F, 15));
    std::vector<float> index(P * IF);
    for (int64_t i = 0; i < P * IF; ++i) index[i] = static_cast<float>((7 * i) % 8);
    auto out = run_local_gather(src, P, F, DT::bfloat16, index, IF, 1, 20);
    CHECK(out[0].to_floats() == local_gather_expected(src, P, F, index, IF, 1, 20));
  }
}

TEST_CASE("local_gather index past the partition is a runtime out-of-bounds error", "[select][local_gather]") {
  std::vector<float> index(16, 3.0f);
  index[9] = 15;  // 15 + 2 elements > 16
  int line = 0;
  const std::vector<float> src(16 * 16, 1.0f);
  expect_error([&] { run_local_gather(src, 16, 16, DT::float32, index, 1, 2, 16, &line); }, "out-of-bounds", line);
}

TEST_CASE("local_gather verifier rules", "[select][local_gather][verifier]") {
  Tracer tr;
  auto s = nl::ndarray({32, 16}, nl::float32), i = nl::ndarray({32, 2}, nl::uint16);
  auto d = nl::ndarray({32, 32}, nl::float32), dh = nl::ndarray({32, 32}, nl::bfloat16);
  auto dp = nl::ndarray({32, 32}, nl::float32, nl::psum), ii = nl::ndarray({32, 2}, nl::int32);
  auto i257 = nl::ndarray({16, 257}, nl::uint16), d257 = nl::ndarray({16, 16 * 257}, nl::float32);
  auto rows = [](const nl::tensor& t, int64_t start, int64_t n) { return t(nl::ds(start, n), nl::all); };
  expect_error([&] { isa::local_gather(rows(d, 0, 24), rows(s, 0, 24), rows(i, 0, 24)); }, "operand-shape", __LINE__);
  expect_error([&] { isa::local_gather(rows(d, 8, 16), rows(s, 8, 16), rows(i, 8, 16)); }, "operand-shape", __LINE__);
  expect_error([&] { isa::local_gather(d, s, i, 3); }, "operand", __LINE__);
  expect_error([&] { isa::local_gather(d, s, i, 1, 33); }, "operand", __LINE__);
  expect_error([&] { isa::local_gather(d257, rows(s, 0, 16), i257); }, "free-size-limit", __LINE__);
  expect_error([&] { isa::local_gather(d, s, i, 2); }, "free-size-mismatch", __LINE__);
  expect_error([&] { isa::local_gather(d, s, ii); }, "dtype", __LINE__);
  expect_error([&] { isa::local_gather(dh, s, i); }, "dtype", __LINE__);
  expect_error([&] { isa::local_gather(dp, s, i); }, "buffer", __LINE__);
}

// ---- nc_n_gather ------------------------------------------------------------------------------

namespace {

std::vector<HostTensor> run_n_gather(const std::vector<float>& data, DT dtype, const std::vector<float>& indices,
                                     int* line = nullptr) {
  ir::Kernel k = trace("n_gather",
                       [&](nl::tensor d, nl::tensor i) {
                         auto dst = nl::ndarray({3, 2, 3}, dtype);
                         auto dt = load(d), it = load(i);
                         if (line) *line = __LINE__ + 1;
                         isa::nc_n_gather(dst, dt, it);
                         return store(dst);
                       },
                       {arg({3, 4, 5}, dtype), arg({3, 2, 3}, nl::uint32)});
  return run(k, {host(dtype, {3, 4, 5}, data), host(DT::uint32, {3, 2, 3}, indices)});
}

}  // namespace

TEST_CASE("nc_n_gather gathers per partition over the flattened free dims", "[select][nc_n_gather]") {
  std::vector<float> indices(18);
  for (int64_t p = 0; p < 3; ++p)
    for (int64_t j = 0; j < 6; ++j) indices[p * 6 + j] = static_cast<float>((7 * p + 3 * j) % 20);
  for (DT d : {DT::float32, DT::bfloat16}) {
    const std::vector<float> data = knit::test::rounded(d, random_values(60, 16));
    auto out = run_n_gather(data, d, indices);
    for (int64_t p = 0; p < 3; ++p)
      for (int64_t j = 0; j < 6; ++j)
        CHECK(out[0].get(p * 6 + j) == data[p * 20 + static_cast<int64_t>(indices[p * 6 + j])]);
  }
}

TEST_CASE("nc_n_gather index outside the partition is a runtime out-of-bounds error", "[select][nc_n_gather]") {
  std::vector<float> indices(18, 0.0f);
  indices[10] = 20;
  int line = 0;
  expect_error([&] { run_n_gather(std::vector<float>(60, 1.0f), DT::float32, indices, &line); }, "out-of-bounds", line);
}

TEST_CASE("nc_n_gather verifier rules", "[select][nc_n_gather][verifier]") {
  Tracer tr;
  auto d = nl::ndarray({4, 8}, nl::float32), x = nl::ndarray({4, 16}, nl::float32);
  auto u = nl::ndarray({4, 8}, nl::uint32), ii = nl::ndarray({4, 8}, nl::int32);
  auto dh = nl::ndarray({4, 8}, nl::bfloat16), xp = nl::ndarray({4, 16}, nl::float32, nl::psum);
  expect_error([&] { isa::nc_n_gather(d, x, ii); }, "dtype", __LINE__);
  expect_error([&] { isa::nc_n_gather(dh, x, u); }, "dtype", __LINE__);
  expect_error([&] { isa::nc_n_gather(d(nl::all, nl::ds(0, 4)), x, u); }, "free-size-mismatch", __LINE__);
  expect_error([&] { isa::nc_n_gather(d, x(nl::ds(0, 2), nl::all), u); }, "partition-mismatch", __LINE__);
  expect_error([&] { isa::nc_n_gather(d, xp, u); }, "buffer", __LINE__);
}
