// Semantics and verifier rules of the compute instructions: activation, activation_reduce,
// tensor_tensor, tensor_scalar, scalar_tensor_tensor, reciprocal, tensor_tensor_scan,
// tensor_reduce and tensor_scalar_reduce. Expected values are computed here with plain loops,
// std:: math in fp32 and ir::round_to for the destination rounding (never with the simulator's
// own alu()/activate()).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>

#include <catch2/catch.hpp>

#include "test_util.h"

using namespace knit;
using ir::DType;
using knit::test::host;
using knit::test::random_values;

namespace {

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const DType f32 = DType::float32;
using Tiles = std::vector<nl::tensor>;
using RC = isa::reduce_cmd;

// An SBUF copy of an HBM input, and an HBM output holding a copy of an on-chip tile.
nl::tensor load(const nl::tensor& x) {
  auto t = nl::ndarray(x.shape(), x.dtype());
  isa::dma_copy(t, x);
  return t;
}
nl::tensor store(const nl::tensor& t) {
  auto out = nl::ndarray(t.shape(), t.dtype(), nl::shared_hbm);
  isa::dma_copy(out, t);
  return out;
}

// Traces `fn` with one parameter per input (same shape and dtype) and runs it.
template <class Fn>
std::vector<HostTensor> run_kernel(Fn&& fn, std::vector<HostTensor> inputs) {
  std::vector<ArgSpec> specs;
  for (const HostTensor& h : inputs) specs.push_back(arg(h.shape, h.dtype));
  return run(trace("k", fn, specs), inputs);
}

// Runs a kernel that loads each input (1 to 3) into SBUF, applies `body` to those tiles and
// returns copies of the tiles `body` returns, in order.
std::vector<HostTensor> run_tiles(std::vector<HostTensor> inputs, const std::function<Tiles(const Tiles&)>& body) {
  auto go = [&](auto... xs) {
    Tiles outs;
    for (const nl::tensor& t : body({load(xs)...})) outs.push_back(store(t));
    return outs;
  };
  switch (inputs.size()) {
    case 1: return run_kernel([&](nl::tensor a) { return go(a); }, inputs);
    case 2: return run_kernel([&](nl::tensor a, nl::tensor b) { return go(a, b); }, inputs);
    default: return run_kernel([&](nl::tensor a, nl::tensor b, nl::tensor c) { return go(a, b, c); }, inputs);
  }
}

HostTensor ints(DType t, std::vector<int64_t> shape, const std::vector<int64_t>& v) {
  HostTensor h = HostTensor::zeros(t, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) ir::store_int(t, v[i], h.bytes.data() + i * ir::dtype_size(t));
  return h;
}
int64_t int_at(const HostTensor& h, int64_t i) {
  return ir::load_int(h.dtype, h.bytes.data() + i * ir::dtype_size(h.dtype));
}

bool same_value(float a, float b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

void check_values(const HostTensor& out, const std::vector<float>& want) {
  REQUIRE(out.num_elements() == static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i << ": got " << out.get(i) << ", want " << want[i]);
    CHECK(same_value(out.get(i), want[i]));
  }
}

void check_ints(const HostTensor& out, const std::vector<int64_t>& want) {
  REQUIRE(out.num_elements() == static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i);
    CHECK(int_at(out, i) == want[i]);
  }
}

// The documented reduction order: a left fold in fp32 starting from the first element.
float fold(const float* v, int64_t n, const std::function<float(float, float)>& op) {
  float r = v[0];
  for (int64_t i = 1; i < n; ++i) r = op(r, v[i]);
  return r;
}
float fold_add(const float* v, int64_t n) {
  return fold(v, n, [](float a, float b) { return a + b; });
}
float fold_max(const float* v, int64_t n) {
  return fold(v, n, [](float a, float b) { return std::fmax(a, b); });
}

}  // namespace

// ---- activation -----------------------------------------------------------------------------------

TEST_CASE("activation: op(data * imm scale + [P,1] bias) rounded to dst", "[compute][activation]") {
  const int64_t P = 3, F = 5;
  const auto x = random_values(P * F, 1);
  const std::vector<float> bias{0.5f, -1.25f, 2.0f};
  for (DType dt : {f32, DType::bfloat16}) {
    auto out = run_tiles({host(f32, {P, F}, x), host(f32, {P, 1}, bias)}, [&](const Tiles& t) -> Tiles {
      auto y = nl::ndarray({P, F}, dt);
      isa::activation(y, nl::exp, t[0], {.bias = t[1], .scale = 0.5});
      return {y};
    });
    std::vector<float> want(P * F);
    for (int64_t i = 0; i < P * F; ++i) want[i] = ir::round_to(dt, std::exp(x[i] * 0.5f + bias[i / F]));
    check_values(out[0], want);
  }
}

TEST_CASE("activation: [P,1] scale, immediate bias, NaN/Inf propagation and overflow", "[compute][activation]") {
  const int64_t P = 2, F = 5;
  const std::vector<float> x{kInf, -kInf, kNaN, 3e38f, 1.5f, kInf, -2.0f, kNaN, 3e38f, 0.0f};
  const std::vector<float> scale{2.0f, 0.0f};  // inf * 0 = NaN; 3e38 * 2 overflows to inf
  for (DType dt : {f32, DType::bfloat16}) {
    auto out = run_tiles({host(f32, {P, F}, x), host(f32, {P, 1}, scale)}, [&](const Tiles& t) -> Tiles {
      auto y = nl::ndarray({P, F}, dt), z = nl::ndarray({P, F}, dt);
      isa::activation(y, nl::copy, t[0], {.bias = 1.0, .scale = t[1]});
      isa::activation(z, nl::tanh, t[0], {.scale = t[1]});
      return {y, z};
    });
    std::vector<float> want_y(P * F), want_z(P * F);
    for (int64_t i = 0; i < P * F; ++i) {
      want_y[i] = ir::round_to(dt, x[i] * scale[i / F] + 1.0f);
      want_z[i] = ir::round_to(dt, std::tanh(x[i] * scale[i / F]));
    }
    check_values(out[0], want_y);
    check_values(out[1], want_z);
    CHECK(std::isnan(out[0].get(5)));  // inf * 0
    CHECK(out[0].get(3) == kInf);      // 3e38 * 2 overflows fp32
    CHECK(out[1].get(0) == 1.0f);      // tanh(inf)
  }
}

TEST_CASE("activation: bf16 writes round to nearest, ties to even", "[compute][activation]") {
  // 1 + 2^-8 and 1 + 3*2^-8 are halfway between bf16 neighbours; 257 and 259 too (spacing 2).
  const std::vector<float> x{1.00390625f, 1.01171875f, -1.00390625f, 257.0f, 259.0f, 1.0f + 0x1p-7f + 0x1p-9f};
  auto out = run_tiles({host(f32, {1, 6}, x)}, [](const Tiles& t) -> Tiles {
    auto y = nl::ndarray({1, 6}, nl::bfloat16);
    isa::activation(y, nl::copy, t[0]);
    return {y};
  });
  check_values(out[0], {1.0f, 1.015625f, -1.0f, 256.0f, 260.0f, 1.0078125f});
}

