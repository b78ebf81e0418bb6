#include "knit/ir/numerics.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "knit/ir/error.h"

namespace knit::ir {
namespace {

// What a small binary format does with its top codes:
//   Ieee:  the all-ones exponent holds inf (mantissa 0) and NaN (mantissa != 0); overflow -> inf.
//   FnNaN: ("fn", OCP e4m3fn) no inf; only S.1..1.1..1 is NaN, the rest of the top binade is
//          finite; overflow and inf -> NaN.
//   None:  (fp4 e2m1fn) every code is a number; overflow saturates.
enum class Specials { Ieee, FnNaN, None };

// A binary format with `ebits` exponent and `mbits` mantissa bits: bias 2^(e-1)-1, subnormals
// below the smallest normal, specials as above.
struct MiniFloat {
  int ebits;
  int mbits;
  Specials specials = Specials::Ieee;
  int bias() const { return (1 << (ebits - 1)) - 1; }
  uint32_t exp_mask() const { return ((1u << ebits) - 1) << mbits; }
  uint32_t mant_mask() const { return (1u << mbits) - 1; }
  uint32_t sign_bit() const { return 1u << (ebits + mbits); }
  // Largest finite magnitude code.
  uint32_t max_code() const {
    switch (specials) {
      case Specials::Ieee: return (exp_mask() - (1u << mbits)) | mant_mask();
      case Specials::FnNaN: return exp_mask() | (mant_mask() - 1);
      case Specials::None: break;
    }
    return exp_mask() | mant_mask();
  }
  uint32_t nan_code(uint32_t sign) const {
    return sign | exp_mask() | (specials == Specials::Ieee ? 1u << (mbits - 1) : mant_mask());
  }

  double decode(uint32_t bits) const {
    const bool negative = bits & sign_bit();
    const uint32_t e = (bits & exp_mask()) >> mbits;
    const uint32_t m = bits & mant_mask();
    double mag;
    if (specials == Specials::Ieee && e == (1u << ebits) - 1)
      mag = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
    else if (specials == Specials::FnNaN && (bits & ~sign_bit()) == (exp_mask() | mant_mask()))
      mag = std::numeric_limits<double>::quiet_NaN();
    else if (e == 0) mag = std::ldexp(static_cast<double>(m), 1 - bias() - mbits);
    else mag = std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -mbits), static_cast<int>(e) - bias());
    return negative ? -mag : mag;
  }

  // Round to nearest, ties to even; subnormals kept; overflow per `specials`.
  uint32_t encode(float x) const {
    const uint32_t sign = std::signbit(x) ? sign_bit() : 0;
    if (std::isnan(x)) return nan_code(sign);
    const uint32_t overflow = specials == Specials::Ieee    ? sign | exp_mask()
                              : specials == Specials::FnNaN ? nan_code(sign)
                                                            : sign | max_code();
    const double a = std::fabs(static_cast<double>(x));
    if (std::isinf(a)) return overflow;
    if (a == 0) return sign;
    const int emin = 1 - bias();
    const int emax = static_cast<int>(max_code() >> mbits) - bias();
    int e2;
    std::frexp(a, &e2);  // a = f * 2^e2, f in [0.5, 1)
    int exponent = std::max(e2 - 1, emin);
    // a / step is exact in double (power-of-two scaling); nearbyint rounds ties to even.
    double q = std::nearbyint(std::ldexp(a, mbits - exponent));
    if (q == 0) return sign;
    if (q >= std::ldexp(1.0, mbits + 1)) {  // rounding carried into the next binade
      q /= 2;
      exponent += 1;
    }
    if (exponent > emax) return overflow;
    const uint32_t mant = static_cast<uint32_t>(q);
    if (mant < (1u << mbits)) return sign | mant;  // subnormal (exponent == emin)
    const uint32_t code = (static_cast<uint32_t>(exponent + bias()) << mbits) | (mant - (1u << mbits));
    return code > max_code() ? overflow : sign | code;
  }
};

