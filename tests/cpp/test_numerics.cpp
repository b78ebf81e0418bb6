// Knit's rounding model (ir/numerics.h) against hand-computed bit patterns.
//
// Every expected value below is worked out by hand from the IEEE-754 layout of the format
// (sign | exponent | mantissa, bias 2^(e-1)-1): the comment next to each case says why.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "knit/ir/numerics.h"

using knit::ir::DType;
namespace ir = knit::ir;

namespace {

float f32(uint32_t bits) { return std::bit_cast<float>(bits); }
uint32_t bits32(float v) { return std::bit_cast<uint32_t>(v); }
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// The stored bytes of encode(t, v) as a little-endian integer (1, 2 or 4 bytes).
uint32_t enc(DType t, float v) {
  uint8_t buf[8];
  std::memset(buf, 0xAB, sizeof buf);
  ir::encode(t, v, buf);
  const int n = ir::dtype_size(t);
  // encode must not write past the element.
  for (int i = n; i < 8; ++i) REQUIRE(buf[i] == 0xAB);
  uint32_t r = 0;
  for (int i = n; i-- > 0;) r = (r << 8) | buf[i];
  return r;
}

float dec(DType t, uint32_t code) {
  uint8_t buf[4];
  for (int i = 0; i < 4; ++i) buf[i] = static_cast<uint8_t>(code >> (8 * i));
  return ir::decode(t, buf);
}

// Independent reference for a small IEEE-like float with E exponent and M mantissa bits:
// written from the textbook definition with std::pow and plain arithmetic.
double reference_minifloat(uint32_t code, int E, int M) {
  const int bias = (1 << (E - 1)) - 1;
  const bool neg = (code >> (E + M)) & 1;
  const int e = static_cast<int>((code >> M) & ((1u << E) - 1));
  const int m = static_cast<int>(code & ((1u << M) - 1));
  double mag;
  if (e == (1 << E) - 1) {
    mag = m == 0 ? INFINITY : NAN;
  } else if (e == 0) {
    mag = (m / std::pow(2.0, M)) * std::pow(2.0, 1 - bias);  // subnormal: 0.m * 2^(1-bias)
  } else {
    mag = (1.0 + m / std::pow(2.0, M)) * std::pow(2.0, e - bias);  // normal: 1.m * 2^(e-bias)
  }
  return neg ? -mag : mag;
}

}  // namespace

// ---- bfloat16: fp32 with the low 16 bits rounded away ------------------------------------------

TEST_CASE("bfloat16 rounds to nearest even", "[core][numerics]") {
  CHECK(enc(DType::bfloat16, 1.0f) == 0x3f80);
  CHECK(enc(DType::bfloat16, -2.0f) == 0xc000);
  // 0x3f808000 is exactly halfway between 0x3f80 and 0x3f81: tie goes to the even 0x3f80.
  CHECK(enc(DType::bfloat16, f32(0x3f808000)) == 0x3f80);
  // 0x3f818000 is halfway between 0x3f81 and 0x3f82: tie goes up to the even 0x3f82.
  CHECK(enc(DType::bfloat16, f32(0x3f818000)) == 0x3f82);
  CHECK(enc(DType::bfloat16, f32(0xbf818000)) == 0xbf82);  // same, negative
  // One ulp either side of a tie decides it.
  CHECK(enc(DType::bfloat16, f32(0x3f808001)) == 0x3f81);
  CHECK(enc(DType::bfloat16, f32(0x3f807fff)) == 0x3f80);
  CHECK(enc(DType::bfloat16, f32(0x3f817fff)) == 0x3f81);
  // Mantissa carry into the exponent: 0x3fffffff (just below 2.0) rounds to 2.0 = 0x4000.
  CHECK(enc(DType::bfloat16, f32(0x3fffffff)) == 0x4000);
  // 1/3 = 0x3eaaaaab -> low half 0xaaab > 0x8000 -> round up to 0x3eab.
  CHECK(enc(DType::bfloat16, 1.0f / 3.0f) == 0x3eab);
}

TEST_CASE("bfloat16 subnormals, overflow and specials", "[core][numerics]") {
  // Smallest bf16 subnormal is 0x0001 = 2^-133 = fp32 0x00010000.
  CHECK(enc(DType::bfloat16, f32(0x00010000)) == 0x0001);
  CHECK(dec(DType::bfloat16, 0x0001) == std::ldexp(1.0f, -133));
  // Half of it (0x00008000) is a tie between 0 and 0x0001: goes to even 0.
  CHECK(enc(DType::bfloat16, f32(0x00008000)) == 0x0000);
  CHECK(enc(DType::bfloat16, f32(0x00008001)) == 0x0001);
  // 1.5 x smallest: tie between 0x0001 and 0x0002 -> 0x0002.
  CHECK(enc(DType::bfloat16, f32(0x00018000)) == 0x0002);
  // Largest bf16 subnormal 0x007f rounds up into the smallest normal 0x0080 from the tie 0x007f8000.
  CHECK(enc(DType::bfloat16, f32(0x007f8000)) == 0x0080);
  CHECK(enc(DType::bfloat16, f32(0x807f8000)) == 0x8080);
  // Smallest fp32 subnormal vanishes, keeping the sign.
  CHECK(enc(DType::bfloat16, f32(0x00000001)) == 0x0000);
  CHECK(enc(DType::bfloat16, f32(0x80000001)) == 0x8000);

  // Max finite bf16 = 0x7f7f; the rounding boundary to inf is 0x7f7f8000 (tie, odd -> up).
  CHECK(enc(DType::bfloat16, f32(0x7f7f0000)) == 0x7f7f);
  CHECK(enc(DType::bfloat16, f32(0x7f7f7fff)) == 0x7f7f);
  CHECK(enc(DType::bfloat16, f32(0x7f7f8000)) == 0x7f80);
  CHECK(enc(DType::bfloat16, f32(0xff7f8000)) == 0xff80);
  CHECK(enc(DType::bfloat16, std::numeric_limits<float>::max()) == 0x7f80);
  CHECK(ir::max_finite(DType::bfloat16) == static_cast<double>(f32(0x7f7f0000)));

  CHECK(enc(DType::bfloat16, 0.0f) == 0x0000);
  CHECK(enc(DType::bfloat16, -0.0f) == 0x8000);
  CHECK(enc(DType::bfloat16, kInf) == 0x7f80);
  CHECK(enc(DType::bfloat16, -kInf) == 0xff80);
  CHECK(std::signbit(dec(DType::bfloat16, 0x8000)));
  CHECK(dec(DType::bfloat16, 0xff80) == -kInf);

  // Every NaN (either sign, quiet or signalling, any payload) is written as the canonical
  // quiet NaN: positive, top mantissa bit only.
  for (uint32_t nan_bits : {0x7fc00000u, 0x7f800001u, 0x7fa00000u, 0xffc00000u, 0xff800001u}) {
    const uint32_t b = enc(DType::bfloat16, f32(nan_bits));
    INFO("fp32 NaN " << std::hex << nan_bits << " -> bf16 " << b);
    CHECK(b == 0x7fc0);
    CHECK(std::isnan(dec(DType::bfloat16, b)));
  }
}