TEST_CASE("activation: reduce_cmd sequences on the Scalar Engine accumulators", "[compute][activation]") {
  const int64_t P = 4, F = 6;
  const auto x = random_values(P * F, 7);
  auto out = run_tiles({host(f32, {P, F}, x)}, [&](const Tiles& t) -> Tiles {
    auto e = nl::ndarray({P, F}, nl::bfloat16), c = nl::ndarray({P, F}, nl::float32);
    auto r1 = nl::ndarray({P, 1}, nl::float32), r2 = nl::ndarray({P, 1}, nl::float32);
    auto r3 = nl::ndarray({P, 1}, nl::float32), r4 = nl::ndarray({P, 1}, nl::bfloat16);
    // reset_reduce (no read-out) then reduce: the accumulator sums across both instructions.
    isa::activation(e, nl::exp, t[0], {.reduce_op = nl::add, .reduce_cmd = RC::reset_reduce});
    isa::activation(c, nl::copy, t[0], {.reduce_op = nl::add, .reduce_res = r1, .reduce_cmd = RC::reduce});
    isa::activation(c, nl::copy, t[0], {.reduce_res = r2});  // idle: read-out only
    isa::activation(c, nl::copy, t[0], {.reduce_res = r3, .reduce_cmd = RC::reset});
    isa::activation(c, nl::square, t[0], {.reduce_op = nl::add, .reduce_res = r4, .reduce_cmd = RC::reset_reduce});
    return {e, r1, r2, r3, r4};
  });
  for (int64_t p = 0; p < P; ++p) {
    std::vector<float> ex(F), ex_rounded(F), sq(F);
    for (int64_t j = 0; j < F; ++j) {
      ex[j] = std::exp(x[p * F + j]);
      ex_rounded[j] = ir::round_to(DType::bfloat16, ex[j]);
      sq[j] = x[p * F + j] * x[p * F + j];
    }
    // The reduction sees the fp32 activation outputs, not the bf16 values written to dst.
    const float acc = fold_add(ex.data(), F) + fold_add(&x[p * F], F);
    REQUIRE(acc != fold_add(ex_rounded.data(), F) + fold_add(&x[p * F], F));
    CHECK(out[0].get(p * F) == ex_rounded[0]);
    CHECK(out[1].get(p) == acc);
    CHECK(out[2].get(p) == acc);
    CHECK(out[3].get(p) == 0.0f);
    CHECK(out[4].get(p) == ir::round_to(DType::bfloat16, fold_add(sq.data(), F)));
  }
}

TEST_CASE("activation: maximum reduction (trn2+) and in-place dst", "[compute][activation]") {
  const std::vector<float> x{-3.0f, -1.0f, -7.0f, -2.0f, 5.0f, kNaN, 1.0f, 4.0f};
  auto out = run_tiles({host(f32, {2, 4}, x)}, [&](const Tiles& t) -> Tiles {
    auto r = nl::ndarray({2, 1}, nl::float32);
    isa::activation(t[0], nl::copy, t[0], {.scale = 2.0, .reduce_op = nl::maximum, .reduce_cmd = RC::reset_reduce});
    isa::activation(t[0], nl::copy, t[0],
                    {.bias = -100.0, .reduce_op = nl::maximum, .reduce_res = r, .reduce_cmd = RC::reduce});
    return {t[0], r};
  });
  std::vector<float> want(8);
  for (int i = 0; i < 8; ++i) want[i] = x[i] * 2.0f - 100.0f;
  check_values(out[0], want);
  // Row maxima of 2x (fmax-style: a NaN element is skipped), then max with the rows of 2x - 100.
  CHECK(out[1].get(0) == -2.0f);
  CHECK(out[1].get(1) == 10.0f);
}

// ---- activation_reduce ------------------------------------------------------------------------------

TEST_CASE("activation_reduce: resets, reduces the fp32 outputs and reads out", "[compute][activation_reduce]") {
  const int64_t P = 3, F = 7;
  const auto x = random_values(P * F, 11);
  const std::vector<float> bias{0.25f, -0.5f, 1.0f};
  for (DType dt : {f32, DType::bfloat16}) {
    auto out = run_tiles({host(f32, {P, F}, x), host(f32, {P, 1}, bias)}, [&](const Tiles& t) -> Tiles {
      auto y = nl::ndarray({P, F}, dt), junk = nl::ndarray({P, F}, nl::float32), s = nl::ndarray({P, 1}, dt);
      // Leave something in the accumulators; activation_reduce must discard it.
      isa::activation(junk, nl::copy, t[0], {.scale = 100.0, .reduce_op = nl::add, .reduce_cmd = RC::reset_reduce});
      isa::activation_reduce(y, nl::square, t[0], nl::add, s, {.bias = t[1]});
      return {y, s};
    });
    for (int64_t p = 0; p < P; ++p) {
      std::vector<float> y(F);
      for (int64_t j = 0; j < F; ++j) {
        const float v = x[p * F + j] + bias[p];
        y[j] = v * v;
        CHECK(out[0].get(p * F + j) == ir::round_to(dt, y[j]));
      }
      CHECK(out[1].get(p) == ir::round_to(dt, fold_add(y.data(), F)));
    }
  }
}

// ---- tensor_tensor ------------------------------------------------------------------------------------

TEST_CASE("tensor_tensor: arithmetic ops in fp32, rounded to dst, NaN/Inf", "[compute][tensor_tensor]") {
  const int64_t P = 2, F = 6;
  std::vector<float> a = random_values(P * F, 3), b = random_values(P * F, 4);
  a[0] = kInf, b[0] = kInf;   // inf - inf = NaN, inf * inf = inf
  a[1] = kNaN, b[1] = 1.0f;   // NaN propagates through arithmetic; fmax/fmin skip it
  a[2] = 1.0f, b[2] = 0.0f;   // 1 / 0 = inf
  a[3] = -0.0f, b[3] = 0.0f;  // equal
  const std::vector<std::pair<nl::Op, std::function<float(float, float)>>> cases{
      {nl::add, [](float p, float q) { return p + q; }},
      {nl::subtract, [](float p, float q) { return p - q; }},
      {nl::multiply, [](float p, float q) { return p * q; }},
      {nl::divide, [](float p, float q) { return p / q; }},
      {nl::maximum, [](float p, float q) { return std::fmax(p, q); }},
      {nl::minimum, [](float p, float q) { return std::fmin(p, q); }},
      {nl::greater, [](float p, float q) { return p > q ? 1.0f : 0.0f; }},
      {nl::equal, [](float p, float q) { return p == q ? 1.0f : 0.0f; }},
  };
  for (DType dt : {f32, DType::bfloat16}) {
    for (const auto& [op, f] : cases) {
      INFO("op " << op.name << " dst " << ir::to_string(dt));
      auto out = run_tiles({host(f32, {P, F}, a), host(f32, {P, F}, b)}, [&](const Tiles& t) -> Tiles {
        auto y = nl::ndarray({P, F}, dt);
        isa::tensor_tensor(y, t[0], t[1], op);
        return {y};
      });
      std::vector<float> want(P * F);
      for (int64_t i = 0; i < P * F; ++i) want[i] = ir::round_to(dt, f(a[i], b[i]));
      check_values(out[0], want);
    }
  }
}