// float8_e8m0fnu: 2^(code-127), 0xFF = NaN (rules in numerics.h).
constexpr uint32_t kE8M0NaN = 0xFF;
double decode_e8m0(uint32_t code) {
  return code == kE8M0NaN ? std::numeric_limits<double>::quiet_NaN() : std::ldexp(1.0, static_cast<int>(code) - 127);
}
uint32_t encode_e8m0(float x) {
  if (!(x > 0) || std::isinf(x)) return kE8M0NaN;  // NaN, zeros, negatives, inf
  int e2;
  const double f = std::frexp(static_cast<double>(x), &e2);  // x = f * 2^e2, f in [0.5, 1)
  const int e = (f >= 0.75 ? e2 : e2 - 1);                   // ties (1.5 * 2^k) round up
  if (e < -127) return 0;
  if (e > 127) return kE8M0NaN;
  return static_cast<uint32_t>(e + 127);
}

constexpr MiniFloat kFloat16{5, 10};
constexpr MiniFloat kE4M3{4, 3};
constexpr MiniFloat kE5M2{5, 2};
constexpr MiniFloat kE4M3FN{4, 3, Specials::FnNaN};
constexpr MiniFloat kE2M1FN{2, 1, Specials::None};

// fp32 -> fp32 with the low `drop` mantissa bits rounded away (RNE); used for bf16 and tf32.
uint32_t round_fp32_bits(float v, int drop) {
  uint32_t bits = std::bit_cast<uint32_t>(v);
  if (std::isnan(v)) return (bits | (1u << 22)) & ~((1u << drop) - 1);  // quiet NaN, sign kept
  const uint32_t lsb = (bits >> drop) & 1u;
  bits += ((1u << (drop - 1)) - 1) + lsb;  // carries into the exponent give inf naturally
  return bits & ~((1u << drop) - 1);
}

// Decoding tables for the 8- and 16-bit float formats: reading is the hot path of the
// reference interpreter, so each code is decoded once.
template <size_t N>
std::vector<float> make_table(const MiniFloat& f) {
  std::vector<float> table(N);
  for (size_t i = 0; i < N; ++i) table[i] = static_cast<float>(f.decode(static_cast<uint32_t>(i)));
  return table;
}
const std::vector<float>& table_f16() {
  static const std::vector<float> t = make_table<65536>(kFloat16);
  return t;
}
const std::vector<float>& table_e4m3() {
  static const std::vector<float> t = make_table<256>(kE4M3);
  return t;
}
const std::vector<float>& table_e5m2() {
  static const std::vector<float> t = make_table<256>(kE5M2);
  return t;
}
const std::vector<float>& table_e4m3fn() {
  static const std::vector<float> t = make_table<256>(kE4M3FN);
  return t;
}
const std::vector<float>& table_e2m1fn() {
  static const std::vector<float> t = make_table<16>(kE2M1FN);
  return t;
}
const std::vector<float>& table_e8m0() {
  static const std::vector<float> t = [] {
    std::vector<float> v(256);
    for (uint32_t i = 0; i < 256; ++i) v[i] = static_cast<float>(decode_e8m0(i));
    return v;
  }();
  return t;
}