// ---- float16 (5 exponent bits, 10 mantissa bits, bias 15) -------------------------------------

TEST_CASE("float16 rounds to nearest even", "[core][numerics]") {
  CHECK(enc(DType::float16, 1.0f) == 0x3c00);
  CHECK(enc(DType::float16, -1.5f) == 0xbe00);
  CHECK(enc(DType::float16, 65504.0f) == 0x7bff);
  // ulp(1) = 2^-10. 1 + 2^-11 is a tie between 0x3c00 and 0x3c01 -> even 0x3c00.
  CHECK(enc(DType::float16, 1.0f + std::ldexp(1.0f, -11)) == 0x3c00);
  // 1 + 3*2^-11 is a tie between 0x3c01 and 0x3c02 -> even 0x3c02.
  CHECK(enc(DType::float16, 1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);
  CHECK(enc(DType::float16, -(1.0f + 3 * std::ldexp(1.0f, -11))) == 0xbc02);
  CHECK(enc(DType::float16, std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)) == 0x3c01);
  // 2049 sits between 2048 (0x6800) and 2050 (0x6801), a tie -> 2048; 2051 -> 2052 (0x6802).
  CHECK(enc(DType::float16, 2049.0f) == 0x6800);
  CHECK(enc(DType::float16, 2051.0f) == 0x6802);
  // Mantissa carry: 2047.9 rounds to 2048 = 0x6800 (exponent bumps).
  CHECK(enc(DType::float16, 2047.9f) == 0x6800);
  // 0.1f = 0x3dcccccd; fp16 0.1 = 0x2e66 (0x2e66 = 0.0999755859375, 0x2e67 = 0.10003662109375).
  CHECK(enc(DType::float16, 0.1f) == 0x2e66);
}

TEST_CASE("float16 subnormals, overflow and specials", "[core][numerics]") {
  const float tiny = std::ldexp(1.0f, -24);  // smallest fp16 subnormal
  CHECK(enc(DType::float16, tiny) == 0x0001);
  CHECK(dec(DType::float16, 0x0001) == tiny);
  CHECK(dec(DType::float16, 0x8001) == -tiny);
  CHECK(dec(DType::float16, 0x03ff) == 1023 * tiny);            // largest subnormal
  CHECK(dec(DType::float16, 0x0400) == std::ldexp(1.0f, -14));  // smallest normal
  // Half the smallest subnormal is a tie between 0 and 0x0001 -> 0 (sign kept).
  CHECK(enc(DType::float16, tiny / 2) == 0x0000);
  CHECK(enc(DType::float16, -tiny / 2) == 0x8000);
  CHECK(enc(DType::float16, std::nextafter(tiny / 2, 1.0f)) == 0x0001);
  CHECK(enc(DType::float16, std::nextafter(tiny / 2, 0.0f)) == 0x0000);
  // 1.5 x tiny: tie between 0x0001 and 0x0002 -> 0x0002. 2.5 x tiny -> 0x0002.
  CHECK(enc(DType::float16, 1.5f * tiny) == 0x0002);
  CHECK(enc(DType::float16, 2.5f * tiny) == 0x0002);
  CHECK(enc(DType::float16, 3.5f * tiny) == 0x0004);
  // Halfway between the largest subnormal 0x03ff and the smallest normal 0x0400 -> 0x0400.
  CHECK(enc(DType::float16, 1023.5f * tiny) == 0x0400);
  CHECK(enc(DType::float16, 1022.5f * tiny) == 0x03fe);
  // Way below the subnormal range.
  CHECK(enc(DType::float16, 1e-30f) == 0x0000);
  CHECK(enc(DType::float16, f32(0x00000001)) == 0x0000);

  // Max finite 65504 (0x7bff); ulp there is 32, so the boundary to inf is 65520 (a tie, odd -> inf).
  CHECK(enc(DType::float16, std::nextafter(65520.0f, 0.0f)) == 0x7bff);
  CHECK(enc(DType::float16, 65520.0f) == 0x7c00);
  CHECK(enc(DType::float16, -65520.0f) == 0xfc00);
  CHECK(enc(DType::float16, 65536.0f) == 0x7c00);
  CHECK(enc(DType::float16, 1e10f) == 0x7c00);
  CHECK(ir::max_finite(DType::float16) == 65504.0);

  CHECK(enc(DType::float16, 0.0f) == 0x0000);
  CHECK(enc(DType::float16, -0.0f) == 0x8000);
  CHECK(enc(DType::float16, kInf) == 0x7c00);
  CHECK(enc(DType::float16, -kInf) == 0xfc00);
  CHECK(dec(DType::float16, 0x7c00) == kInf);
  CHECK(dec(DType::float16, 0xfc00) == -kInf);
  CHECK(std::isnan(dec(DType::float16, 0x7c01)));
  CHECK(std::isnan(dec(DType::float16, 0xfe00)));
  CHECK(std::signbit(dec(DType::float16, 0x8000)));
  for (uint32_t nan_bits : {0x7fc00000u, 0x7f800001u, 0xffc00000u, 0xff800001u}) {
    const uint32_t b = enc(DType::float16, f32(nan_bits));
    INFO("fp32 NaN " << std::hex << nan_bits << " -> fp16 " << b);
    CHECK(b == 0x7e00);  // the canonical quiet NaN
  }
}

