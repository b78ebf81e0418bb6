#include "alu.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numbers>

#include "knit/ir/numerics.h"

namespace knit::sim {

using ir::ActFunc;
using ir::AluOp;
using ir::DType;

// maximum / minimum ignore a NaN operand (a NaN only if both are, then the first), and order
// -0 below +0. Spelled out with comparisons and selects rather than fmaxf: C libraries and
// compilers differ on signalling NaNs and on which zero a tie returns, and every execution path
// must give the same bits.
float max_of(float a, float b) {
  if (std::isnan(a)) return b == b ? b : a;
  if (std::isnan(b)) return a;
  if (a == b) return std::signbit(a) ? b : a;  // +0 over -0 (equal nonzero values are identical)
  return a > b ? a : b;
}

float min_of(float a, float b) {
  if (std::isnan(a)) return b == b ? b : a;
  if (std::isnan(b)) return a;
  if (a == b) return std::signbit(a) ? a : b;  // -0 below +0
  return a < b ? a : b;
}

float alu(AluOp op, float a, float b) {
  switch (op) {
    case AluOp::bypass: return a;
    case AluOp::add: return a + b;
    case AluOp::subtract: return a - b;
    case AluOp::multiply: return a * b;
    case AluOp::divide: return a / b;
    case AluOp::maximum: return max_of(a, b);
    case AluOp::minimum: return min_of(a, b);
    case AluOp::equal: return a == b ? 1.0f : 0.0f;
    case AluOp::not_equal: return a != b ? 1.0f : 0.0f;
    case AluOp::greater_equal: return a >= b ? 1.0f : 0.0f;
    case AluOp::greater: return a > b ? 1.0f : 0.0f;
    case AluOp::less_equal: return a <= b ? 1.0f : 0.0f;
    case AluOp::less: return a < b ? 1.0f : 0.0f;
    case AluOp::logical_and: return (a != 0.0f && b != 0.0f) ? 1.0f : 0.0f;
    case AluOp::logical_or: return (a != 0.0f || b != 0.0f) ? 1.0f : 0.0f;
    case AluOp::logical_xor: return ((a != 0.0f) != (b != 0.0f)) ? 1.0f : 0.0f;
    case AluOp::power: return std::pow(a, b);
    // abs_max/abs_min return the signed operand of larger/smaller magnitude; ties give b.
    case AluOp::abs_max: return std::fabs(a) > std::fabs(b) ? a : b;
    case AluOp::abs_min: return std::fabs(a) < std::fabs(b) ? a : b;
    case AluOp::fmod: return std::fmod(a, b);
    case AluOp::mod: {  // Python-style modulo: result has the sign of b
      const float r = std::fmod(a, b);
      return (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) ? r + b : r;
    }
    case AluOp::average: return a + b;  // summed; the partition reduction divides by the count
    case AluOp::abs: return std::fabs(a);
    case AluOp::square: return a * a;
    case AluOp::relu: return a > 0.0f ? a : 0.0f;
    case AluOp::rsqrt: return 1.0f / std::sqrt(a);
    case AluOp::reciprocal: return 1.0f / a;
    default: return std::nanf("");  // bit-vector ops are handled by alu_bits
  }
}

uint32_t alu_bits(AluOp op, uint32_t a, uint32_t b) {
  switch (op) {
    case AluOp::invert: return ~a;
    case AluOp::bitwise_and: return a & b;
    case AluOp::bitwise_or: return a | b;
    case AluOp::bitwise_xor: return a ^ b;
    case AluOp::left_shift: return b >= 32 ? 0u : a << b;
    case AluOp::right_shift: return b >= 32 ? 0u : a >> b;
    default: return a;
  }
}

namespace {
constexpr double kLog2e = 0x1.71547652b82fep+0;
constexpr double kLn2Hi = 0x1.62e42fee00000p-1;  // 32 significant bits: n * kLn2Hi is exact
constexpr double kLn2Lo = 0x1.a39ef35793c76p-33;
constexpr double kRound = 0x1.8p52;  // adding it rounds |z| < 2^51 to an integer
constexpr double kInvFactorial[12] = {1.0,       1.0,        1.0 / 2,     1.0 / 6,      1.0 / 24,      1.0 / 120,
                                      1.0 / 720, 1.0 / 5040, 1.0 / 40320, 1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800};

double clamped_exp_input(float x) { return x < -104.0f ? -104.0 : (x > 89.0f ? 89.0 : static_cast<double>(x)); }

// 2^n for the integer n that `shifted` (= n + kRound) holds in its low bits; n is in [-150, 128],
// so 2^n is a normal double.
double power_of_two(double shifted) {
  const int64_t n_int = std::bit_cast<int64_t>(shifted) - std::bit_cast<int64_t>(kRound);
  return std::bit_cast<double>(static_cast<uint64_t>(n_int + 1023) << 52);
}
}  // namespace

// exp_note: Knit's own fp32 exp, used by every path (the reference executors and the native
// bodies compile this same source). A C library's expf is a call LLVM cannot vectorize, and its
// bits vary between C libraries; this is straight-line double arithmetic with no table and no
// branch, so the native bodies vectorize it, and its bits are the same on every x86-64 host.
// Method: x is clamped to [-104, 89] (beyond it exp rounds to +0 / inf in fp32 anyway), then
// split as x = n ln2 + r with n = round(x / ln2) and |r| <= ln2 / 2 (ln2 in two parts, Cody-Waite,
// so n * kLn2Hi is exact); exp(r) is its Taylor polynomial of degree 11 (truncation below 1e-14
// relative) evaluated in double by Horner's rule, scaled by 2^n (built from its exponent bits),
// and rounded once to fp32. The double result is within about 1e-14 (relative) of exp(x), so the
// fp32 result is the correctly rounded one except where exp(x) lies that close to a rounding
// midpoint: error at most 0.5 ULP + 1e-6 ULP (test_exp.cpp measures it against long double
// expl). NaN returns NaN (quieted), +inf inf, -inf +0.
float exp_of(float x) {
  const double xd = clamped_exp_input(x);
  const double shifted = xd * kLog2e + kRound;
  const double n = shifted - kRound;
  const double r = (xd - n * kLn2Hi) - n * kLn2Lo;
  double p = kInvFactorial[11];
  for (int k = 10; k >= 0; --k) p = p * r + kInvFactorial[k];
  const float y = static_cast<float>(p * power_of_two(shifted));
  return x != x ? x + x : y;
}

// exp_guess_note: exp_of's bits at about half its cost, where that is certain. The same
// reduction, a degree-10 polynomial, and fused multiply-adds (explicit std::fma: on a host with
// FMA one instruction each, so the Horner chain is 10 operations instead of 22; without FMA a
// library call, same bits, slower). The double y is then within E = 2.3e-13 (relative) of
// e^x: truncation 0.347^11 / 11! = 2.2e-13 plus rounding. fp32 rounding of y and of e^x agree unless a rounding
// midpoint lies between them, and exp_of is correctly rounded unless e^x is within 1e-14 of one; so where y is further
// than E + 1e-14 from every midpoint, the result is exp_of(x)'s. A midpoint is where the 29 bits of y's significand
// below fp32's 24 are 1 followed by zeros; E + 1e-14 relative is under 2^12 of those bits' units (y's significand lies
// in [1, 2): 2.4e-13 * 2 * 2^52 < 2^12). Below 2^-126 the fp32 grid is the subnormals' fixed 2^-149, which y + 2^-126
// puts at the same bit position. Where y is nearer than that to a midpoint (8,315 of the 2^32 inputs), `unsure` is set
// and the caller recomputes with exp_of. test_exp.cpp checks the agreement (over every input
// with KNIT_EXP_EXHAUSTIVE=1).
float exp_guess(float x, uint32_t& unsure) {
  const double xd = clamped_exp_input(x);
  const double shifted = std::fma(xd, kLog2e, kRound);
  const double n = shifted - kRound;
  const double r = std::fma(-n, kLn2Lo, std::fma(-n, kLn2Hi, xd));
  double p = kInvFactorial[10];
  for (int k = 9; k >= 0; --k) p = std::fma(p, r, kInvFactorial[k]);
  const double y = p * power_of_two(shifted);
  const double on_grid = y < 0x1p-126 ? y + 0x1p-126 : y;
  constexpr uint64_t kBelowFloat = (uint64_t{1} << 29) - 1, kMidpoint = uint64_t{1} << 28, kMargin = 1 << 12;
  const uint64_t below = std::bit_cast<uint64_t>(on_grid) & kBelowFloat;
  unsure |= static_cast<uint32_t>(below - (kMidpoint - kMargin) < 2 * kMargin);
  return x != x ? x + x : static_cast<float>(y);
}

namespace {
constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrtPi = 0.56418958354775628f;
float normal_cdf(float x) { return 0.5f * (1.0f + std::erf(x * kInvSqrt2)); }

// f(x) with `exp` for every exp in it: exp_of, or exp_guess (activate_guess).
template <class Exp>
float activate_with(ActFunc f, float x, float alpha, Exp&& exp) {
  const auto sigmoid = [&](float v) { return 1.0f / (1.0f + exp(-v)); };
  const auto normal_pdf = [&](float v) { return exp(-0.5f * v * v) * kInvSqrt2 * kInvSqrtPi; };
  switch (f) {
    case ActFunc::copy: return x;
    case ActFunc::square: return x * x;
    case ActFunc::sigmoid: return sigmoid(x);
    case ActFunc::relu: return x > 0.0f ? x : 0.0f;
    case ActFunc::prelu: return x > 0.0f ? x : alpha * x;
    case ActFunc::gelu: return x * normal_cdf(x);
    case ActFunc::gelu_dx: return normal_cdf(x) + x * normal_pdf(x);
    case ActFunc::gelu_apprx_tanh: {
      const float k = 0.7978845608028654f;  // sqrt(2/pi)
      return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
    }
    case ActFunc::gelu_apprx_sigmoid: return x * sigmoid(1.702f * x);
    case ActFunc::gelu_apprx_sigmoid_dx: {
      const float s = sigmoid(1.702f * x);
      return s + 1.702f * x * s * (1.0f - s);
    }
    case ActFunc::silu: return x * sigmoid(x);
    case ActFunc::silu_dx: {
      const float s = sigmoid(x);
      return s * (1.0f + x * (1.0f - s));
    }
    case ActFunc::tanh: return std::tanh(x);
    case ActFunc::softplus: return std::log1p(exp(x));
    case ActFunc::mish: return x * std::tanh(std::log1p(exp(x)));
    case ActFunc::erf: return std::erf(x);
    case ActFunc::erf_dx: return 2.0f * kInvSqrtPi * exp(-x * x);
    case ActFunc::exp: return exp(x);
    case ActFunc::abs: return std::fabs(x);
    case ActFunc::sign: return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f);
    case ActFunc::log: return std::log(x);
    case ActFunc::sin: return std::sin(x);
    case ActFunc::arctan: return std::atan(x);
    case ActFunc::sqrt: return std::sqrt(x);
    case ActFunc::rsqrt: return 1.0f / std::sqrt(x);
    case ActFunc::reciprocal: return 1.0f / x;
  }
  return x;
}
}  // namespace

