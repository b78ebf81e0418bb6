// The trn3 MX instructions (quantize_mx, nc_matmul_mx) against a reference written here from the
// documented algorithm (docs/architecture.md, "MX data"): fp8 values from the textbook bit
// layout, quantization by exhaustive nearest-code search, scales with std::log2, and the matmul
// as a plain fp32 loop in contraction order. Then the verifier's MX and packed-dtype rules.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "test_util.h"

using namespace knit;
using ir::DType;
using ir::Target;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---- the reference ------------------------------------------------------------------------------

// Value of an fp8 code from its bit layout: e4m3fn (bias 7, no inf, S.1111.111 = NaN) or e5m2
// (IEEE-like, bias 15).
double ref_fp8(uint32_t code, bool e4m3fn) {
  const int E = e4m3fn ? 4 : 5, M = e4m3fn ? 3 : 2, bias = (1 << (E - 1)) - 1;
  const double sign = (code & 0x80) ? -1.0 : 1.0;
  const int e = static_cast<int>((code >> M) & ((1u << E) - 1)), m = static_cast<int>(code & ((1u << M) - 1));
  if (e4m3fn && e == 15 && m == 7) return kNaN;
  if (!e4m3fn && e == 31) return m ? kNaN : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(m, 1 - bias - M);
  return sign * std::ldexp((1 << M) + m, e - bias - M);
}

// Value of an fp4 e2m1 nibble: bias 1, every code a number.
double ref_fp4(uint32_t nibble) {
  const double sign = (nibble & 8) ? -1.0 : 1.0;
  const int e = (nibble >> 1) & 3, m = nibble & 1;
  return sign * (e == 0 ? 0.5 * m : std::ldexp(1.0 + 0.5 * m, e - 1));
}

// The code nearest to v after clamping to +-max finite; ties go to the even code.
uint8_t ref_nearest(double v, bool e4m3fn) {
  const double max = e4m3fn ? 448.0 : 57344.0;
  v = std::clamp(v, -max, max);
  int best = -1;
  double best_err = INFINITY;
  for (int c = 0; c < 256; ++c) {
    const double x = ref_fp8(c, e4m3fn);
    if (std::isnan(x) || std::isinf(x) || std::signbit(x) != std::signbit(v)) continue;
    const double err = std::fabs(x - v);
    if (err < best_err || (err == best_err && c % 2 == 0)) best = c, best_err = err;
  }
  return static_cast<uint8_t>(best);
}

struct RefMx {
  std::vector<uint32_t> words;  // [P, F/4]
  std::vector<uint8_t> scales;  // [P/8, F/4]; 0xFF = NaN group
};

// quantize_mx of x [P, F]: per 8x4 group, scale 2^(floor(log2 amax) - (emax - 1)) clamped to
// [-127, 127], all-zero -> 2^-127, a non-finite element -> NaN scale (its elements are checked
// for NaN separately).
RefMx ref_quantize_mx(const std::vector<float>& x, int64_t P, int64_t F, bool e4m3fn) {
  const int emax = e4m3fn ? 8 : 15;
  const int64_t W = F / 4;
  RefMx r{std::vector<uint32_t>(P * W, 0), std::vector<uint8_t>(P / 8 * W, 0)};
  for (int64_t g = 0; g < P / 8; ++g)
    for (int64_t w = 0; w < W; ++w) {
      double amax = 0;
      bool finite = true;
      for (int64_t p = 8 * g; p < 8 * g + 8; ++p)
        for (int j = 0; j < 4; ++j) {
          const double v = x[p * F + 4 * w + j];
          finite = finite && std::isfinite(v);
          amax = std::max(amax, std::fabs(v));
        }
      if (!finite) {
        r.scales[g * W + w] = 0xFF;
        continue;
      }
      const int s = amax == 0 ? -127
                              : std::clamp(static_cast<int>(std::floor(std::log2(amax))) - (emax - 1), -127, 127);
      r.scales[g * W + w] = static_cast<uint8_t>(s + 127);
      for (int64_t p = 8 * g; p < 8 * g + 8; ++p)
        for (int j = 0; j < 4; ++j)
          r.words[p * W + w] |= static_cast<uint32_t>(ref_nearest(x[p * F + 4 * w + j] / std::pow(2.0, s), e4m3fn))
                                << (8 * j);
    }
  return r;
}

