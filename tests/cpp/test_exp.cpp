// Knit's fp32 exp (simulator/src/alu.cpp, exp_note) against long double expl: its error in ULPs
// over a sample of every fp32 input (every one with KNIT_EXP_EXHAUSTIVE=1, about a minute), and
// its special values.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iomanip>
#include <limits>

#include "alu.h"

using knit::sim::exp_guess;
using knit::sim::exp_of;

namespace {

// The distance from y to the exact e^x, in units of the fp32 spacing at e^x's correctly rounded
// value (2^-149 among the subnormals).
long double ulp_error(float y, long double exact) {
  const float rounded = static_cast<float>(exact);
  const float up = std::nextafter(std::fabs(rounded), std::numeric_limits<float>::infinity());
  const long double spacing = static_cast<long double>(up) - std::fabs(rounded);
  return std::fabs(static_cast<long double>(y) - exact) / spacing;
}

}  // namespace

TEST_CASE("exp_of is within 0.5 ULP + 1e-6 of e^x and almost always correctly rounded", "[exp]") {
  const bool exhaustive = std::getenv("KNIT_EXP_EXHAUSTIVE") != nullptr;
  const uint64_t stride = exhaustive ? 1 : 997;  // prime: the sample hits every exponent and low-bit pattern
  long double worst = 0;
  float worst_x = 0;
  uint64_t tested = 0, misrounded = 0;
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += stride) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(bits));
    if (!std::isfinite(x)) continue;
    const long double exact = std::exp(static_cast<long double>(x));
    const float y = exp_of(x);
    ++tested;
    if (exact > static_cast<long double>(std::numeric_limits<float>::max()) * (1 + 0x1p-25L)) {
      REQUIRE(y == std::numeric_limits<float>::infinity());  // rounds past FLT_MAX
      continue;
    }
    if (y != static_cast<float>(exact)) ++misrounded;
    const long double err = ulp_error(y, exact);
    if (err > worst) worst = err, worst_x = x;
  }
  INFO("tested " << tested << " inputs, " << misrounded << " not correctly rounded, worst "
                 << static_cast<double>(worst) << " ULP at x = " << worst_x);
  if (exhaustive)
    WARN("tested " << tested << " inputs, " << misrounded << " not correctly rounded, worst " << std::setprecision(12)
                   << static_cast<double>(worst) << " ULP at x = " << std::hexfloat << worst_x);
  REQUIRE(worst <= 0.5L + 1e-6L);
  REQUIRE(misrounded * 100000 <= tested);  // at most 1 in 100,000
}

TEST_CASE("exp_of at its special values and thresholds", "[exp]") {
  constexpr float inf = std::numeric_limits<float>::infinity();
  REQUIRE(exp_of(0.0f) == 1.0f);
  REQUIRE(exp_of(-0.0f) == 1.0f);
  REQUIRE(exp_of(inf) == inf);
  REQUIRE(exp_of(-inf) == 0.0f);
  REQUIRE(!std::signbit(exp_of(-inf)));
  REQUIRE(std::isnan(exp_of(std::numeric_limits<float>::quiet_NaN())));
  // A NaN's payload survives, quieted, as from the C library's expf.
  const float signalling = std::bit_cast<float>(0x7f800123u);
  REQUIRE(std::bit_cast<uint32_t>(exp_of(signalling)) == 0x7fc00123u);
  // Overflow: 0x1.62e42ep+6 (88.72283) is the largest x whose e^x rounds below inf.
  const float last_finite = 0x1.62e42ep+6f;
  REQUIRE(exp_of(last_finite) == static_cast<float>(std::exp(static_cast<long double>(last_finite))));
  REQUIRE(std::isfinite(exp_of(last_finite)));
  REQUIRE(exp_of(std::nextafter(last_finite, inf)) == inf);
  REQUIRE(exp_of(89.0f) == inf);
  REQUIRE(exp_of(1e30f) == inf);
  // Underflow through the subnormals: e^x near 2^-149 rounds to it or to +0, as the exact value says.
  for (float x = -103.0f; x >= -104.0f; x = std::nextafter(x, -inf))  // every fp32 in [-104, -103]
    REQUIRE(exp_of(x) == static_cast<float>(std::exp(static_cast<long double>(x))));
  REQUIRE(exp_of(-104.0f) == 0.0f);
  REQUIRE(exp_of(-1e30f) == 0.0f);
  // Tiny |x|: e^x rounds to 1, or to the float just below 1 for small negatives.
  REQUIRE(exp_of(0x1p-30f) == 1.0f);
  REQUIRE(exp_of(-0x1p-26f) == 1.0f);
  REQUIRE(exp_of(-0x1p-24f) == std::nextafter(1.0f, 0.0f));
  REQUIRE(exp_of(std::bit_cast<float>(1u)) == 1.0f);  // the smallest subnormal
}