// ---- tfloat32 (fp32 with the low 13 mantissa bits rounded away) -------------------------------

TEST_CASE("tfloat32 rounding", "[core][numerics]") {
  CHECK(enc(DType::tfloat32, 1.0f) == 0x3f800000);
  // tf32 lsb is bit 13 (0x2000). 0x3f801000 is a tie between 0x3f800000 and 0x3f802000 -> even.
  CHECK(enc(DType::tfloat32, f32(0x3f801000)) == 0x3f800000);
  // 0x3f803000: tie between 0x3f802000 (odd) and 0x3f804000 (even) -> up.
  CHECK(enc(DType::tfloat32, f32(0x3f803000)) == 0x3f804000);
  CHECK(enc(DType::tfloat32, f32(0x3f801001)) == 0x3f802000);
  CHECK(enc(DType::tfloat32, f32(0xbf803000)) == 0xbf804000);
  // Subnormal: 0x00001000 ties to 0; 0x00003000 ties up to 0x00004000; 0x00002000 is exact.
  CHECK(enc(DType::tfloat32, f32(0x00001000)) == 0x00000000);
  CHECK(enc(DType::tfloat32, f32(0x00003000)) == 0x00004000);
  CHECK(enc(DType::tfloat32, f32(0x00002000)) == 0x00002000);
  CHECK(enc(DType::tfloat32, f32(0x80001000)) == 0x80000000);
  // Max finite tf32 0x7f7fe000; the boundary 0x7f7ff000 is a tie with odd mantissa -> inf.
  CHECK(enc(DType::tfloat32, f32(0x7f7fefff)) == 0x7f7fe000);
  CHECK(enc(DType::tfloat32, f32(0x7f7ff000)) == 0x7f800000);
  CHECK(enc(DType::tfloat32, std::numeric_limits<float>::max()) == 0x7f800000);
  CHECK(ir::max_finite(DType::tfloat32) == static_cast<double>(f32(0x7f7fe000)));
  CHECK(enc(DType::tfloat32, -0.0f) == 0x80000000);
  CHECK(enc(DType::tfloat32, -kInf) == 0xff800000);
  // Reading tf32 is exact: the 32 stored bits are the fp32 value.
  CHECK(dec(DType::tfloat32, 0x3f804000) == f32(0x3f804000));
  CHECK(ir::round_to(DType::tfloat32, f32(0x3f803000)) == f32(0x3f804000));
}

TEST_CASE("tfloat32 and float32 write every NaN as the canonical quiet NaN", "[core][numerics]") {
  for (uint32_t nan_bits : {0x7fc00000u, 0xffc00000u, 0x7f802000u, 0xff800001u}) {
    CHECK(enc(DType::tfloat32, f32(nan_bits)) == 0x7fc00000u);
    CHECK(enc(DType::float32, f32(nan_bits)) == 0x7fc00000u);
  }
}

// Regression test for a bug fixed in ir/src/numerics.cpp, round_fp32_bits.
TEST_CASE("tfloat32 storage always has the low 13 mantissa bits zero", "[core][numerics]") {
  for (uint32_t in : {0x7f800001u, 0xffc00fffu, 0x7fc01234u, 0x3f801234u, 0x00000fffu}) {
    INFO("fp32 bits " << std::hex << in);
    CHECK((enc(DType::tfloat32, f32(in)) & 0x1fffu) == 0);
  }
}

// ---- float8_e4m3 (IEEE-like: bias 7, max 240, inf 0x78, NaN 0x79..0x7f) -----------------------