TEST_CASE("tensor_tensor: bit-vector ops on integer bit patterns", "[compute][tensor_tensor]") {
  const std::vector<int64_t> a{0x0F0F, -16, 12345678, -1}, b{0x00FF, 2, 3, 31};
  const std::vector<std::pair<nl::Op, std::function<uint32_t(uint32_t, uint32_t)>>> cases{
      {nl::bitwise_and, [](uint32_t p, uint32_t q) { return p & q; }},
      {nl::bitwise_or, [](uint32_t p, uint32_t q) { return p | q; }},
      {nl::bitwise_xor, [](uint32_t p, uint32_t q) { return p ^ q; }},
      // Logical shifts of the 32-bit pattern; shifting by 32 or more clears it.
      {nl::left_shift, [](uint32_t p, uint32_t q) { return q >= 32 ? 0u : p << q; }},
      {nl::right_shift, [](uint32_t p, uint32_t q) { return q >= 32 ? 0u : p >> q; }},
  };
  for (const auto& [op, f] : cases) {
    INFO("op " << op.name);
    auto out = run_tiles({ints(DType::int32, {1, 4}, a), ints(DType::int32, {1, 4}, b)}, [&](const Tiles& t) -> Tiles {
      auto y = nl::ndarray({1, 4}, nl::int32);
      isa::tensor_tensor(y, t[0], t[1], op);
      return {y};
    });
    std::vector<int64_t> want(4);
    for (int i = 0; i < 4; ++i)
      want[i] = static_cast<int32_t>(f(static_cast<uint32_t>(a[i]), static_cast<uint32_t>(b[i])));
    check_ints(out[0], want);
  }
  // uint16: shifts are on the (zero-extended) pattern and the result keeps the low 16 bits.
  auto out = run_tiles({ints(DType::uint16, {1, 3}, {0xF00F, 1, 0x8000}), ints(DType::uint16, {1, 3}, {4, 15, 1})},
                       [](const Tiles& t) -> Tiles {
                         auto l = nl::ndarray({1, 3}, nl::uint16), r = nl::ndarray({1, 3}, nl::uint16);
                         isa::tensor_tensor(l, t[0], t[1], nl::left_shift);
                         isa::tensor_tensor(r, t[0], t[1], nl::right_shift);
                         return {l, r};
                       });
  check_ints(out[0], {0x00F0, 0x8000, 0x0000});
  check_ints(out[1], {0x0F00, 0x0000, 0x4000});
}

TEST_CASE("tensor_tensor: int32/uint32 use exact integer math with saturation", "[compute][tensor_tensor]") {
  const std::vector<int64_t> a{16777217, 2147483647, -2147483647 - 1, 100000, -7, 46341};
  const std::vector<int64_t> b{1, 1, -1, 100000, 3, 46341};
  const int64_t lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
  const std::vector<std::pair<nl::Op, std::function<int64_t(int64_t, int64_t)>>> cases{
      {nl::add, [](int64_t p, int64_t q) { return p + q; }},
      {nl::subtract, [](int64_t p, int64_t q) { return p - q; }},
      {nl::multiply, [](int64_t p, int64_t q) { return p * q; }},
      {nl::maximum, [](int64_t p, int64_t q) { return std::max(p, q); }},
      {nl::minimum, [](int64_t p, int64_t q) { return std::min(p, q); }},
  };
  for (const auto& [op, f] : cases) {
    INFO("op " << op.name);
    auto out = run_tiles({ints(DType::int32, {1, 6}, a), ints(DType::int32, {1, 6}, b)}, [&](const Tiles& t) -> Tiles {
      auto y = nl::ndarray({1, 6}, nl::int32), u = nl::ndarray({1, 6}, nl::uint32);
      isa::tensor_tensor(y, t[0], t[1], op);
      isa::tensor_tensor(u, t[0], t[1], op, isa::gpsimd_engine);
      return {y, u};
    });
    std::vector<int64_t> want(6), want_u(6);
    for (int i = 0; i < 6; ++i) {
      want[i] = std::clamp(f(a[i], b[i]), lo, hi);
      want_u[i] = std::clamp<int64_t>(f(a[i], b[i]), 0, 4294967295LL);
    }
    check_ints(out[0], want);
    check_ints(out[1], want_u);
  }
  // uint32 x uint32 products overflow int64 and still saturate.
  auto out = run_tiles(
      {ints(DType::uint32, {1, 3}, {4000000000LL, 5, 0}), ints(DType::uint32, {1, 3}, {4000000000LL, 3, 7})},
      [](const Tiles& t) -> Tiles {
        auto m = nl::ndarray({1, 3}, nl::uint32), s = nl::ndarray({1, 3}, nl::uint32);
        isa::tensor_tensor(m, t[0], t[1], nl::multiply);
        isa::tensor_tensor(s, t[0], t[1], nl::subtract);
        return {m, s};
      });
  check_ints(out[0], {4294967295LL, 15, 0});
  check_ints(out[1], {0, 2, 0});
}

TEST_CASE("tensor_tensor: int32 falls back to fp32 on the Vector Engine or with PSUM", "[compute][tensor_tensor]") {
  // 16777217 is not an fp32 value: it reads as 16777216, and 16777216 + 1 rounds back (ties to even).
  auto out = run_tiles({ints(DType::int32, {1, 2}, {16777217, 100}), ints(DType::int32, {1, 2}, {1, 2147483647})},
                       [](const Tiles& t) -> Tiles {
                         auto pa = nl::ndarray({1, 2}, nl::int32, nl::psum);
                         isa::tensor_copy(pa, t[0]);
                         auto v = nl::ndarray({1, 2}, nl::int32), p = nl::ndarray({1, 2}, nl::int32);
                         auto g = nl::ndarray({1, 2}, nl::int32);
                         isa::tensor_tensor(v, t[0], t[1], nl::add, isa::vector_engine);
                         isa::tensor_tensor(p, pa, t[1], nl::add);
                         isa::tensor_tensor(g, t[0], t[1], nl::add);
                         return {v, p, g};
                       });
  check_ints(out[0], {16777216, 2147483647});
  check_ints(out[1], {16777216, 2147483647});
  check_ints(out[2], {16777218, 2147483647});
}

