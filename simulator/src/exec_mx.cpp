// Semantics: the trn3 MX instructions (quantize_mx, nc_matmul_mx). Layouts and rounding are
// defined in docs/architecture.md ("MX data"): data [P, F] in x4 words whose sub-element j is
// element 4w + j of a quantized row, and for matmul the contraction index k = 4p + j; scales
// [P/8, F], one e8m0 byte for the 32 values of 8 partitions x 4 sub-elements.
#include <algorithm>
#include <cmath>
#include <vector>

#include "machine.h"
#include "matmul.h"

namespace knit::sim {

using namespace knit::ir;

namespace {

constexpr int64_t kGroupPartitions = 8;
constexpr uint32_t kScaleNaN = 0xFF;  // e8m0 NaN

// Exponent of the largest normal of the element format (OCP MX "emax_elem").
int element_emax(DType packed) { return packed == DType::float8_e4m3fn_x4 ? 8 : 15; }

// The value of an e8m0 scale byte (a uint8 scale operand holds the same bits).
float scale_value(uint32_t bits) {
  const uint8_t byte = static_cast<uint8_t>(bits);
  return decode(DType::float8_e8m0fnu, &byte);
}

// One MX operand dequantized to fp32 in contraction order: out[(4p + j) * F + f] = sub-element j
// of word [p, f] times the scale of its group [p / 8, f]. The product is exact (an fp8/fp4 value
// times a power of two) unless it overflows fp32, which gives +-inf.
std::vector<float> dequantize(const Tile& data, const Tile& scale) {
  const std::vector<uint32_t> words = data.read_all_bits();
  const std::vector<uint32_t> scales = scale.read_all_bits();
  std::vector<float> out(static_cast<size_t>(4 * data.P * data.F));
  for (int64_t p = 0; p < data.P; ++p)
    for (int64_t f = 0; f < data.F; ++f) {
      const float s = scale_value(scales[(p / kGroupPartitions) * data.F + f]);
      for (int j = 0; j < 4; ++j)
        out[(4 * p + j) * data.F + f] = decode_packed(data.dtype, words[data.at(p, f)], j) * s;
    }
  return out;
}

}  // namespace

void exec(Machine& m, const QuantizeMx& op) {
  Tile src = m.tile(op.src, "src");
  Tile dst = m.tile(op.dst, "dst");
  Tile scale = m.tile(op.dst_scale, "dst_scale");
  const std::vector<float> x = src.read_all();
  const int64_t F = src.F, W = dst.F;  // W = F / 4 words per partition
  const float kNaN = std::nanf("");
  for (int64_t g = 0; g < src.P / kGroupPartitions; ++g)
    for (int64_t w = 0; w < W; ++w) {
      // The group: partitions 8g..8g+7, elements 4w..4w+3 of each.
      auto value = [&](int64_t i, int j) { return x[(g * kGroupPartitions + i) * F + 4 * w + j]; };
      float amax = 0.0f;
      bool finite = true;
      for (int64_t i = 0; i < kGroupPartitions; ++i)
        for (int j = 0; j < 4; ++j) {
          finite = finite && std::isfinite(value(i, j));
          amax = std::fmax(amax, std::fabs(value(i, j)));
        }
      // scale = 2^(floor(log2 amax) - (emax - 1)), clamped to e8m0's range; all-zero -> 2^-127;
      // a NaN or inf in the group makes its scale and all its elements NaN.
      int exponent = -127;
      if (finite && amax > 0) {
        int e2;
        std::frexp(amax, &e2);  // amax = f * 2^e2, f in [0.5, 1): floor(log2 amax) = e2 - 1
        exponent = std::clamp(e2 - 1 - (element_emax(dst.dtype) - 1), -127, 127);
      }
      scale.write_bits(g * W + w, finite ? static_cast<uint32_t>(exponent + 127) : kScaleNaN);
      for (int64_t i = 0; i < kGroupPartitions; ++i) {
        float q[4];
        for (int j = 0; j < 4; ++j)
          q[j] = finite ? static_cast<float>(std::ldexp(static_cast<double>(value(i, j)), -exponent)) : kNaN;
        dst.write_bits(dst.at(g * kGroupPartitions + i, w), encode_packed(dst.dtype, q));
      }
    }
}

void exec(Machine& m, const NcMatmulMx& op) {
  Tile stat = m.tile(op.stationary, "stationary");
  Tile mov = m.tile(op.moving, "moving");
  Tile stat_scale = m.tile(op.stationary_scale, "stationary_scale");
  Tile mov_scale = m.tile(op.moving_scale, "moving_scale");
  Tile dst = m.tile(op.dst, "dst");
  const std::vector<float> partial =
      matmul_partials(dequantize(stat, stat_scale), dequantize(mov, mov_scale), 4 * stat.P, stat.F, mov.F);
  write_matmul_result(m, dst, partial, op.accumulate);
}

}  // namespace knit::sim