TEST_CASE("float8_e4m3 rounding", "[core][numerics]") {
  const DType t = DType::float8_e4m3;
  CHECK(enc(t, 1.0f) == 0x38);  // e=7 -> 0.0111.000
  CHECK(enc(t, -1.0f) == 0xb8);
  CHECK(enc(t, 1.125f) == 0x39);  // 1 + 1/8
  CHECK(enc(t, 0.5f) == 0x30);
  CHECK(enc(t, 240.0f) == 0x77);  // 1.875 * 2^7
  // ulp(1) = 1/8. 1 + 1/16 ties to the even 0x38; 1 + 3/16 ties to the even 0x3a (1.25).
  CHECK(enc(t, 1.0625f) == 0x38);
  CHECK(enc(t, 1.1875f) == 0x3a);
  CHECK(enc(t, -1.1875f) == 0xba);
  CHECK(enc(t, std::nextafter(1.0625f, 2.0f)) == 0x39);
  CHECK(enc(t, std::nextafter(1.1875f, 0.0f)) == 0x39);
  // 1.9375 = 1 + 15/16: tie between 1.875 (0x3f, odd) and 2.0 (0x40) -> 2.0 (carry into exponent).
  CHECK(enc(t, 1.9375f) == 0x40);
  // ulp at [128, 256) is 16: 232 ties between 224 (0x76, even) and 240 (0x77) -> 224.
  CHECK(enc(t, 232.0f) == 0x76);

  // Subnormals: step 2^-9; smallest 0x01 = 2^-9, smallest normal 0x08 = 2^-6.
  const float sub = std::ldexp(1.0f, -9);
  CHECK(enc(t, sub) == 0x01);
  CHECK(enc(t, sub / 2) == 0x00);  // tie -> even 0
  CHECK(enc(t, -sub / 2) == 0x80);
  CHECK(enc(t, std::nextafter(sub / 2, 1.0f)) == 0x01);
  CHECK(enc(t, 1.5f * sub) == 0x02);
  CHECK(enc(t, 2.5f * sub) == 0x02);
  CHECK(enc(t, 7.0f * sub) == 0x07);  // largest subnormal
  CHECK(enc(t, 7.5f * sub) == 0x08);  // tie rounds out of the subnormal range into 2^-6
  CHECK(enc(t, 6.5f * sub) == 0x06);
  CHECK(enc(t, std::ldexp(1.0f, -6)) == 0x08);
  CHECK(enc(t, 1e-10f) == 0x00);

  // Overflow: max 240, next step would be 256; the boundary 248 is a tie with odd mantissa -> inf.
  CHECK(enc(t, std::nextafter(248.0f, 0.0f)) == 0x77);
  CHECK(enc(t, 248.0f) == 0x78);
  CHECK(enc(t, -248.0f) == 0xf8);
  CHECK(enc(t, 1000.0f) == 0x78);
  CHECK(ir::max_finite(t) == 240.0);

  CHECK(enc(t, 0.0f) == 0x00);
  CHECK(enc(t, -0.0f) == 0x80);
  CHECK(enc(t, kInf) == 0x78);
  CHECK(enc(t, -kInf) == 0xf8);
  for (uint32_t nan_bits : {0x7fc00000u, 0x7f800001u, 0xffc00000u}) {
    const uint32_t b = enc(t, f32(nan_bits));
    CHECK(b == 0x7c);  // positive quiet NaN: S.1111.100
  }
}

// ---- float8_e5m2 (bias 15, max 57344, inf 0x7c, NaN 0x7d..0x7f) --------------------------------

TEST_CASE("float8_e5m2 rounding", "[core][numerics]") {
  const DType t = DType::float8_e5m2;
  CHECK(enc(t, 1.0f) == 0x3c);
  CHECK(enc(t, -2.0f) == 0xc0);
  CHECK(enc(t, 1.25f) == 0x3d);
  // ulp(1) = 1/4. 1.125 ties to even 0x3c; 1.375 ties to even 0x3e (1.5).
  CHECK(enc(t, 1.125f) == 0x3c);
  CHECK(enc(t, 1.375f) == 0x3e);
  CHECK(enc(t, 1.875f) == 0x40);  // tie between 1.75 (0x3f) and 2.0 (0x40) -> 2.0
  CHECK(enc(t, std::nextafter(1.125f, 2.0f)) == 0x3d);

  // Subnormals: step 2^-16; smallest normal 0x04 = 2^-14.
  const float sub = std::ldexp(1.0f, -16);
  CHECK(enc(t, sub) == 0x01);
  CHECK(enc(t, sub / 2) == 0x00);
  CHECK(enc(t, std::nextafter(sub / 2, 1.0f)) == 0x01);
  CHECK(enc(t, 1.5f * sub) == 0x02);
  CHECK(enc(t, 3.0f * sub) == 0x03);
  CHECK(enc(t, 3.5f * sub) == 0x04);  // out of the subnormal range
  CHECK(enc(t, -3.5f * sub) == 0x84);

  // Max 57344 = 1.75 * 2^15 (0x7b); ulp there 8192, boundary 61440 (tie, odd) -> inf.
  CHECK(enc(t, 57344.0f) == 0x7b);
  CHECK(enc(t, std::nextafter(61440.0f, 0.0f)) == 0x7b);
  CHECK(enc(t, 61440.0f) == 0x7c);
  CHECK(enc(t, -61440.0f) == 0xfc);
  CHECK(ir::max_finite(t) == 57344.0);

  CHECK(enc(t, -0.0f) == 0x80);
  CHECK(enc(t, kInf) == 0x7c);
  CHECK(enc(t, -kInf) == 0xfc);
  for (uint32_t nan_bits : {0x7fc00000u, 0x7f800001u, 0xffc00000u}) {
    const uint32_t b = enc(t, f32(nan_bits));
    CHECK(b == 0x7e);  // positive quiet NaN: S.11111.10
  }
}