TEST_CASE("tensor_tensor: reads all inputs before writing an overlapping dst; power", "[compute][tensor_tensor]") {
  const std::vector<float> x{1, 2, 3, 4, 5, 10, 20, 30, 40, 50};
  auto out = run_tiles({host(f32, {2, 5}, x)}, [](const Tiles& t) -> Tiles {
    auto ones = nl::ndarray({2, 4}, nl::float32), pw = nl::ndarray({2, 5}, nl::float32);
    isa::memset(ones, 1.0);
    isa::tensor_tensor(pw, t[0], t[0], nl::power, isa::gpsimd_engine);
    // dst = t[:, 1:5] overlaps data1 = t[:, 0:4] one element later.
    isa::tensor_tensor(t[0](nl::all, nl::ds(1, 4)), t[0](nl::all, nl::ds(0, 4)), ones, nl::add);
    return {t[0], pw};
  });
  check_values(out[0], {1, 2, 3, 4, 5, 10, 11, 21, 31, 41});
  std::vector<float> want(10);
  for (int i = 0; i < 10; ++i) want[i] = std::pow(x[i], x[i]);
  check_values(out[1], want);
}

// ---- tensor_scalar --------------------------------------------------------------------------------------

TEST_CASE("tensor_scalar: two stages with immediates and [P,1] tiles, reverse flags", "[compute][tensor_scalar]") {
  const int64_t P = 3, F = 4;
  const auto x = random_values(P * F, 21);
  const std::vector<float> c0{1.0f, -2.0f, 0.5f}, c1{3.0f, -0.25f, 8.0f};
  for (DType dt : {f32, DType::bfloat16}) {
    auto out = run_tiles(
        {host(f32, {P, F}, x), host(f32, {P, 1}, c0), host(f32, {P, 1}, c1)}, [&](const Tiles& t) -> Tiles {
          auto a = nl::ndarray({P, F}, dt), b = nl::ndarray({P, F}, dt), c = nl::ndarray({P, F}, dt);
          isa::tensor_scalar(a, t[0], nl::multiply, 2.0, {.op1 = nl::add, .operand1 = 1.0});
          // b = c1 / (c0 - x)
          isa::tensor_scalar(b, t[0], nl::subtract, t[1],
                             {.reverse0 = true, .op1 = nl::divide, .operand1 = t[2], .reverse1 = true});
          isa::tensor_scalar(c, t[0], nl::subtract, t[1]);  // op1 = None: one stage
          return {a, b, c};
        });
    std::vector<float> wa(P * F), wb(P * F), wc(P * F);
    for (int64_t i = 0; i < P * F; ++i) {
      const int64_t p = i / F;
      wa[i] = ir::round_to(dt, x[i] * 2.0f + 1.0f);
      wb[i] = ir::round_to(dt, c1[p] / (c0[p] - x[i]));
      wc[i] = ir::round_to(dt, x[i] - c0[p]);
    }
    check_values(out[0], wa);
    check_values(out[1], wb);
    check_values(out[2], wc);
  }
}

TEST_CASE("tensor_scalar: unary op0 ignores operand0; float results round/saturate into ints",
          "[compute][tensor_scalar]") {
  const std::vector<float> x{-4.0f, 0.25f, kNaN, -kInf, 1.0f, 5.0f, -5.0f, 300.0f};
  auto out = run_tiles({host(f32, {1, 8}, x)}, [](const Tiles& t) -> Tiles {
    auto a = nl::ndarray({1, 8}, nl::float32), r = nl::ndarray({1, 8}, nl::float32), q = nl::ndarray({1, 8}, nl::int8);
    isa::tensor_scalar(a, t[0], nl::abs, {}, {.op1 = nl::multiply, .operand1 = 3.0});
    isa::tensor_scalar(r, t[0], nl::rsqrt, 123.0);  // operand0 ignored
    isa::tensor_scalar(q, t[0], nl::multiply, 0.5);
    return {a, r, q};
  });
  std::vector<float> wa(8), wr(8);
  for (int i = 0; i < 8; ++i) {
    wa[i] = std::fabs(x[i]) * 3.0f;
    wr[i] = 1.0f / std::sqrt(x[i]);
  }
  check_values(out[0], wa);
  check_values(out[1], wr);
  // x * 0.5 = -2, 0.125, NaN, -inf, 0.5, 2.5, -2.5, 150: half to even, NaN -> 0, saturation.
  check_ints(out[2], {-2, 0, 0, -128, 0, 2, -2, 127});
}

TEST_CASE("tensor_scalar: bit-vector ops with immediates, tiles and reverse", "[compute][tensor_scalar]") {
  const std::vector<int64_t> x{0x1234, -1, 5, 0xFF};
  auto out = run_tiles(
      {ints(DType::int32, {2, 2}, x), ints(DType::int32, {2, 1}, {1, 2})}, [](const Tiles& t) -> Tiles {
        auto a = nl::ndarray({2, 2}, nl::int32), b = nl::ndarray({2, 2}, nl::int32), c = nl::ndarray({2, 2}, nl::uint8);
        isa::tensor_scalar(a, t[0], nl::bitwise_and, 240.0, {.op1 = nl::bitwise_or, .operand1 = 3.0});
        isa::tensor_scalar(b, t[0], nl::left_shift, t[1], {.reverse0 = true});  // t[1] << x
        isa::tensor_scalar(c, t[0], nl::invert, {}, {.op1 = nl::right_shift, .operand1 = t[1]});
        return {a, b, c};
      });
  const std::vector<uint32_t> col{1, 2};
  std::vector<int64_t> wa(4), wb(4), wc(4);
  for (int i = 0; i < 4; ++i) {
    const uint32_t u = static_cast<uint32_t>(x[i]), s = col[i / 2];
    wa[i] = static_cast<int32_t>((u & 240u) | 3u);
    wb[i] = static_cast<int32_t>(u >= 32 ? 0u : s << u);
    wc[i] = static_cast<uint8_t>(~u >> s);
  }
  check_ints(out[0], wa);
  check_ints(out[1], wb);
  check_ints(out[2], wc);
}

// ---- scalar_tensor_tensor -----------------------------------------------------------------------------

TEST_CASE("scalar_tensor_tensor: (data op0 operand0) op1 operand1 with reverse flags",
          "[compute][scalar_tensor_tensor]") {
  const int64_t P = 2, F = 5;
  auto x = random_values(P * F, 31), y = random_values(P * F, 32);
  x[0] = kNaN, y[1] = kInf;
  const std::vector<float> col{0.75f, -3.0f};
  for (DType dt : {f32, DType::bfloat16}) {
    auto out = run_tiles({host(f32, {P, F}, x), host(f32, {P, F}, y), host(f32, {P, 1}, col)},
                         [&](const Tiles& t) -> Tiles {
                           auto a = nl::ndarray({P, F}, dt), b = nl::ndarray({P, F}, dt);
                           isa::scalar_tensor_tensor(a, t[0], nl::subtract, t[2], nl::multiply, t[1]);  // (x - c) * y
                           isa::scalar_tensor_tensor(b, t[0], nl::subtract, 2.0, nl::divide, t[1],
                                                     {.reverse0 = true, .reverse1 = true});  // y / (2 - x)
                           return {a, b};
                         });
    std::vector<float> wa(P * F), wb(P * F);
    for (int64_t i = 0; i < P * F; ++i) {
      wa[i] = ir::round_to(dt, (x[i] - col[i / F]) * y[i]);
      wb[i] = ir::round_to(dt, y[i] / (2.0f - x[i]));
    }
    check_values(out[0], wa);
    check_values(out[1], wb);
  }
}