// Dequantized [4P, F] operand in contraction order, k = 4p + j.
std::vector<float> ref_dequantize(const RefMx& q, int64_t P, int64_t W, bool e4m3fn) {
  std::vector<float> out(4 * P * W);
  for (int64_t p = 0; p < P; ++p)
    for (int64_t w = 0; w < W; ++w)
      for (int j = 0; j < 4; ++j)
        out[(4 * p + j) * W + w] = static_cast<float>(ref_fp8((q.words[p * W + w] >> (8 * j)) & 0xFF, e4m3fn) *
                                                      std::pow(2.0, q.scales[(p / 8) * W + w] - 127));
  return out;
}

// dst[m, n] = sum over k, in increasing k, of a[k, m] * b[k, n] in fp32 (as nc_matmul documents).
std::vector<float> ref_matmul(const std::vector<float>& a, const std::vector<float>& b, int64_t K, int64_t M,
                              int64_t N) {
  std::vector<float> out(M * N, 0.0f);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k) acc += a[k * M + m] * b[k * N + n];
      out[m * N + n] = acc;
    }
  return out;
}

// ---- kernels -----------------------------------------------------------------------------------

uint32_t word_at(const HostTensor& t, int64_t i) {
  uint32_t w;
  std::memcpy(&w, t.bytes.data() + 4 * i, 4);
  return w;
}

// x [P, F] bf16 -> quantize_mx -> (words, scales) in HBM.
ir::Kernel quantize_kernel(int64_t P, int64_t F, DType packed, DType src_dtype = DType::bfloat16) {
  return trace(
      "quantize",
      [&](nl::tensor x) {
        auto src = nl::ndarray({P, F}, src_dtype);
        auto q = nl::ndarray({P, F / 4}, packed);
        auto s = nl::ndarray({P / 8, F / 4}, nl::float8_e8m0fnu);
        isa::dma_copy(src, x);
        isa::quantize_mx(q, src, s);
        auto q_out = nl::ndarray({P, F / 4}, packed, nl::shared_hbm);
        auto s_out = nl::ndarray({P / 8, F / 4}, nl::float8_e8m0fnu, nl::shared_hbm);
        isa::dma_copy(q_out, q);
        isa::dma_copy(s_out, s);
        return std::vector<nl::tensor>{q_out, s_out};
      },
      {arg({P, F}, src_dtype, "x")}, Target::trn3);
}

void check_quantize(const std::vector<float>& values, int64_t P, int64_t F, DType packed) {
  const bool fn = packed == DType::float8_e4m3fn_x4;
  HostTensor x = test::host(DType::bfloat16, {P, F}, values);
  auto out = run(quantize_kernel(P, F, packed), {x});
  const RefMx want = ref_quantize_mx(x.to_floats(), P, F, fn);
  const int64_t W = F / 4;
  for (int64_t i = 0; i < P / 8 * W; ++i) {
    INFO("scale of group " << i);
    CHECK(static_cast<int>(out[1].bytes[i]) == static_cast<int>(want.scales[i]));
  }
  for (int64_t i = 0; i < P * W; ++i) {
    const bool nan_group = want.scales[(i / W / 8) * W + i % W] == 0xFF;
    INFO("word " << i << " (partition " << i / W << ", column " << i % W << ")");
    if (nan_group) {
      for (int j = 0; j < 4; ++j) CHECK(std::isnan(ref_fp8((word_at(out[0], i) >> (8 * j)) & 0xFF, fn)));
    } else {
      CHECK(word_at(out[0], i) == want.words[i]);
    }
  }
}

}  // namespace

// ---- quantize_mx -------------------------------------------------------------------------------