TEST_CASE("fp8 decode of every code matches the IEEE formula", "[core][numerics]") {
  struct Fmt {
    DType t;
    int E, M;
  };
  for (Fmt f : {Fmt{DType::float8_e4m3, 4, 3}, Fmt{DType::float8_e5m2, 5, 2}}) {
    for (uint32_t code = 0; code < 256; ++code) {
      const double want = reference_minifloat(code, f.E, f.M);
      const float got = dec(f.t, code);
      INFO(ir::to_string(f.t) << " code 0x" << std::hex << code);
      if (std::isnan(want)) {
        CHECK(std::isnan(got));
      } else {
        CHECK(static_cast<double>(got) == want);
        CHECK(std::signbit(got) == static_cast<bool>(code & 0x80));
        // Every non-NaN code survives encode(decode(code)) bit for bit.
        CHECK(enc(f.t, got) == code);
      }
    }
  }
  // Spot checks written out by hand.
  CHECK(dec(DType::float8_e4m3, 0x77) == 240.0f);
  CHECK(dec(DType::float8_e4m3, 0x01) == std::ldexp(1.0f, -9));
  CHECK(dec(DType::float8_e4m3, 0x08) == std::ldexp(1.0f, -6));
  CHECK(dec(DType::float8_e4m3, 0x78) == kInf);
  CHECK(std::isnan(dec(DType::float8_e4m3, 0x79)));
  CHECK(std::isnan(dec(DType::float8_e4m3, 0xff)));
  CHECK(dec(DType::float8_e5m2, 0x7b) == 57344.0f);
  CHECK(dec(DType::float8_e5m2, 0x01) == std::ldexp(1.0f, -16));
  CHECK(dec(DType::float8_e5m2, 0xfc) == -kInf);
  CHECK(std::isnan(dec(DType::float8_e5m2, 0x7d)));
}

TEST_CASE("float16 decode of every code matches the IEEE formula", "[core][numerics]") {
  int mismatches = 0;
  for (uint32_t code = 0; code < 65536; ++code) {
    const double want = reference_minifloat(code, 5, 10);
    const float got = dec(DType::float16, code);
    const bool ok = std::isnan(want) ? std::isnan(got) : static_cast<double>(got) == want;
    if (!ok && ++mismatches < 5) FAIL_CHECK("fp16 code 0x" << std::hex << code << ": " << got << " vs " << want);
  }
  CHECK(mismatches == 0);
}

TEST_CASE("bfloat16 decode is the top half of fp32", "[core][numerics]") {
  for (uint32_t code : {0x0000u, 0x8000u, 0x3f80u, 0xc2f7u, 0x7f7fu, 0x0001u, 0x7f80u}) {
    CHECK(bits32(dec(DType::bfloat16, code)) == code << 16);
  }
  CHECK(std::isnan(dec(DType::bfloat16, 0x7fc1)));
}

// ---- fp32 -> integers: round half to even, saturate, NaN -> 0 ---------------------------------

TEST_CASE("fp32 to signed integers rounds half to even and saturates", "[core][numerics]") {
  auto i8 = [](float v) { return static_cast<int8_t>(enc(DType::int8, v)); };
  auto i16 = [](float v) { return static_cast<int16_t>(enc(DType::int16, v)); };
  auto i32 = [](float v) { return static_cast<int32_t>(enc(DType::int32, v)); };
  for (auto conv : {+[](float v) -> int64_t { return static_cast<int8_t>(enc(DType::int8, v)); },
                    +[](float v) -> int64_t { return static_cast<int16_t>(enc(DType::int16, v)); },
                    +[](float v) -> int64_t { return static_cast<int32_t>(enc(DType::int32, v)); }}) {
    CHECK(conv(0.5f) == 0);
    CHECK(conv(1.5f) == 2);
    CHECK(conv(2.5f) == 2);
    CHECK(conv(3.5f) == 4);
    CHECK(conv(-0.5f) == 0);
    CHECK(conv(-1.5f) == -2);
    CHECK(conv(-2.5f) == -2);
    CHECK(conv(0.49999997f) == 0);
    CHECK(conv(0.50000006f) == 1);
    CHECK(conv(-7.7f) == -8);
    CHECK(conv(kNaN) == 0);
    CHECK(conv(-kNaN) == 0);
  }
  CHECK(i8(127.4f) == 127);
  CHECK(i8(127.5f) == 127);  // rounds to 128, saturates
  CHECK(i8(200.0f) == 127);
  CHECK(i8(-128.5f) == -128);
  CHECK(i8(-1000.0f) == -128);
  CHECK(i8(kInf) == 127);
  CHECK(i8(-kInf) == -128);
  CHECK(i16(32766.5f) == 32766);
  CHECK(i16(32767.5f) == 32767);
  CHECK(i16(-40000.0f) == -32768);
  CHECK(i16(1e30f) == 32767);
  // int32: 2147483520 is the largest fp32 below 2^31 and is exact; 2^31 and beyond saturate.
  CHECK(i32(2147483520.0f) == 2147483520);
  CHECK(i32(2147483648.0f) == INT32_MAX);
  CHECK(i32(3e9f) == INT32_MAX);
  CHECK(i32(1e38f) == INT32_MAX);
  CHECK(i32(kInf) == INT32_MAX);
  CHECK(i32(-2147483648.0f) == INT32_MIN);
  CHECK(i32(-3e9f) == INT32_MIN);
  CHECK(i32(-kInf) == INT32_MIN);
  CHECK(i32(16777216.0f) == 16777216);
  CHECK(i32(-123456.5f) == -123456);
}

TEST_CASE("fp32 to unsigned integers rounds half to even and saturates", "[core][numerics]") {
  auto u8 = [](float v) { return enc(DType::uint8, v); };
  auto u16 = [](float v) { return enc(DType::uint16, v); };
  auto u32 = [](float v) { return enc(DType::uint32, v); };
  for (auto conv : {+[](float v) -> uint32_t { return enc(DType::uint8, v); },
                    +[](float v) -> uint32_t { return enc(DType::uint16, v); },
                    +[](float v) -> uint32_t { return enc(DType::uint32, v); }}) {
    CHECK(conv(0.5f) == 0);
    CHECK(conv(1.5f) == 2);
    CHECK(conv(2.5f) == 2);
    CHECK(conv(-0.5f) == 0);
    CHECK(conv(-2.5f) == 0);  // negative -> 0
    CHECK(conv(-1.0f) == 0);
    CHECK(conv(-1e30f) == 0);
    CHECK(conv(-kInf) == 0);
    CHECK(conv(kNaN) == 0);
  }
  CHECK(u8(254.5f) == 254);
  CHECK(u8(255.5f) == 255);
  CHECK(u8(300.0f) == 255);
  CHECK(u8(kInf) == 255);
  CHECK(u16(65534.5f) == 65534);
  CHECK(u16(65535.5f) == 65535);
  CHECK(u16(1e6f) == 65535);
  CHECK(u32(4294967040.0f) == 4294967040u);  // largest fp32 below 2^32
  CHECK(u32(4294967296.0f) == UINT32_MAX);
  CHECK(u32(5e9f) == UINT32_MAX);
  CHECK(u32(kInf) == UINT32_MAX);
}