template <class T>
T read_as(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <class T>
void write_as(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

template <class T>
T saturate_round(float v) {
  if (std::isnan(v)) return 0;
  const double r = std::nearbyint(static_cast<double>(v));
  if (r <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
  if (r >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(r);
}

template <class T>
T saturate_int(int64_t v) {
  if (v < static_cast<int64_t>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
  if (v > static_cast<int64_t>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

}  // namespace

float decode(DType t, const uint8_t* p) {
  switch (t) {
    case DType::bool_: return p[0] ? 1.0f : 0.0f;
    case DType::int8: return static_cast<float>(read_as<int8_t>(p));
    case DType::int16: return static_cast<float>(read_as<int16_t>(p));
    case DType::int32: return static_cast<float>(read_as<int32_t>(p));
    case DType::uint8: return static_cast<float>(p[0]);
    case DType::uint16: return static_cast<float>(read_as<uint16_t>(p));
    case DType::uint32: return static_cast<float>(read_as<uint32_t>(p));
    case DType::float16: return table_f16()[read_as<uint16_t>(p)];
    case DType::bfloat16: return std::bit_cast<float>(static_cast<uint32_t>(read_as<uint16_t>(p)) << 16);
    case DType::float32:
    case DType::tfloat32: return read_as<float>(p);
    case DType::float8_e4m3: return table_e4m3()[p[0]];
    case DType::float8_e5m2: return table_e5m2()[p[0]];
    case DType::float8_e4m3fn: return table_e4m3fn()[p[0]];
    case DType::float8_e8m0fnu: return table_e8m0()[p[0]];
    case DType::float8_e5m2_x4:
    case DType::float8_e4m3fn_x4:
    case DType::float4_e2m1fn_x4: return static_cast<float>(read_as<uint32_t>(p));  // the whole word
  }
  return 0;
}

void encode(DType t, float v, uint8_t* p) {
  if (std::isnan(v)) v = std::bit_cast<float>(0x7FC00000u);  // the canonical NaN (numerics.h)
  switch (t) {
    case DType::bool_: p[0] = (v != 0.0f || std::isnan(v)) ? 1 : 0; return;
    case DType::int8: write_as(p, saturate_round<int8_t>(v)); return;
    case DType::int16: write_as(p, saturate_round<int16_t>(v)); return;
    case DType::int32: write_as(p, saturate_round<int32_t>(v)); return;
    case DType::uint8: write_as(p, saturate_round<uint8_t>(v)); return;
    case DType::uint16: write_as(p, saturate_round<uint16_t>(v)); return;
    case DType::uint32: write_as(p, saturate_round<uint32_t>(v)); return;
    case DType::float16: write_as(p, static_cast<uint16_t>(kFloat16.encode(v))); return;
    case DType::bfloat16: write_as(p, static_cast<uint16_t>(round_fp32_bits(v, 16) >> 16)); return;
    case DType::float32: write_as(p, v); return;
    case DType::tfloat32: write_as(p, round_fp32_bits(v, 13)); return;
    case DType::float8_e4m3: p[0] = static_cast<uint8_t>(kE4M3.encode(v)); return;
    case DType::float8_e5m2: p[0] = static_cast<uint8_t>(kE5M2.encode(v)); return;
    case DType::float8_e4m3fn: p[0] = static_cast<uint8_t>(kE4M3FN.encode(v)); return;
    case DType::float8_e8m0fnu: p[0] = static_cast<uint8_t>(encode_e8m0(v)); return;
    case DType::float8_e5m2_x4:
    case DType::float8_e4m3fn_x4:
    case DType::float4_e2m1fn_x4: write_as(p, saturate_round<uint32_t>(v)); return;  // the whole word
  }
}

float round_to(DType t, float v) {
  uint8_t buf[4];
  encode(t, v, buf);
  return decode(t, buf);
}

uint32_t load_bits(DType t, const uint8_t* p) {
  switch (dtype_size(t)) {
    case 1: return dtype_kind(t) == DTypeKind::SignedInt ? static_cast<uint32_t>(read_as<int8_t>(p)) : p[0];
    case 2:
      return dtype_kind(t) == DTypeKind::SignedInt ? static_cast<uint32_t>(read_as<int16_t>(p)) : read_as<uint16_t>(p);
    default: return read_as<uint32_t>(p);
  }
}

void store_bits(DType t, uint32_t bits, uint8_t* p) {
  switch (dtype_size(t)) {
    case 1: p[0] = static_cast<uint8_t>(bits); return;
    case 2: write_as(p, static_cast<uint16_t>(bits)); return;
    default: write_as(p, bits); return;
  }
}

int64_t load_int(DType t, const uint8_t* p) {
  switch (t) {
    case DType::bool_: return p[0] ? 1 : 0;
    case DType::int8: return read_as<int8_t>(p);
    case DType::int16: return read_as<int16_t>(p);
    case DType::int32: return read_as<int32_t>(p);
    case DType::uint8: return p[0];
    case DType::uint16: return read_as<uint16_t>(p);
    case DType::uint32:
    case DType::float8_e5m2_x4:
    case DType::float8_e4m3fn_x4:
    case DType::float4_e2m1fn_x4: return read_as<uint32_t>(p);
    default: return static_cast<int64_t>(decode(t, p));
  }
}

void store_int(DType t, int64_t v, uint8_t* p) {
  switch (t) {
    case DType::bool_: p[0] = v != 0; return;
    case DType::int8: write_as(p, saturate_int<int8_t>(v)); return;
    case DType::int16: write_as(p, saturate_int<int16_t>(v)); return;
    case DType::int32: write_as(p, saturate_int<int32_t>(v)); return;
    case DType::uint8: write_as(p, saturate_int<uint8_t>(v)); return;
    case DType::uint16: write_as(p, saturate_int<uint16_t>(v)); return;
    case DType::uint32:
    case DType::float8_e5m2_x4:
    case DType::float8_e4m3fn_x4:
    case DType::float4_e2m1fn_x4: write_as(p, saturate_int<uint32_t>(v)); return;
    default: encode(t, static_cast<float>(v), p); return;
  }
}

double max_finite(DType t) {
  switch (t) {
    case DType::float16: return 65504.0;
    case DType::bfloat16: return std::bit_cast<float>(0x7f7f0000u);
    case DType::float32: return FLT_MAX;
    case DType::tfloat32: return std::bit_cast<float>(0x7f7fe000u);
    case DType::float8_e4m3: return 240.0;
    case DType::float8_e5m2:
    case DType::float8_e5m2_x4: return 57344.0;
    case DType::float8_e4m3fn:
    case DType::float8_e4m3fn_x4: return 448.0;
    case DType::float8_e8m0fnu: return std::ldexp(1.0, 127);
    case DType::float4_e2m1fn_x4: return 6.0;
    default: return 0;
  }
}

float decode_packed(DType t, uint32_t word, int j) {
  switch (t) {
    case DType::float8_e5m2_x4: return table_e5m2()[(word >> (8 * j)) & 0xFF];
    case DType::float8_e4m3fn_x4: return table_e4m3fn()[(word >> (8 * j)) & 0xFF];
    case DType::float4_e2m1fn_x4: return table_e2m1fn()[(word >> (4 * j)) & 0xF];
    default: internal_error("decode_packed on the unpacked dtype " + std::string(to_string(t)));
  }
}

uint32_t encode_packed(DType t, const float (&values)[4]) {
  const MiniFloat* f = t == DType::float8_e5m2_x4 ? &kE5M2 : t == DType::float8_e4m3fn_x4 ? &kE4M3FN : nullptr;
  if (!f) internal_error("encode_packed supports the fp8 x4 dtypes only, not " + std::string(to_string(t)));
  const float max = static_cast<float>(max_finite(t));
  uint32_t word = 0;
  for (int j = 0; j < 4; ++j)  // std::clamp keeps NaN, which encodes to the format's NaN
    word |= f->encode(std::clamp(values[j], -max, max)) << (8 * j);
  return word;
}

void fill_uninitialized(DType t, uint8_t* p, int64_t count) {
  const int size = dtype_size(t);
  uint8_t pattern[4];
  if (is_float(t)) encode(t, std::numeric_limits<float>::quiet_NaN(), pattern);
  else store_int(t, t == DType::bool_ ? 1 : 4, pattern);
  if (count <= 0) return;
  // One element, then copies of what is already filled, doubling each time (a call per element
  // was the simulator's largest cost when placing big tiles).
  const int64_t total = count * size;
  std::memcpy(p, pattern, static_cast<size_t>(size));
  for (int64_t filled = size; filled < total;) {
    const int64_t n = std::min(filled, total - filled);
    std::memcpy(p + filled, p, static_cast<size_t>(n));
    filled += n;
  }
}

}  // namespace knit::ir