TEST_CASE("quantize_mx matches the reference on random data", "[mx][quantize_mx]") {
  const int64_t P = 64, F = 48;
  for (DType packed : {DType::float8_e4m3fn_x4, DType::float8_e5m2_x4}) {
    INFO(ir::to_string(packed));
    // Magnitudes over many binades so groups get very different scales.
    std::vector<float> v = test::random_values(P * F, 11, -1.0f, 1.0f);
    for (size_t i = 0; i < v.size(); ++i) v[i] = std::ldexp(v[i], static_cast<int>(i % 37) - 18);
    check_quantize(v, P, F, packed);
  }
}

TEST_CASE("quantize_mx edge groups", "[mx][quantize_mx]") {
  // One 32-partition x 4-element tile per column word: 4 partition groups x 8 words = 32 groups.
  const int64_t P = 32, F = 32, W = F / 4;
  std::vector<float> v = test::random_values(P * F, 5);
  auto set_group = [&](int64_t g, int64_t w, auto fn) {
    for (int64_t i = 0; i < 8; ++i)
      for (int j = 0; j < 4; ++j) v[(8 * g + i) * F + 4 * w + j] = fn(i * 4 + j);
  };
  set_group(0, 0, [](int) { return 0.0f; });                                       // all zero -> 2^-127
  set_group(0, 1, [](int e) { return e == 5 ? -4.0f : 0.25f; });                   // amax a power of two
  set_group(0, 2, [](int e) { return e == 0 ? 1.99f : 1e-3f; });                   // top of the binade rounds up
  set_group(0, 3, [](int e) { return e == 7 ? 3.0e38f : 1.0f; });                  // largest scales
  set_group(1, 0, [](int e) { return std::ldexp(1.0f + e / 64.0f, -130); });       // bf16 subnormals: clamp
  set_group(1, 1, [](int e) { return e == 3 ? NAN : 1.0f; });                      // NaN -> NaN group
  set_group(1, 2, [](int e) { return e == 3 ? -INFINITY : 1.0f; });                // inf -> NaN group
  set_group(1, 3, [](int e) { return e == 0 ? 1000.0f : std::ldexp(1.0f, -e); });  // underflow to 0
  set_group(2, 0, [](int e) { return e % 2 ? -0.0f : 0.0f; });                     // signed zeros
  for (DType packed : {DType::float8_e4m3fn_x4, DType::float8_e5m2_x4}) {
    INFO(ir::to_string(packed));
    check_quantize(v, P, F, packed);
  }
  // Spot checks written out by hand, independent of the reference above.
  HostTensor x = test::host(DType::bfloat16, {P, F}, v);
  auto out = run(quantize_kernel(P, F, DType::float8_e4m3fn_x4), {x});
  CHECK(out[1].bytes[0] == 0);                 // all-zero group: 2^-127
  CHECK(out[1].bytes[1] == 127 + 2 - 7);       // amax 4 = 2^2: scale 2^(2 - 7)
  CHECK(out[1].bytes[2] == 127 + 0 - 7);       // amax bf16(1.99) = 1.9921875: 2^(0 - 7); * 128 = 255 -> 256
  CHECK((word_at(out[0], 2) & 0xFF) == 0x78);  // 256 = 1.000 * 2^8: exponent 15, mantissa 0
  CHECK(out[1].bytes[W + 1] == 0xFF);          // NaN group
  CHECK(word_at(out[0], 0) == 0);
}

TEST_CASE("quantize_mx accepts float16 sources and uint8 scales", "[mx][quantize_mx]") {
  const int64_t P = 32, F = 8;
  ir::Kernel k = trace(
      "quantize_f16",
      [&](nl::tensor x) {
        auto src = nl::ndarray({P, F}, nl::float16);
        auto q = nl::ndarray({P, F / 4}, nl::float8_e5m2_x4);
        auto s = nl::ndarray({P / 8, F / 4}, nl::uint8);
        isa::dma_copy(src, x);
        isa::quantize_mx(q, src, s);
        auto s_out = nl::ndarray({P / 8, F / 4}, nl::uint8, nl::shared_hbm);
        isa::dma_copy(s_out, s);
        return s_out;
      },
      {arg({P, F}, nl::float16, "x")}, Target::trn3);
  std::vector<float> v(P * F, 0.5f);
  v[3] = 60000.0f;  // group (0, 0): floor(log2 60000) = 15, scale 2^(15 - 14)
  auto out = run(k, {test::host(DType::float16, {P, F}, v)});
  CHECK(out[0].get(0) == 127 + 1);
  CHECK(out[0].get(1) == 127 - 1 - 14);  // amax 0.5
}