TEST_CASE("bool stores 1 for any non-zero value, NaN included", "[core][numerics]") {
  CHECK(enc(DType::bool_, 0.0f) == 0);
  CHECK(enc(DType::bool_, -0.0f) == 0);
  CHECK(enc(DType::bool_, 0.25f) == 1);
  CHECK(enc(DType::bool_, -3.0f) == 1);
  CHECK(enc(DType::bool_, kNaN) == 1);
  CHECK(enc(DType::bool_, -kInf) == 1);
  CHECK(enc(DType::bool_, f32(0x00000001)) == 1);  // smallest subnormal is non-zero
  CHECK(dec(DType::bool_, 0) == 0.0f);
  CHECK(dec(DType::bool_, 1) == 1.0f);
  CHECK(dec(DType::bool_, 7) == 1.0f);  // any non-zero byte reads as true
}

TEST_CASE("integer decode, incl. int32 magnitudes above 2^24", "[core][numerics]") {
  CHECK(dec(DType::int8, 0x80) == -128.0f);
  CHECK(dec(DType::int8, 0x7f) == 127.0f);
  CHECK(dec(DType::uint8, 0x80) == 128.0f);
  CHECK(dec(DType::int16, 0x8000) == -32768.0f);
  CHECK(dec(DType::uint16, 0xffff) == 65535.0f);
  CHECK(dec(DType::int32, 0x80000000u) == -2147483648.0f);
  // 2^24 + 1 is a tie between 2^24 and 2^24 + 2 -> 2^24 (even); 2^24 + 3 -> 2^24 + 4.
  CHECK(dec(DType::int32, 16777217u) == 16777216.0f);
  CHECK(dec(DType::int32, 16777219u) == 16777220.0f);
  CHECK(dec(DType::int32, static_cast<uint32_t>(-16777219)) == -16777220.0f);
  CHECK(dec(DType::uint32, 0xffffffffu) == 4294967296.0f);
  CHECK(dec(DType::uint32, 0x80000080u) == 2147483648.0f);  // tie -> even mantissa
  CHECK(dec(DType::uint32, 0x80000180u) == 2147484160.0f);  // 2^31 + 384: tie -> 2^31 + 512 (even)
}

TEST_CASE("round_to is encode followed by decode", "[core][numerics]") {
  CHECK(ir::round_to(DType::bfloat16, f32(0x3f818000)) == f32(0x3f820000));
  CHECK(ir::round_to(DType::float16, 65520.0f) == kInf);
  CHECK(ir::round_to(DType::float8_e4m3, 1.1875f) == 1.25f);
  CHECK(ir::round_to(DType::float8_e5m2, 1.375f) == 1.5f);
  CHECK(ir::round_to(DType::int8, 2.5f) == 2.0f);
  CHECK(ir::round_to(DType::uint8, -3.0f) == 0.0f);
  CHECK(ir::round_to(DType::int32, 3e9f) == 2147483648.0f);  // INT32_MAX read back as fp32
  CHECK(ir::round_to(DType::float32, f32(0x3f818001)) == f32(0x3f818001));
  CHECK(std::isnan(ir::round_to(DType::float8_e4m3, kNaN)));
  CHECK(ir::round_to(DType::bool_, -5.0f) == 1.0f);
}

// ---- raw bits ---------------------------------------------------------------------------------

TEST_CASE("load_bits sign-extends signed integers only", "[core][numerics]") {
  const uint8_t b8[] = {0x80};
  const uint8_t b16[] = {0x00, 0x80};  // little-endian 0x8000
  const uint8_t b32[] = {0x78, 0x56, 0x34, 0x92};
  CHECK(ir::load_bits(DType::int8, b8) == 0xffffff80u);
  CHECK(ir::load_bits(DType::uint8, b8) == 0x80u);
  CHECK(ir::load_bits(DType::bool_, b8) == 0x80u);
  CHECK(ir::load_bits(DType::float8_e4m3, b8) == 0x80u);
  CHECK(ir::load_bits(DType::float8_e5m2, b8) == 0x80u);
  CHECK(ir::load_bits(DType::int16, b16) == 0xffff8000u);
  CHECK(ir::load_bits(DType::uint16, b16) == 0x8000u);
  CHECK(ir::load_bits(DType::float16, b16) == 0x8000u);
  CHECK(ir::load_bits(DType::bfloat16, b16) == 0x8000u);
  CHECK(ir::load_bits(DType::int32, b32) == 0x92345678u);
  CHECK(ir::load_bits(DType::uint32, b32) == 0x92345678u);
  CHECK(ir::load_bits(DType::float32, b32) == 0x92345678u);
  const uint8_t pos8[] = {0x7f};
  CHECK(ir::load_bits(DType::int8, pos8) == 0x7fu);
}

