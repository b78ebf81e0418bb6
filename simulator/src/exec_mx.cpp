// Semantics: the trn3 MX instructions (quantize_mx, nc_matmul_mx). Layouts and rounding are
// defined in docs/architecture.md ("MX data"): data [P, F] in x4 words whose sub-element j is
// element 4w + j of a quantized row, and for matmul the contraction index k = 4p + j; scales
// [P/8, F], one e8m0 byte for the 32 values of 8 partitions x 4 sub-elements.
#include <algorithm>
#include <cmath>
#include <vector>

#include "alu.h"
#include "exec_state.h"
#include "knit/ir/numerics.h"
#include "matmul.h"

namespace knit::sim {

using namespace knit::ir;

namespace {

// The value of an e8m0 scale byte (a uint8 scale operand holds the same bits).
float scale_value(uint32_t bits) {
  const uint8_t byte = static_cast<uint8_t>(bits);
  return decode(DType::float8_e8m0fnu, &byte);
}

}  // namespace

std::vector<float> dequantize_mx(const Tile& data, const Tile& scale) {
  const std::vector<uint32_t> words = data.read_all_bits();
  const std::vector<uint32_t> scales = scale.read_all_bits();
  std::vector<float> out(static_cast<size_t>(4 * data.P * data.F));
  for (int64_t p = 0; p < data.P; ++p)
    for (int64_t f = 0; f < data.F; ++f) {
      const float s = scale_value(scales[(p / kMxGroupPartitions) * data.F + f]);
      for (int j = 0; j < 4; ++j)
        out[(4 * p + j) * data.F + f] = decode_packed(data.dtype, words[data.at(p, f)], j) * s;
    }
  return out;
}

void exec(ExecState& m, const QuantizeMx& op) {
  Tile src = m.tile(op.src, "src");
  Tile dst = m.tile(op.dst, "dst");
  Tile scale = m.tile(op.dst_scale, "dst_scale");
  const std::vector<float> x = src.read_all();
  const int64_t F = src.F, W = dst.F;  // W = F / 4 words per partition
  for (int64_t g = 0; g < src.P / kMxGroupPartitions; ++g)
    for (int64_t w = 0; w < W; ++w) {
      // The group: partitions 8g..8g+7, elements 4w..4w+3 of each (alu.cpp, quantize_mx_group).
      float group[kMxGroupPartitions][4];
      for (int64_t i = 0; i < kMxGroupPartitions; ++i)
        for (int j = 0; j < 4; ++j) group[i][j] = x[(g * kMxGroupPartitions + i) * F + 4 * w + j];
      uint32_t words[kMxGroupPartitions];
      scale.write_bits(g * W + w, quantize_mx_group(dst.dtype, group, words));
      for (int64_t i = 0; i < kMxGroupPartitions; ++i) dst.write_bits(dst.at(g * kMxGroupPartitions + i, w), words[i]);
    }
}

void exec(ExecState& m, const NcMatmulMx& op) {
  Tile stat = m.tile(op.stationary, "stationary");
  Tile mov = m.tile(op.moving, "moving");
  Tile stat_scale = m.tile(op.stationary_scale, "stationary_scale");
  Tile mov_scale = m.tile(op.moving_scale, "moving_scale");
  Tile dst = m.tile(op.dst, "dst");
  const std::vector<float> partial = matmul_partials(dequantize_mx(stat, stat_scale), dequantize_mx(mov, mov_scale),
                                                     4 * stat.P, stat.F, mov.F);
  write_matmul_result(m, dst, partial, op.accumulate);
}

}  // namespace knit::sim