// ---- reciprocal -------------------------------------------------------------------------------------------

TEST_CASE("reciprocal: 1/x in fp32, zeros, infinities and NaN", "[compute][reciprocal]") {
  const std::vector<float> x{2.0f, -4.0f, 0.0f, -0.0f, kInf, kNaN, 3.0f, 1e-40f};
  for (DType dt : {f32, DType::bfloat16}) {
    auto out = run_tiles({host(f32, {2, 4}, x)}, [&](const Tiles& t) -> Tiles {
      auto y = nl::ndarray({2, 4}, dt);
      isa::reciprocal(y, t[0]);
      return {y};
    });
    std::vector<float> want(8);
    for (int i = 0; i < 8; ++i) want[i] = ir::round_to(dt, 1.0f / x[i]);
    check_values(out[0], want);
    CHECK(out[0].get(2) == kInf);
    CHECK(out[0].get(3) == -kInf);
    CHECK(out[0].get(4) == 0.0f);
    CHECK(out[0].get(7) == kInf);  // 1 / 1e-40 overflows fp32
  }
}

// ---- tensor_tensor_scan ------------------------------------------------------------------------------------

TEST_CASE("tensor_tensor_scan: cumulative sum, decays, [P,1] initial, reverse flags", "[compute][tensor_tensor_scan]") {
  const int64_t P = 2, F = 6;
  const auto d0 = random_values(P * F, 41, 0.5f, 1.0f), d1 = random_values(P * F, 42);
  const std::vector<float> init{0.3f, -1.7f};
  for (DType dt : {f32, DType::bfloat16}) {
    auto out = run_tiles({host(f32, {P, F}, d0), host(f32, {P, F}, d1), host(f32, {P, 1}, init)},
                         [&](const Tiles& t) -> Tiles {
                           auto ones = nl::ndarray({P, F}, nl::float32);
                           isa::memset(ones, 1.0);
                           auto cum = nl::ndarray({P, F}, dt), dec = nl::ndarray({P, F}, dt);
                           auto rev = nl::ndarray({P, F}, dt);
                           isa::tensor_tensor_scan(cum, ones, t[1], 0.5, nl::multiply, nl::add);
                           isa::tensor_tensor_scan(dec, t[0], t[1], t[2], nl::multiply, nl::add);
                           isa::tensor_tensor_scan(rev, t[0], t[1], t[2], nl::subtract, nl::subtract,
                                                   {.reverse0 = true, .reverse1 = true});
                           return {cum, dec, rev};
                         });
    for (int64_t p = 0; p < P; ++p) {
      float cum = 0.5f, dec = init[p], rev = init[p];  // carries stay fp32
      for (int64_t j = 0; j < F; ++j) {
        const int64_t i = p * F + j;
        cum = 1.0f * cum + d1[i];
        dec = d0[i] * dec + d1[i];
        rev = d1[i] - (rev - d0[i]);
        CHECK(out[0].get(i) == ir::round_to(dt, cum));
        CHECK(out[1].get(i) == ir::round_to(dt, dec));
        CHECK(out[2].get(i) == ir::round_to(dt, rev));
      }
    }
  }
}

// ---- tensor_reduce -------------------------------------------------------------------------------------------

TEST_CASE("tensor_reduce: left fold in element order, fp32 and bf16 dst", "[compute][tensor_reduce]") {
  // Row 0 shows the order: ((1e8 + 1) - 1e8) + 1 = 1 in fp32 (a pairwise sum would give 2).
  const std::vector<float> x{1e8f, 1.0f, -1e8f, 1.0f, 1.5f, kNaN, 2.0f, 3.0f, 0.1f, 0.2f, 0.3f, 0.4f};
  for (DType dt : {f32, DType::bfloat16}) {
    auto out = run_tiles({host(f32, {3, 4}, x)}, [&](const Tiles& t) -> Tiles {
      auto s = nl::ndarray({3, 1}, dt), m = nl::ndarray({3, 1}, dt), d = nl::ndarray({3, 1}, dt);
      isa::tensor_reduce(s, nl::add, t[0], {1});
      isa::tensor_reduce(m, nl::maximum, t[0], {-1}, {.negate = true});
      isa::tensor_reduce(d, nl::subtract, t[0], {1});
      return {s, m, d};
    });
    for (int p = 0; p < 3; ++p) {
      const float* row = &x[p * 4];
      CHECK(same_value(out[0].get(p), ir::round_to(dt, fold_add(row, 4))));
      CHECK(out[1].get(p) == ir::round_to(dt, -fold_max(row, 4)));
      CHECK(same_value(out[2].get(p), ir::round_to(dt, fold(row, 4, [](float a, float b) { return a - b; }))));
    }
    CHECK(out[0].get(0) == 1.0f);
    CHECK(std::isnan(out[0].get(1)));  // NaN propagates through add
    CHECK(out[1].get(1) == -3.0f);     // maximum skips NaN, then negate
  }
}

TEST_CASE("tensor_reduce: trailing axes of a 3-D tile, keepdims, bit-vector ops", "[compute][tensor_reduce]") {
  std::vector<float> x(2 * 3 * 4);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.5f - 3.0f;
  auto out = run_tiles({host(f32, {2, 3, 4}, x)}, [](const Tiles& t) -> Tiles {
    auto last = nl::ndarray({2, 3}, nl::float32), both = nl::ndarray({2, 1, 1}, nl::float32);
    isa::tensor_reduce(last, nl::multiply, t[0], {2});
    isa::tensor_reduce(both, nl::add, t[0], {1, 2}, {.keepdims = true});
    return {last, both};
  });
  for (int g = 0; g < 6; ++g) CHECK(out[0].get(g) == fold(&x[g * 4], 4, [](float a, float b) { return a * b; }));
  for (int p = 0; p < 2; ++p) CHECK(out[1].get(p) == fold_add(&x[p * 12], 12));

  auto bits = run_tiles({ints(DType::int32, {2, 3}, {0x01, 0x10, 0x100, -1, 0x0F, 0x3C})}, [](const Tiles& t) -> Tiles {
    auto o = nl::ndarray({2, 1}, nl::int32), a = nl::ndarray({2, 1}, nl::int32), x8 = nl::ndarray({2, 1}, nl::uint8);
    isa::tensor_reduce(o, nl::bitwise_or, t[0], {1});
    isa::tensor_reduce(a, nl::bitwise_and, t[0], {1});
    isa::tensor_reduce(x8, nl::bitwise_xor, t[0], {1});
    return {o, a, x8};
  });
  check_ints(bits[0], {0x111, -1});
  check_ints(bits[1], {0, 0x0C});
  check_ints(bits[2], {0x11, static_cast<uint8_t>(~0x0Fu ^ 0x3Cu)});
}