TEST_CASE("store_bits truncates to the element size and writes nothing else", "[core][numerics]") {
  uint8_t buf[6];
  std::memset(buf, 0xEE, sizeof buf);
  ir::store_bits(DType::int8, 0xffffff80u, buf + 1);
  CHECK(buf[0] == 0xEE);
  CHECK(buf[1] == 0x80);
  CHECK(buf[2] == 0xEE);
  std::memset(buf, 0xEE, sizeof buf);
  ir::store_bits(DType::int16, 0x12345678u, buf + 1);
  CHECK(buf[0] == 0xEE);
  CHECK(buf[1] == 0x78);
  CHECK(buf[2] == 0x56);
  CHECK(buf[3] == 0xEE);
  std::memset(buf, 0xEE, sizeof buf);
  ir::store_bits(DType::float32, 0x3f800000u, buf + 1);
  CHECK(buf[0] == 0xEE);
  CHECK(buf[1] == 0x00);
  CHECK(buf[2] == 0x00);
  CHECK(buf[3] == 0x80);
  CHECK(buf[4] == 0x3f);
  CHECK(buf[5] == 0xEE);
  // Round trip through a signed type restores the sign-extended pattern.
  ir::store_bits(DType::int16, 0xffff8001u, buf);
  CHECK(ir::load_bits(DType::int16, buf) == 0xffff8001u);
  CHECK(ir::load_bits(DType::uint16, buf) == 0x8001u);
}

TEST_CASE("load_int and store_int saturate", "[core][numerics]") {
  uint8_t buf[4];
  ir::store_int(DType::int8, 300, buf);
  CHECK(ir::load_int(DType::int8, buf) == 127);
  ir::store_int(DType::int8, -300, buf);
  CHECK(ir::load_int(DType::int8, buf) == -128);
  ir::store_int(DType::uint8, -5, buf);
  CHECK(ir::load_int(DType::uint8, buf) == 0);
  ir::store_int(DType::uint16, 70000, buf);
  CHECK(ir::load_int(DType::uint16, buf) == 65535);
  ir::store_int(DType::uint32, int64_t{1} << 40, buf);
  CHECK(ir::load_int(DType::uint32, buf) == 4294967295);
  ir::store_int(DType::int32, -(int64_t{1} << 40), buf);
  CHECK(ir::load_int(DType::int32, buf) == INT32_MIN);
  ir::store_int(DType::int32, 16777217, buf);  // exact on the integer path (no fp32 rounding)
  CHECK(ir::load_int(DType::int32, buf) == 16777217);
  ir::store_int(DType::bool_, 5, buf);
  CHECK(buf[0] == 1);
  ir::store_int(DType::bool_, 0, buf);
  CHECK(buf[0] == 0);
  // A float destination goes through the float rounding: 2049 -> fp16 2048 (tie to even).
  ir::store_int(DType::float16, 2049, buf);
  CHECK(ir::decode(DType::float16, buf) == 2048.0f);
}

TEST_CASE("fill_uninitialized writes NaN to floats, 4 to integers, 1 to bool", "[core][numerics]") {
  for (DType t :
       {DType::float32, DType::bfloat16, DType::float16, DType::tfloat32, DType::float8_e4m3, DType::float8_e5m2}) {
    const int n = ir::dtype_size(t);
    std::vector<uint8_t> buf(5 * n + 3, 0xCD);
    ir::fill_uninitialized(t, buf.data(), 5);
    for (int i = 0; i < 5; ++i) {
      INFO(ir::to_string(t) << " element " << i);
      CHECK(std::isnan(ir::decode(t, buf.data() + i * n)));
    }
    for (size_t i = 5 * n; i < buf.size(); ++i) CHECK(buf[i] == 0xCD);  // only `count` elements
  }
  struct IntCase {
    DType t;
    std::vector<uint8_t> bytes;
  };
  for (const IntCase& c : {IntCase{DType::int8, {4}}, IntCase{DType::uint8, {4}}, IntCase{DType::int16, {4, 0}},
                           IntCase{DType::uint16, {4, 0}}, IntCase{DType::int32, {4, 0, 0, 0}},
                           IntCase{DType::uint32, {4, 0, 0, 0}}, IntCase{DType::bool_, {1}}}) {
    const size_t n = c.bytes.size();
    std::vector<uint8_t> buf(3 * n + 2, 0xCD);
    ir::fill_uninitialized(c.t, buf.data(), 3);
    for (size_t i = 0; i < 3 * n; ++i) {
      INFO(ir::to_string(c.t) << " byte " << i);
      CHECK(buf[i] == c.bytes[i % n]);
    }
    CHECK(buf[3 * n] == 0xCD);
    CHECK(buf[3 * n + 1] == 0xCD);
  }
  uint8_t untouched[2] = {0xCD, 0xCD};
  ir::fill_uninitialized(DType::int16, untouched, 0);
  CHECK(untouched[0] == 0xCD);
}

// ---- trn3 formats: float8_e4m3fn (OCP, bias 7, max 448, no inf, NaN S.1111.111) ---------------