// ---- nc_matmul_mx ------------------------------------------------------------------------------

namespace {

// a [P, 4M] and b [P, 4N] bf16, quantized on chip, multiplied into PSUM, copied out as fp32.
ir::Kernel mx_matmul_kernel(int64_t P, int64_t M, int64_t N, DType fa, DType fb, DType psum_dtype) {
  return trace(
      "mx_matmul",
      [&](nl::tensor a, nl::tensor b) {
        auto a_t = nl::ndarray({P, 4 * M}, nl::bfloat16), b_t = nl::ndarray({P, 4 * N}, nl::bfloat16);
        isa::dma_copy(a_t, a);
        isa::dma_copy(b_t, b);
        auto aq = nl::ndarray({P, M}, fa), bq = nl::ndarray({P, N}, fb);
        auto as = nl::ndarray({P / 8, M}, nl::float8_e8m0fnu), bs = nl::ndarray({P / 8, N}, nl::float8_e8m0fnu);
        isa::quantize_mx(aq, a_t, as);
        isa::quantize_mx(bq, b_t, bs);
        auto acc = nl::ndarray({M, N}, psum_dtype, nl::psum);
        isa::nc_matmul_mx(acc, aq, bq, as, bs);
        auto res = nl::ndarray({M, N}, nl::float32);
        isa::tensor_copy(res, acc);
        auto out = nl::ndarray({M, N}, nl::float32, nl::shared_hbm);
        isa::dma_copy(out, res);
        return out;
      },
      {arg({P, 4 * M}, nl::bfloat16, "a"), arg({P, 4 * N}, nl::bfloat16, "b")}, Target::trn3);
}

}  // namespace

TEST_CASE("nc_matmul_mx equals the fp32 sum of the dequantized operands, bit for bit", "[mx][nc_matmul_mx]") {
  const int64_t P = 128, M = 32, N = 48;
  for (auto [fa, fb] : {std::pair{DType::float8_e4m3fn_x4, DType::float8_e4m3fn_x4},
                        std::pair{DType::float8_e5m2_x4, DType::float8_e4m3fn_x4}}) {
    INFO(ir::to_string(fa) << " x " << ir::to_string(fb));
    HostTensor a = test::host(DType::bfloat16, {P, 4 * M}, test::random_values(P * 4 * M, 1, -3.0f, 3.0f));
    HostTensor b = test::host(DType::bfloat16, {P, 4 * N}, test::random_values(P * 4 * N, 2, -0.1f, 0.1f));
    auto out = run(mx_matmul_kernel(P, M, N, fa, fb, DType::float32), {a, b});
    const bool fn_a = fa == DType::float8_e4m3fn_x4, fn_b = fb == DType::float8_e4m3fn_x4;
    const auto A = ref_dequantize(ref_quantize_mx(a.to_floats(), P, 4 * M, fn_a), P, M, fn_a);
    const auto B = ref_dequantize(ref_quantize_mx(b.to_floats(), P, 4 * N, fn_b), P, N, fn_b);
    const auto want = ref_matmul(A, B, 4 * P, M, N);
    for (int64_t i = 0; i < M * N; ++i) {
      INFO("element " << i);
      REQUIRE(out[0].get(i) == want[i]);
    }
  }
}