// ---- tensor_scalar_reduce ---------------------------------------------------------------------------------------

TEST_CASE("tensor_scalar_reduce: dst and a reduction of the fp32 results", "[compute][tensor_scalar_reduce]") {
  const int64_t P = 3, F = 5;
  const auto x = random_values(P * F, 51);
  const std::vector<float> col{1.5f, -0.5f, 2.25f};
  for (DType dt : {f32, DType::bfloat16}) {
    auto out = run_tiles({host(f32, {P, F}, x), host(f32, {P, 1}, col)}, [&](const Tiles& t) -> Tiles {
      auto y = nl::ndarray({P, F}, dt), z = nl::ndarray({P, F}, dt);
      auto s = nl::ndarray({P, 1}, nl::float32), mx = nl::ndarray({P, 1}, nl::float32);
      auto mn = nl::ndarray({P, 1}, dt), pr = nl::ndarray({P, 1}, nl::float32);
      isa::tensor_scalar_reduce(y, t[0], nl::multiply, 3.0, nl::add, {.reduce_res = s});
      isa::tensor_scalar_reduce(z, t[0], nl::subtract, t[1], nl::maximum, {.reduce_res = mx, .reverse0 = true});
      isa::tensor_scalar_reduce(z, t[0], nl::subtract, t[1], nl::minimum, {.reduce_res = mn, .reverse0 = true});
      isa::tensor_scalar_reduce(z, t[0], nl::add, t[1], nl::multiply, {.reduce_res = pr});
      return {y, z, s, mx, mn, pr};
    });
    for (int64_t p = 0; p < P; ++p) {
      std::vector<float> y(F), r(F), a(F);
      for (int64_t j = 0; j < F; ++j) {
        y[j] = x[p * F + j] * 3.0f;
        r[j] = col[p] - x[p * F + j];
        a[j] = x[p * F + j] + col[p];
        CHECK(out[0].get(p * F + j) == ir::round_to(dt, y[j]));
        CHECK(out[1].get(p * F + j) == ir::round_to(dt, a[j]));
      }
      CHECK(out[2].get(p) == fold_add(y.data(), F));  // from fp32 values, even with a bf16 dst
      CHECK(out[3].get(p) == fold_max(r.data(), F));
      CHECK(out[4].get(p) == ir::round_to(dt, fold(r.data(), F, [](float u, float v) { return std::fmin(u, v); })));
      CHECK(out[5].get(p) == fold(a.data(), F, [](float u, float v) { return u * v; }));
    }
  }
}

TEST_CASE("tensor_scalar_reduce: reduce_cmd sequences on the Vector Engine accumulators",
          "[compute][tensor_scalar_reduce]") {
  const int64_t P = 2, F = 4;
  const auto x = random_values(P * F, 61);
  const std::vector<float> init{5.0f, -6.0f};
  auto out = run_tiles({host(f32, {P, F}, x), host(f32, {P, 1}, init)}, [&](const Tiles& t) -> Tiles {
    auto d = nl::ndarray({P, F}, nl::float32);
    Tiles r;
    for (int i = 0; i < 9; ++i) r.push_back(nl::ndarray({P, 1}, nl::float32));
    auto tsr = [&](const nl::Op& op0, double imm, const nl::Op& red, isa::TensorScalarReduceOptions o) {
      isa::tensor_scalar_reduce(d, t[0], op0, imm, red, o);
    };
    isa::activation(d, nl::copy, t[0], {.reduce_op = nl::add, .reduce_cmd = RC::reset_reduce});  // ScalarE: separate
    tsr(nl::multiply, 1.0, nl::add, {});  // reset_reduce (the default), no read-out
    tsr(nl::multiply, 2.0, nl::add, {.reduce_res = r[0], .reduce_cmd = RC::reduce});
    tsr(nl::add, 0.0, nl::add, {.reduce_res = r[1], .reduce_cmd = RC::idle, .reduce_res_negate = true});
    tsr(nl::add, 0.0, nl::add, {.reduce_res = r[2], .reduce_cmd = RC::idle});
    tsr(nl::add, 0.0, nl::add, {.reduce_res = r[3], .reduce_cmd = RC::load_reduce, .reduce_init = 10.0});
    tsr(nl::add, 0.0, nl::maximum, {.reduce_res = r[4], .reduce_cmd = RC::load_reduce, .reduce_init = t[1]});
    tsr(nl::add, 0.0, nl::maximum, {.reduce_res = r[5], .reduce_cmd = RC::reset});
    tsr(nl::add, 0.0, nl::minimum, {.reduce_res = r[6], .reduce_cmd = RC::reset});
    tsr(nl::add, 0.0, nl::multiply, {.reduce_res = r[7], .reduce_cmd = RC::reset});
    isa::activation(d, nl::copy, t[0], {.reduce_res = r[8]});  // idle read-out of ScalarE
    return r;
  });
  for (int64_t p = 0; p < P; ++p) {
    const float* row = &x[p * F];
    std::vector<float> twice(F);
    for (int64_t j = 0; j < F; ++j) twice[j] = row[j] * 2.0f;
    const float acc = fold_add(row, F) + fold_add(twice.data(), F);
    CHECK(out[0].get(p) == acc);
    CHECK(out[1].get(p) == -acc);  // only the written result is negated ...
    CHECK(out[2].get(p) == acc);   // ... the accumulator keeps its value
    CHECK(out[3].get(p) == 10.0f + fold_add(row, F));
    CHECK(out[4].get(p) == std::fmax(init[p], fold_max(row, F)));
    CHECK(out[5].get(p) == -kInf);  // reset = the reduce_op's identity
    CHECK(out[6].get(p) == kInf);
    CHECK(out[7].get(p) == 1.0f);
    CHECK(out[8].get(p) == fold_add(row, F));  // ScalarE accumulators untouched by VectorE
  }
}

// ---- verifier rules ------------------------------------------------------------------------------------------------