float activate(ActFunc f, float x, float alpha) { return activate_with(f, x, alpha, exp_of); }

float activate_guess(ActFunc f, float x, float alpha, uint32_t& unsure) {
  return activate_with(f, x, alpha, [&](float v) { return exp_guess(v, unsure); });
}

float apply(AluOp op, float data, float operand, bool reverse) {
  if (op == AluOp::bypass) return data;
  if (ir::alu_class(op) == ir::AluClass::Unary) return alu(op, data, 0.0f);
  return reverse ? alu(op, operand, data) : alu(op, data, operand);
}

uint32_t apply_bits(AluOp op, uint32_t data, uint32_t operand, bool reverse) {
  if (op == AluOp::bypass) return data;
  if (ir::alu_class(op) == ir::AluClass::BitvecUnary) return alu_bits(op, data, 0);
  return reverse ? alu_bits(op, operand, data) : alu_bits(op, data, operand);
}

int64_t int_alu(AluOp op, int64_t a, int64_t b) {
  switch (op) {
    case AluOp::add: return a + b;
    case AluOp::subtract: return a - b;
    case AluOp::maximum: return a > b ? a : b;
    case AluOp::minimum: return a < b ? a : b;
    default: {
      int64_t r = 0;
      if (!__builtin_mul_overflow(a, b, &r)) return r;
      return (a < 0) != (b < 0) ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
    }
  }
}