TEST_CASE("nc_matmul_mx with a bf16 PSUM dst rounds the fp32 sum once", "[mx][nc_matmul_mx]") {
  const int64_t P = 32, M = 4, N = 8;
  HostTensor a = test::host(DType::bfloat16, {P, 4 * M}, test::random_values(P * 4 * M, 3));
  HostTensor b = test::host(DType::bfloat16, {P, 4 * N}, test::random_values(P * 4 * N, 4));
  auto out = run(mx_matmul_kernel(P, M, N, DType::float8_e4m3fn_x4, DType::float8_e4m3fn_x4, DType::bfloat16), {a, b});
  const auto A = ref_dequantize(ref_quantize_mx(a.to_floats(), P, 4 * M, true), P, M, true);
  const auto B = ref_dequantize(ref_quantize_mx(b.to_floats(), P, 4 * N, true), P, N, true);
  const auto want = ref_matmul(A, B, 4 * P, M, N);
  for (int64_t i = 0; i < M * N; ++i) CHECK(out[0].get(i) == ir::round_to(DType::bfloat16, want[i]));
}

TEST_CASE("nc_matmul_mx reads fp4 nibbles and uint8 scales, and accumulates like nc_matmul", "[mx][nc_matmul_mx]") {
  // Words and scales come from the host as raw bits (uint32 / uint8), bitcast on chip.
  const int64_t P = 32, M = 2, N = 3;
  ir::Kernel k = trace(
      "fp4",
      [&](nl::tensor a, nl::tensor b, nl::tensor as, nl::tensor bs) {
        auto a_t = nl::ndarray({P, M}, nl::uint32), b_t = nl::ndarray({P, N}, nl::uint32);
        auto as_t = nl::ndarray({P / 8, M}, nl::uint8), bs_t = nl::ndarray({P / 8, N}, nl::uint8);
        isa::dma_copy(a_t, a);
        isa::dma_copy(b_t, b);
        isa::dma_copy(as_t, as);
        isa::dma_copy(bs_t, bs);
        auto acc = nl::ndarray({M, N}, nl::float32, nl::psum);
        auto a4 = a_t.view_as(nl::float4_e2m1fn_x4), b4 = b_t.view_as(nl::float4_e2m1fn_x4);
        isa::nc_matmul_mx(acc, a4, b4, as_t, bs_t);                        // overwrite (auto)
        isa::nc_matmul_mx(acc, a4, b4, as_t, bs_t);                        // accumulate (auto)
        isa::nc_matmul_mx(acc, a4, b4, as_t, bs_t, {.accumulate = true});  // accumulate
        auto res = nl::ndarray({M, N}, nl::float32);
        isa::tensor_copy(res, acc);
        auto out = nl::ndarray({M, N}, nl::float32, nl::shared_hbm);
        isa::dma_copy(out, res);
        return out;
      },
      {arg({P, M}, nl::uint32), arg({P, N}, nl::uint32), arg({P / 8, M}, nl::uint8), arg({P / 8, N}, nl::uint8)},
      Target::trn3);
  std::mt19937 rng(9);
  auto words = [&](int64_t n) {
    HostTensor t = HostTensor::zeros(DType::uint32, {P, n});
    for (int64_t i = 0; i < P * n; ++i) {
      const uint32_t w = rng() & 0xFFFFu;  // four nibbles in the low 16 bits
      std::memcpy(t.bytes.data() + 4 * i, &w, 4);
    }
    return t;
  };
  auto scales = [&](int64_t n) {
    HostTensor t = HostTensor::zeros(DType::uint8, {P / 8, n});
    for (auto& byte : t.bytes) byte = static_cast<uint8_t>(120 + rng() % 16);
    return t;
  };
  HostTensor a = words(M), b = words(N), as = scales(M), bs = scales(N);
  auto out = run(k, {a, b, as, bs});
  auto deq = [&](const HostTensor& w, const HostTensor& s, int64_t F) {
    std::vector<float> v(4 * P * F);
    for (int64_t p = 0; p < P; ++p)
      for (int64_t f = 0; f < F; ++f)
        for (int j = 0; j < 4; ++j)
          v[(4 * p + j) * F + f] = static_cast<float>(ref_fp4((word_at(w, p * F + f) >> (4 * j)) & 0xF) *
                                                      std::pow(2.0, s.bytes[(p / 8) * F + f] - 127));
    return v;
  };
  const auto once = ref_matmul(deq(a, as, M), deq(b, bs, N), 4 * P, M, N);
  for (int64_t i = 0; i < M * N; ++i) CHECK(out[0].get(i) == (once[i] + once[i]) + once[i]);
}