namespace {

// Tiles for building broken instructions (never executed).
struct Env {
  nl::tensor hbm, a, b, c, col, col2, wide, few, ps, ps2, pcol, i32, i32b, icol, d3, tfcol;
};

Env make_env(nl::tensor x) {
  auto sb = [](std::vector<int64_t> shape, DType dt = DType::float32) { return nl::ndarray(shape, dt); };
  auto ps = [](std::vector<int64_t> shape) { return nl::ndarray(shape, nl::float32, nl::psum); };
  return Env{x,
             sb({4, 8}),
             sb({4, 8}),
             sb({4, 8}),
             sb({4, 1}),
             sb({2, 1}),
             sb({4, 16}),
             sb({2, 8}),
             ps({4, 8}),
             ps({4, 8}),
             ps({4, 1}),
             sb({4, 8}, nl::int32),
             sb({4, 8}, nl::int32),
             sb({4, 1}, nl::int32),
             sb({4, 2, 4}),
             sb({4, 1}, nl::tfloat32)};
}

struct BadCase {
  const char* rule;
  ir::Target target;
  std::function<void(Env&, int&)> body;
};

// Each case is written on ONE line: the body records __LINE__ next to the failing ISA call.
#define BAD_ON(target, rule, ...)         \
  BadCase {                               \
    rule, target, [](Env& e, int& line) { \
      line = __LINE__;                    \
      __VA_ARGS__;                        \
    }                                     \
  }
#define BAD(rule, ...) BAD_ON(ir::Target::trn2, rule, __VA_ARGS__)

void expect_rule(const BadCase& bad) {
  int line = -1;
  try {
    trace(
        "bad",
        [&](nl::tensor x) {
          Env e = make_env(x);
          bad.body(e, line);
        },
        {arg({4, 8}, nl::float32, "x")}, bad.target);
    FAIL("expected a [" << bad.rule << "] error from line " << line);
  } catch (const knit::Error& err) {
    INFO(err.what());
    CHECK(err.rule() == bad.rule);
    CHECK(err.kind() == ErrorKind::User);
    CHECK(err.loc().line == line);
    CHECK(std::string(err.what()).find(":" + std::to_string(line) + ":") != std::string::npos);
  }
}

const ir::Target trn1 = ir::Target::trn1;

}  // namespace