float alu_fold(AluOp op, const float* v, int64_t n) {
  float r = v[0];
  for (int64_t i = 1; i < n; ++i) r = alu(op, r, v[i]);
  return r;
}

uint32_t alu_fold_bits(AluOp op, const uint32_t* v, int64_t n) {
  uint32_t r = v[0];
  for (int64_t i = 1; i < n; ++i) r = alu_bits(op, r, v[i]);
  return r;
}

float reduce_identity(AluOp op) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  switch (op) {
    case AluOp::multiply: return 1.0f;
    case AluOp::maximum: return -inf;
    case AluOp::minimum:
    case AluOp::abs_min: return inf;  // abs_max / abs_min: 0 / +inf (a DESIGN CHOICE; NKI leaves them open)
    default: return 0.0f;
  }
}

void update_accumulator(ir::ReduceCmd cmd, AluOp op, float& acc, float row, float seed) {
  switch (cmd) {
    case ir::ReduceCmd::idle: return;
    case ir::ReduceCmd::reset: acc = reduce_identity(op); return;
    case ir::ReduceCmd::reset_reduce: acc = row; return;
    case ir::ReduceCmd::reduce: acc = alu(op, acc, row); return;
    case ir::ReduceCmd::load_reduce: acc = alu(op, seed, row); return;
  }
}