// ---- verifier rules ------------------------------------------------------------------------------

namespace {

// Traces fn with one [128, 64] bf16 argument; returns the rule of the user error ("" when none)
// and its message through `message`.
template <class Fn>
std::string rule_of(Fn&& fn, Target target, std::string* message = nullptr) {
  try {
    trace("k", fn, {arg({128, 64}, nl::bfloat16)}, target);
  } catch (const knit::Error& e) {
    REQUIRE(e.kind() == ErrorKind::User);
    if (message) *message = e.message();
    return e.rule();
  }
  return "";
}

struct MxTiles {
  nl::tensor src, q, s;
};
MxTiles mx_tiles(const nl::tensor& x, int64_t P = 128, int64_t F = 64, DType packed = DType::float8_e4m3fn_x4) {
  auto src = nl::ndarray({P, F}, nl::bfloat16);
  isa::dma_copy(src, x(nl::ds(0, P), nl::all));
  return {src, nl::ndarray({P, F / 4}, packed), nl::ndarray({P / 8, F / 4}, nl::float8_e8m0fnu)};
}

}  // namespace

TEST_CASE("quantize_mx rules", "[mx][verifier]") {
  std::string msg;
  CHECK(rule_of(
            [](nl::tensor x) {
              auto t = mx_tiles(x);
              isa::quantize_mx(t.q, t.src, t.s);
            },
            Target::trn3) == "");
  CHECK(rule_of(
            [](nl::tensor x) {
              auto t = mx_tiles(x);
              isa::quantize_mx(t.q, t.src, t.s);
            },
            Target::trn2, &msg) == "target");
  CHECK(msg.find("trn2") != std::string::npos);
  CHECK(rule_of(
            [](nl::tensor x) {
              auto t = mx_tiles(x);
              auto f32 = nl::ndarray({128, 64}, nl::float32);
              isa::quantize_mx(t.q, f32, t.s);
            },
            Target::trn3, &msg) == "dtype");
  CHECK(msg.find("src has dtype float32") != std::string::npos);
  CHECK(rule_of(
            [](nl::tensor x) {
              auto t = mx_tiles(x);
              auto q = nl::ndarray({128, 16}, nl::float8_e5m2);
              isa::quantize_mx(q, t.src, t.s);
            },
            Target::trn3) == "dtype");
  CHECK(rule_of(
            [](nl::tensor x) {
              auto t = mx_tiles(x, 16, 64);
              isa::quantize_mx(t.q, t.src, t.s);
            },
            Target::trn3, &msg) == "mx-shape");
  CHECK(msg.find("multiple of 32") != std::string::npos);
  CHECK(rule_of(
            [](nl::tensor x) {
              auto t = mx_tiles(x);
              isa::quantize_mx(nl::ndarray({128, 8}, nl::float8_e4m3fn_x4), t.src, t.s);
            },
            Target::trn3) == "mx-shape");
  CHECK(rule_of(
            [](nl::tensor x) {
              auto t = mx_tiles(x);
              isa::quantize_mx(t.q, t.src, nl::ndarray({128, 16}, nl::float8_e8m0fnu));
            },
            Target::trn3, &msg) == "mx-shape");
  CHECK(msg.find("dst_scale must be [16, 16]") != std::string::npos);
  CHECK(rule_of(
            [](nl::tensor x) {
              auto t = mx_tiles(x);
              isa::quantize_mx(t.q, t.src, nl::ndarray({16, 16}, nl::float8_e8m0fnu, nl::psum));
            },
            Target::trn3) == "buffer");
}