TEST_CASE("verifier: every compute rule reports its rule name at the kernel line", "[compute][verifier]") {
  const std::vector<BadCase> cases{
      // activation / activation_reduce
      BAD("buffer", isa::activation(e.hbm, nl::exp, e.a)),
      BAD("buffer", isa::activation(e.a, nl::exp, e.hbm)),
      BAD("free-size-mismatch", isa::activation(e.a, nl::exp, e.wide)),
      BAD("partition-mismatch", isa::activation(e.a, nl::exp, e.few)),
      BAD("operand-shape", isa::activation(e.a, nl::exp, e.b, {.scale = e.c})),
      BAD("operand", isa::activation(e.a, nl::exp, e.b, {.scale = isa::operand()})),
      BAD("partition-mismatch", isa::activation(e.a, nl::exp, e.b, {.bias = e.col2})),
      BAD_ON(trn1, "target", isa::activation(e.a, nl::exp, e.b, {.bias = 1.0})),
      BAD("dtype", isa::activation(e.a, nl::exp, e.b, {.bias = e.tfcol})),
      BAD("reduce-cmd", isa::activation(e.a, nl::exp, e.b, {.reduce_op = nl::add, .reduce_cmd = RC::load_reduce})),
      BAD("alu-op", isa::activation(e.a, nl::exp, e.b, {.reduce_cmd = RC::reduce})),
      BAD("alu-op", isa::activation(e.a, nl::exp, e.b, {.reduce_op = nl::multiply, .reduce_cmd = RC::reduce})),
      BAD_ON(trn1, "alu-op", isa::activation(e.a, nl::exp, e.b, {.reduce_op = nl::maximum, .reduce_cmd = RC::reduce})),
      BAD("operand-shape", isa::activation(e.a, nl::exp, e.b, {.reduce_res = e.c})),
      BAD("alu-op", isa::activation_reduce(e.a, nl::exp, e.b, nl::bypass, e.col)),
      BAD("alu-op", isa::activation_reduce(e.a, nl::exp, e.b, nl::bitwise_or, e.col)),
      BAD("operand-shape", isa::activation_reduce(e.a, nl::exp, e.b, nl::add, e.c)),
      BAD("free-size-mismatch", isa::activation_reduce(e.a, nl::exp, e.wide, nl::add, e.col)),
      // tensor_tensor
      BAD("engine", isa::tensor_tensor(e.a, e.b, e.c, nl::add, isa::scalar_engine)),
      BAD("buffer", isa::tensor_tensor(e.hbm, e.b, e.c, nl::add)),
      BAD("free-size-mismatch", isa::tensor_tensor(e.a, e.b, e.wide, nl::add)),
      BAD("partition-mismatch", isa::tensor_tensor(e.a, e.few, e.c, nl::add)),
      BAD("dtype", isa::tensor_tensor(e.a, e.b, e.c, nl::bitwise_and)),
      BAD("dtype", isa::tensor_tensor(e.i32, e.i32b, e.c, nl::bitwise_xor)),
      BAD("alu-op", isa::tensor_tensor(e.a, e.b, e.c, nl::abs)),
      BAD("alu-op", isa::tensor_tensor(e.i32, e.i32b, e.i32, nl::invert)),
      BAD("alu-op", isa::tensor_tensor(e.a, e.b, e.c, nl::average)),
      BAD("alu-op", isa::tensor_tensor(e.a, e.b, e.c, nl::bypass)),
      BAD("target", isa::tensor_tensor(e.a, e.b, e.c, nl::abs_max)),
      BAD("buffer", isa::tensor_tensor(e.a, e.ps, e.ps2, nl::add)),
      BAD("engine", isa::tensor_tensor(e.a, e.b, e.c, nl::power, isa::vector_engine)),
      BAD("buffer", isa::tensor_tensor(e.a, e.ps, e.c, nl::power)),
      BAD("buffer", isa::tensor_tensor(e.ps, e.b, e.c, nl::add, isa::gpsimd_engine)),
      // tensor_scalar
      BAD("engine", isa::tensor_scalar(e.a, e.b, nl::add, 1.0, {.engine = isa::tensor_engine})),
      BAD("buffer", isa::tensor_scalar(e.a, e.hbm, nl::add, 1.0)),
      BAD("free-size-mismatch", isa::tensor_scalar(e.a, e.wide, nl::add, 1.0)),
      BAD("alu-op", isa::tensor_scalar(e.a, e.b, nl::bypass, 1.0)),
      BAD("alu-op", isa::tensor_scalar(e.i32, e.i32b, nl::bitwise_and, 1.0, {.op1 = nl::add, .operand1 = 1.0})),
      BAD("operand", isa::tensor_scalar(e.a, e.b, nl::add, isa::operand())),
      BAD("operand", isa::tensor_scalar(e.a, e.b, nl::add, 1.0, {.op1 = nl::multiply})),
      BAD("operand-shape", isa::tensor_scalar(e.a, e.b, nl::add, e.c)),
      BAD("partition-mismatch", isa::tensor_scalar(e.a, e.b, nl::add, 1.0, {.op1 = nl::add, .operand1 = e.col2})),
      BAD("dtype", isa::tensor_scalar(e.a, e.b, nl::bitwise_or, 1.0)),
      BAD("dtype", isa::tensor_scalar(e.i32, e.i32b, nl::bitwise_or, e.col)),
      BAD("engine", isa::tensor_scalar(e.i32, e.i32b, nl::right_shift, 1.0, {.engine = isa::gpsimd_engine})),
      BAD("buffer", isa::tensor_scalar(e.a, e.ps, nl::add, 1.0, {.engine = isa::gpsimd_engine})),
      BAD("engine", isa::tensor_scalar(e.a, e.b, nl::subtract, 1.0, {.engine = isa::scalar_engine})),
      BAD("target", isa::tensor_scalar(e.a, e.b, nl::abs_min, 1.0)),
      // scalar_tensor_tensor / reciprocal
      BAD("alu-op", isa::scalar_tensor_tensor(e.a, e.b, nl::bitwise_and, 1.0, nl::add, e.c)),
      BAD("alu-op", isa::scalar_tensor_tensor(e.a, e.b, nl::add, 1.0, nl::abs, e.c)),
      BAD("operand", isa::scalar_tensor_tensor(e.a, e.b, nl::add, isa::operand(), nl::add, e.c)),
      BAD("operand-shape", isa::scalar_tensor_tensor(e.a, e.b, nl::add, e.c, nl::add, e.c)),
      BAD("buffer", isa::scalar_tensor_tensor(e.a, e.ps, nl::add, 1.0, nl::add, e.ps2)),
      BAD("free-size-mismatch", isa::scalar_tensor_tensor(e.a, e.b, nl::add, 1.0, nl::add, e.wide)),
      BAD("buffer", isa::scalar_tensor_tensor(e.a, e.hbm, nl::add, 1.0, nl::add, e.c)),
      BAD("buffer", isa::reciprocal(e.a, e.hbm)),
      BAD("free-size-mismatch", isa::reciprocal(e.a, e.wide)),
      BAD("partition-mismatch", isa::reciprocal(e.few, e.a)),
      // tensor_tensor_scan
      BAD("alu-op", isa::tensor_tensor_scan(e.a, e.b, e.c, 0.0, nl::bitwise_or, nl::add)),
      BAD("alu-op", isa::tensor_tensor_scan(e.a, e.b, e.c, 0.0, nl::multiply, nl::square)),
      BAD("operand", isa::tensor_tensor_scan(e.a, e.b, e.c, isa::operand(), nl::multiply, nl::add)),
      BAD("operand-shape", isa::tensor_tensor_scan(e.a, e.b, e.c, e.a, nl::multiply, nl::add)),
      BAD("buffer", isa::tensor_tensor_scan(e.a, e.ps, e.ps2, 0.0, nl::multiply, nl::add)),
      BAD("free-size-mismatch", isa::tensor_tensor_scan(e.a, e.b, e.wide, 0.0, nl::multiply, nl::add)),
      // tensor_reduce
      BAD("reduce-axis", isa::tensor_reduce(e.col, nl::add, e.a, {0})),
      BAD("reduce-axis", isa::tensor_reduce(e.col, nl::add, e.a, {2})),
      BAD("reduce-axis", isa::tensor_reduce(e.col, nl::add, e.a, {})),
      BAD("reduce-axis", isa::tensor_reduce(e.b.reshape({4, 4, 2}), nl::add, e.d3, {1})),
      BAD("free-size-mismatch", isa::tensor_reduce(e.a, nl::add, e.b, {1})),
      BAD("partition-mismatch", isa::tensor_reduce(e.col2, nl::add, e.b, {1})),
      BAD("alu-op", isa::tensor_reduce(e.col, nl::divide, e.b, {1})),
      BAD("dtype", isa::tensor_reduce(e.col, nl::bitwise_or, e.b, {1})),
      BAD("alu-op", isa::tensor_reduce(e.icol, nl::bitwise_or, e.i32, {1}, {.negate = true})),
      BAD("buffer", isa::tensor_reduce(e.col, nl::add, e.hbm, {1})),
      // tensor_scalar_reduce
      BAD("alu-op", isa::tensor_scalar_reduce(e.i32, e.i32b, nl::bitwise_and, 1.0, nl::add)),
      BAD("alu-op", isa::tensor_scalar_reduce(e.a, e.b, nl::add, 1.0, nl::subtract)),
      BAD("operand", isa::tensor_scalar_reduce(e.a, e.b, nl::add, isa::operand(), nl::add)),
      BAD("operand", isa::tensor_scalar_reduce(e.a, e.b, nl::add, 1.0, nl::add, {.reduce_cmd = RC::load_reduce})),
      BAD("operand-shape", isa::tensor_scalar_reduce(e.a, e.b, nl::add, 1.0, nl::add, {.reduce_res = e.c})),
      BAD("operand-shape", isa::tensor_scalar_reduce(e.a, e.b, nl::add, 1.0, nl::add, {.reduce_init = e.c})),
      BAD("free-size-mismatch", isa::tensor_scalar_reduce(e.a, e.wide, nl::add, 1.0, nl::add)),
      BAD("buffer", isa::tensor_scalar_reduce(e.a, e.b, nl::add, 1.0, nl::add, {.reduce_res = e.hbm})),
  };
  for (const BadCase& bad : cases) expect_rule(bad);
}

TEST_CASE("verifier: valid compute instructions are accepted, with the operand forms NKI allows",
          "[compute][verifier]") {
  for (ir::Target target : {ir::Target::trn2, ir::Target::trn3}) {
    auto build = [&] {
      trace(
          "ok",
          [](nl::tensor x) {
            Env e = make_env(x);
            isa::activation(e.a, nl::exp, e.ps,
                            {.bias = e.col,
                             .scale = e.pcol,
                             .reduce_op = nl::add,
                             .reduce_res = e.pcol,
                             .reduce_cmd = RC::reset_reduce});
            isa::tensor_tensor(e.a, e.ps, e.d3, nl::add);  // free shapes may differ, sizes match
            isa::tensor_scalar(e.i32, e.i32b, nl::invert, {}, {.op1 = nl::bitwise_and, .operand1 = e.icol});
            isa::tensor_scalar(e.a, e.b, nl::multiply, e.col,
                               {.op1 = nl::add, .operand1 = 2.0, .engine = isa::scalar_engine});
            isa::tensor_reduce(e.col.reshape({4, 1, 1}), nl::add, e.d3, {1, 2}, {.keepdims = true});
            isa::tensor_reduce(e.b.reshape({4, 2, 4}).slice(2, 0, 1), nl::maximum, e.d3, {-1});
            isa::tensor_scalar_reduce(e.a, e.b, nl::abs, {}, nl::maximum,
                                      {.reduce_cmd = RC::load_reduce, .reduce_init = e.col});
          },
          {arg({4, 8}, nl::float32, "x")}, target);
    };
    CHECK_NOTHROW(build());
  }
}