TEST_CASE("float8_e4m3fn rounding, saturation to NaN and specials", "[core][numerics][mx]") {
  const DType t = DType::float8_e4m3fn;
  CHECK(enc(t, 1.0f) == 0x38);
  CHECK(enc(t, 448.0f) == 0x7e);  // 1.75 * 2^8: exponent 15 is finite here
  CHECK(enc(t, 256.0f) == 0x78);  // 0x78 is 256, not inf as in float8_e4m3
  CHECK(enc(t, 240.0f) == 0x77);
  CHECK(enc(t, 1.0625f) == 0x38);  // RNE as in float8_e4m3
  // Above 448 the next step would be 480 = S.1111.111, the NaN code: 464 ties to the even 448,
  // anything that rounds further is NaN (no inf), with the sign kept.
  CHECK(enc(t, 464.0f) == 0x7e);
  CHECK(enc(t, std::nextafter(464.0f, 1000.0f)) == 0x7f);
  CHECK(enc(t, -1000.0f) == 0xff);
  CHECK(enc(t, kInf) == 0x7f);
  CHECK(enc(t, -kInf) == 0xff);
  CHECK(enc(t, kNaN) == 0x7f);
  CHECK(enc(t, -kNaN) == 0x7f);  // a NaN input is the canonical (positive) NaN
  // Subnormals as float8_e4m3: step 2^-9.
  CHECK(enc(t, std::ldexp(1.0f, -9)) == 0x01);
  CHECK(enc(t, std::ldexp(1.0f, -10)) == 0x00);  // tie -> even 0
  CHECK(enc(t, -0.0f) == 0x80);
  CHECK(ir::max_finite(t) == 448.0);
  // Decode: every code against the bit layout, and every non-NaN code survives a round trip.
  for (uint32_t code = 0; code < 256; ++code) {
    INFO("code 0x" << std::hex << code);
    const float got = dec(t, code);
    if ((code & 0x7f) == 0x7f) {
      CHECK(std::isnan(got));
      continue;
    }
    // Only S.1111.111 is special, so the IEEE formula of e4m3 with the top exponent finite.
    const int e = (code >> 3) & 15, m = code & 7;
    const double mag = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
    CHECK(static_cast<double>(got) == ((code & 0x80) ? -mag : mag));
    CHECK(enc(t, got) == code);
  }
}

// ---- float8_e8m0fnu (2^(code - 127), 0xFF NaN, no sign, no zero) -------------------------------

TEST_CASE("float8_e8m0fnu rounds to the nearest power of two, ties up", "[core][numerics][mx]") {
  const DType t = DType::float8_e8m0fnu;
  for (uint32_t code = 0; code < 255; ++code) {
    INFO("code " << code);
    CHECK(static_cast<double>(dec(t, code)) == std::ldexp(1.0, static_cast<int>(code) - 127));
    CHECK(enc(t, dec(t, code)) == code);
  }
  CHECK(std::isnan(dec(t, 0xff)));
  CHECK(dec(t, 0) == std::ldexp(1.0f, -127));  // an fp32 subnormal, exact
  CHECK(enc(t, 1.0f) == 127);
  CHECK(enc(t, 1.4999f) == 127);
  CHECK(enc(t, 1.5f) == 128);  // the tie between 1 and 2 goes up
  CHECK(enc(t, 3.0f) == 129);  // ... also from an even code (no RNE here)
  CHECK(enc(t, 0.75f) == 127);
  CHECK(enc(t, std::ldexp(1.0f, -130)) == 0);  // below 2^-127: the smallest scale
  CHECK(enc(t, 1e-45f) == 0);
  CHECK(enc(t, std::ldexp(1.4f, 127)) == 254);
  CHECK(enc(t, std::ldexp(1.5f, 127)) == 0xff);  // rounds to 2^128: out of range
  for (float v : {0.0f, -0.0f, -1.0f, kInf, -kInf, kNaN}) {
    INFO(v);
    CHECK(enc(t, v) == 0xff);
  }
  CHECK(ir::max_finite(t) == std::ldexp(1.0, 127));
}

// ---- packed MX words -------------------------------------------------------------------------------

TEST_CASE("packed MX words: sub-element j is byte j (fp8) or nibble j (fp4)", "[core][numerics][mx]") {
  // fp8: 0x3c = 1.0 in e5m2, 0x38 = 1.0 in e4m3fn; the word's low byte is sub-element 0.
  const uint32_t w = 0xC0'7B'3C'00u;
  CHECK(ir::decode_packed(DType::float8_e5m2_x4, w, 0) == 0.0f);
  CHECK(ir::decode_packed(DType::float8_e5m2_x4, w, 1) == 1.0f);
  CHECK(ir::decode_packed(DType::float8_e5m2_x4, w, 2) == 57344.0f);
  CHECK(ir::decode_packed(DType::float8_e5m2_x4, w, 3) == -2.0f);
  CHECK(ir::decode_packed(DType::float8_e4m3fn_x4, 0x7E'00'00'38u, 0) == 1.0f);
  CHECK(ir::decode_packed(DType::float8_e4m3fn_x4, 0x7E'00'00'38u, 3) == 448.0f);
  // fp4 e2m1: codes 0..7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 is the sign; bits 16..31 unused.
  const float fp4[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (uint32_t c = 0; c < 16; ++c)
    for (int j = 0; j < 4; ++j) {
      const uint32_t word = 0xFFFF0000u | (c << (4 * j));
      CHECK(ir::decode_packed(DType::float4_e2m1fn_x4, word, j) == ((c & 8) ? -fp4[c & 7] : fp4[c & 7]));
    }
  // encode_packed rounds RNE and saturates (no inf, no NaN from overflow); NaN stays NaN.
  CHECK(ir::encode_packed(DType::float8_e4m3fn_x4, {1.0f, 1000.0f, -kInf, 1.0625f}) == 0x38'FE'7E'38u);
  CHECK(ir::encode_packed(DType::float8_e5m2_x4, {1e6f, -0.0f, kNaN, 1.0f}) == 0x3C'7E'80'7Bu);
  // As whole words, packed types are uint32: what memset and the fresh-memory sentinel write.
  CHECK(enc(DType::float8_e4m3fn_x4, 0.0f) == 0u);
  CHECK(dec(DType::float4_e2m1fn_x4, 0x12345678u) == static_cast<float>(0x12345678u));
  uint8_t buf[8];
  ir::fill_uninitialized(DType::float8_e5m2_x4, buf, 2);
  CHECK(ir::load_int(DType::float8_e5m2_x4, buf + 4) == 4);
}