TEST_CASE("nc_matmul_mx rules", "[mx][verifier]") {
  // stationary [P, M] and moving [P, N] e4m3fn_x4 with their scales, dst [M, N] fp32 PSUM.
  struct Args {
    int64_t P = 128, M = 64, N = 512;
    DType dst_dtype = DType::float32;
    std::vector<int64_t> tile_position, tile_size;
  };
  auto kernel = [](Args a) {
    return [a](nl::tensor) {
      auto s = nl::ndarray({a.P, a.M}, nl::float8_e4m3fn_x4), m = nl::ndarray({a.P, a.N}, nl::float8_e4m3fn_x4);
      auto ss = nl::ndarray({a.P / 8, a.M}, nl::float8_e8m0fnu), ms = nl::ndarray({a.P / 8, a.N}, nl::uint8);
      auto dst = nl::ndarray({a.M, a.N}, a.dst_dtype, nl::psum);
      isa::nc_matmul_mx(dst, s, m, ss, ms, {.tile_position = a.tile_position, .tile_size = a.tile_size});
    };
  };
  std::string msg;
  CHECK(rule_of(kernel({}), Target::trn3) == "");
  CHECK(rule_of(kernel({.P = 64, .tile_position = {64, 0}, .tile_size = {64, 128}}), Target::trn3) == "");
  CHECK(rule_of(kernel({.N = 4096}), Target::trn3) == "");
  CHECK(rule_of(kernel({.N = 8192, .dst_dtype = DType::bfloat16}), Target::trn3) == "");
  CHECK(rule_of(kernel({}), Target::trn1, &msg) == "target");
  CHECK(msg.find("trn1") != std::string::npos);
  CHECK(rule_of(kernel({.P = 48}), Target::trn3) == "mx-shape");
  CHECK(rule_of(kernel({.M = 63}), Target::trn3, &msg) == "matmul-shape");
  CHECK(msg.find("even") != std::string::npos);
  // (M > 128 and N > 4096 / 8192 cannot be reached: dst [M, N] would not fit PSUM's partitions.)
  CHECK(rule_of(kernel({.P = 128, .tile_position = {0, 0}, .tile_size = {64, 128}}), Target::trn3) == "matmul-shape");
  CHECK(rule_of(kernel({.P = 32, .tile_position = {0, 64}, .tile_size = {32, 64}}), Target::trn3, &msg) ==
        "matmul-tiling");
  CHECK(msg.find("row tiling only") != std::string::npos);
  CHECK(rule_of(kernel({.dst_dtype = DType::float16}), Target::trn3) == "dtype");
  // Unpacked data and wrong scale dtypes.
  CHECK(rule_of(
            [](nl::tensor) {
              auto s = nl::ndarray({128, 64}, nl::float8_e4m3fn), ss = nl::ndarray({16, 64}, nl::float8_e8m0fnu);
              isa::nc_matmul_mx(nl::ndarray({64, 64}, nl::float32, nl::psum), s, s, ss, ss);
            },
            Target::trn3) == "dtype");
  CHECK(rule_of(
            [](nl::tensor) {
              auto s = nl::ndarray({128, 64}, nl::float8_e5m2_x4), ss = nl::ndarray({16, 64}, nl::float32);
              isa::nc_matmul_mx(nl::ndarray({64, 64}, nl::float32, nl::psum), s, s, ss, ss);
            },
            Target::trn3, &msg) == "dtype");
  CHECK(msg.find("stationary_scale") != std::string::npos);
}