// exp_guess (alu.cpp, exp_guess_note) is the native bodies' fast exp: wherever it does not set
// `unsure`, its bits must be exp_of's (NaNs included). It is unsure rarely: at 8,315 of the 2^32
// inputs in the exhaustive run.
TEST_CASE("exp_guess gives exp_of's bits wherever it is sure, and is rarely unsure", "[exp]") {
  const bool exhaustive = std::getenv("KNIT_EXP_EXHAUSTIVE") != nullptr;
  const uint64_t stride = exhaustive ? 1 : 997;
  uint64_t tested = 0, unsure_count = 0, differ = 0;
  float first_differ = 0;
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += stride) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(bits));
    uint32_t unsure = 0;
    const float guess = exp_guess(x, unsure);
    ++tested;
    if (unsure) {
      ++unsure_count;
      REQUIRE(unsure == 1);
      continue;
    }
    const float exact = exp_of(x);
    if (std::bit_cast<uint32_t>(guess) != std::bit_cast<uint32_t>(exact) && differ++ == 0) first_differ = x;
  }
  INFO("tested " << tested << ", unsure " << unsure_count << ", differ " << differ << " (first at x = " << std::hexfloat
                 << first_differ << ")");
  if (exhaustive) WARN("tested " << tested << ", unsure " << unsure_count << ", differ " << differ);
  REQUIRE(differ == 0);
  REQUIRE(unsure_count * 10000 <= tested);  // the margin costs under 1 input in 10,000
}

TEST_CASE("exp_guess is unsure next to a rounding midpoint and sure at the special values", "[exp]") {
  // exp_of's two inputs that are not correctly rounded (found by the exhaustive run) lie within
  // 1e-14 of a midpoint: a guess there must not claim to be sure (a sure guess would be the
  // correctly rounded value, which is not exp_of's).
  for (const float x : {0x1.060e1ep+6f, -0x1.03d5bep+0f}) {
    uint32_t unsure = 0;
    exp_guess(x, unsure);
    INFO("x = " << std::hexfloat << x);
    REQUIRE(exp_of(x) != static_cast<float>(std::exp(static_cast<long double>(x))));
    REQUIRE(unsure == 1);
  }
  constexpr float inf = std::numeric_limits<float>::infinity();
  for (const float x : {0.0f, -0.0f, 1.0f, -1.0f, 88.0f, -90.0f, -103.5f, -104.0f, inf, -inf}) {
    uint32_t unsure = 0;
    const float guess = exp_guess(x, unsure);
    INFO("x = " << x);
    REQUIRE(unsure == 0);
    REQUIRE(std::bit_cast<uint32_t>(guess) == std::bit_cast<uint32_t>(exp_of(x)));
  }
  const float signalling = std::bit_cast<float>(0x7f800123u);
  uint32_t unsure = 0;
  REQUIRE(std::bit_cast<uint32_t>(exp_guess(signalling, unsure)) == 0x7fc00123u);
  // A flag already set stays set.
  unsure = 1;
  exp_guess(0.5f, unsure);
  REQUIRE(unsure == 1);
}