uint32_t memset_bits(ir::DType t, double value) {
  uint8_t element[4] = {};
  if (ir::is_integer(t)) ir::store_int(t, static_cast<int64_t>(value), element);
  else ir::encode(t, static_cast<float>(value), element);
  return ir::load_bits(t, element);
}

Moments group_moments(const float* row, int64_t F, int64_t first) {
  Moments g;
  group_moments_rows<1>(&row, F, first, &g);
  return g;
}

std::pair<float, float> combine_moments(const float* triples, int64_t k) {
  float n = 0, weighted = 0;
  for (int64_t t = 0; t < k; ++t) {
    n += triples[3 * t];
    weighted += triples[3 * t] * triples[3 * t + 1];
  }
  const float mean = weighted / n;
  float m2 = 0;
  for (int64_t t = 0; t < k; ++t) {
    const float d = triples[3 * t + 1] - mean;
    m2 += triples[3 * t + 2] + triples[3 * t] * d * d;
  }
  return {mean, m2 / n};
}

bool ranks_above(float a, float b) {
  if (std::isnan(a)) return !std::isnan(b);
  if (std::isnan(b)) return false;
  return alu(AluOp::greater, a, b) != 0.0f;
}

void top8(const float* row, int64_t F, float* out) {
  int n = 0;  // slots filled
  for (int64_t j = 0; j < F; ++j) {
    // After every kept value it does not rank above (ties included: stable).
    int at = 0;
    while (at < n && !ranks_above(row[j], out[at])) ++at;
    if (at == 8) continue;
    for (int k = n < 8 ? n : 7; k > at; --k) out[k] = out[k - 1];
    out[at] = row[j];
    if (n < 8) ++n;
  }
}

void find_index8(const float* row, int64_t F, const float* vals, int64_t* out) {
  for (int k = 0; k < 8; ++k) {
    int64_t skip = 0;  // occurrences the earlier equal slots took
    for (int e = 0; e < k; ++e) skip += alu(AluOp::equal, vals[e], vals[k]) != 0.0f;
    out[k] = -1;
    for (int64_t j = 0; j < F; ++j)
      if (alu(AluOp::equal, row[j], vals[k]) != 0.0f && skip-- == 0) {
        out[k] = j;
        break;
      }
  }
}

// Exponent of the largest normal of the MX element format (OCP MX "emax_elem").
static int mx_element_emax(DType packed) { return packed == DType::float8_e4m3fn_x4 ? 8 : 15; }

uint32_t quantize_mx_group(DType packed, const float (&x)[kMxGroupPartitions][4],
                           uint32_t (&words)[kMxGroupPartitions]) {
  float amax = 0.0f;
  bool finite = true;
  for (int i = 0; i < kMxGroupPartitions; ++i)
    for (int j = 0; j < 4; ++j) {
      finite = finite && std::isfinite(x[i][j]);
      amax = std::fmax(amax, std::fabs(x[i][j]));
    }
  int exponent = -127;
  if (finite && amax > 0) {
    int e2;
    std::frexp(amax, &e2);  // amax = f * 2^e2, f in [0.5, 1): floor(log2 amax) = e2 - 1
    exponent = std::clamp(e2 - 1 - (mx_element_emax(packed) - 1), -127, 127);
  }
  for (int i = 0; i < kMxGroupPartitions; ++i) {
    float q[4];
    for (int j = 0; j < 4; ++j)
      q[j] = finite ? static_cast<float>(std::ldexp(static_cast<double>(x[i][j]), -exponent)) : std::nanf("");
    words[i] = ir::encode_packed(packed, q);
  }
  return finite ? static_cast<uint32_t>(exponent + 127) : 0xFFu;  // 0xFF: e8m0's NaN
}

}  // namespace knit::sim