TEST_CASE("packed MX dtypes outside the MX instructions", "[mx][verifier]") {
  std::string msg;
  // Allowed: dma_copy to the same dtype, memset 0, a uint32 bitcast for anything else.
  CHECK(rule_of(
            [](nl::tensor) {
              auto q = nl::ndarray({128, 16}, nl::float8_e4m3fn_x4);
              isa::memset(q, 0);
              auto out = nl::ndarray({128, 16}, nl::float8_e4m3fn_x4, nl::shared_hbm);
              isa::dma_copy(out, q);
              isa::tensor_copy(nl::ndarray({128, 16}, nl::uint32), q.view_as(nl::uint32));
            },
            Target::trn3) == "");
  CHECK(rule_of([](nl::tensor) { isa::memset(nl::ndarray({128, 16}, nl::float8_e5m2_x4), 1.0); }, Target::trn3, &msg) ==
        "packed-dtype");
  CHECK(msg.find("memset to 0") != std::string::npos);
  CHECK(rule_of(
            [](nl::tensor) {
              auto q = nl::ndarray({128, 16}, nl::float8_e4m3fn_x4);
              isa::memset(q, 0);
              isa::dma_copy(nl::ndarray({128, 16}, nl::uint32, nl::shared_hbm), q);
            },
            Target::trn3, &msg) == "packed-dtype");
  CHECK(rule_of(
            [](nl::tensor) {
              auto q = nl::ndarray({128, 16}, nl::float4_e2m1fn_x4);
              isa::memset(q, 0);
              isa::tensor_copy(nl::ndarray({128, 16}, nl::float32), q);
            },
            Target::trn3, &msg) == "packed-dtype");
  CHECK(msg.find("operand src has the packed MX dtype float4_e2m1fn_x4") != std::string::npos);
  CHECK(msg.find("bitcast") != std::string::npos);
}

TEST_CASE("nc_matmul takes float8_e4m3fn on trn3 only, never mixed with float8_e4m3", "[mx][verifier]") {
  auto kernel = [](DType a, DType b) {
    return [a, b](nl::tensor) {
      auto s = nl::ndarray({128, 64}, a), m = nl::ndarray({128, 64}, b);
      isa::memset(s, 1);
      isa::memset(m, 1);
      isa::nc_matmul(nl::ndarray({64, 64}, nl::float32, nl::psum), s, m);
    };
  };
  std::string msg;
  CHECK(rule_of(kernel(DType::float8_e4m3fn, DType::float8_e4m3fn), Target::trn3) == "");
  CHECK(rule_of(kernel(DType::float8_e4m3fn, DType::bfloat16), Target::trn3) == "");
  CHECK(rule_of(kernel(DType::float8_e4m3fn, DType::float8_e5m2), Target::trn2, &msg) == "target");
  CHECK(msg.find("trn2") != std::string::npos);
  CHECK(rule_of(kernel(DType::float8_e4m3, DType::float8_e4m3fn), Target::trn3, &msg) == "dtype");
  CHECK(msg.find("cannot be mixed") != std::string::npos);
}

TEST_CASE("nc_matmul with float8_e4m3fn inputs computes with OCP fp8 values", "[mx][nc_matmul]") {
  ir::Kernel k = trace(
      "fn_matmul",
      [](nl::tensor a, nl::tensor b) {
        auto s = nl::ndarray({4, 2}, nl::float8_e4m3fn), m = nl::ndarray({4, 3}, nl::float8_e4m3fn);
        isa::dma_copy(s, a);
        isa::dma_copy(m, b);
        auto acc = nl::ndarray({2, 3}, nl::float32, nl::psum);
        isa::nc_matmul(acc, s, m);
        auto res = nl::ndarray({2, 3}, nl::float32);
        isa::tensor_copy(res, acc);
        auto out = nl::ndarray({2, 3}, nl::float32, nl::shared_hbm);
        isa::dma_copy(out, res);
        return out;
      },
      {arg({4, 2}, nl::float32), arg({4, 3}, nl::float32)}, Target::trn3);
  // 448 is e4m3fn's max (240 is e4m3's); 300 rounds to 288 (1.001 * 2^8, ulp 32).
  const std::vector<float> a{448, 1, 300, 0.5f, -2, 0, 1, 1}, b{1, 2, 0, 1, 0, 1, 0, 0, 1, 1, 1, 1};
  auto out = run(k, {test::host(DType::float32, {4, 2}, a), test::host(DType::float32, {4, 3}, b)});
  // dst[m, n] = sum_k s[k, m] * mv[k, n] with s = [[448, 1], [288, 0.5], [-2, 0], [1, 1]].
  const std::vector<float> want{448 + 288 + 1, 896 + 1, 288 - 2 + 1, 1 + 0.5f + 1, 2 + 1, 0.5f + 1};
  CHECK(out[0].to_floats() == want);
}
