// Reference semantics of the random-number instructions on the per-core generators of random.h
// (docs/architecture.md "Random numbers"). Lane p is partition p of the instruction's operand
// (counted from the view's first partition); every instruction draws one 32-bit word per element
// of its dst, row by row, element j of a row from the lane's state j mod (states per lane).
// These instructions run here on every backend (native/executor.cpp: their state is sequential).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "exec_state.h"

namespace knit::sim {

using namespace knit::ir;

CoreGenerators& ExecState::generators() {
  auto it = generators_.find(core());
  if (it == generators_.end()) {
    const int vector_states = nc_version(kernel().target) >= 4 ? 4 : 1;  // NeuronCore-v4: 4 XORWOW states per lane
    it = generators_.emplace(core(), CoreGenerators(vector_states)).first;
  }
  return it->second;
}

namespace {

// The generators `e` names (unknown: the instruction's default engine).
LaneGenerators& engine_generators(ExecState& m, Engine e, Engine fallback) {
  CoreGenerators& g = m.generators();
  return (e == Engine::unknown ? fallback : e) == Engine::gpsimd ? g.gpsimd : g.vector;
}

// One draw per element of a P x F tile, partition-major.
std::vector<uint32_t> draw(LaneGenerators& g, int64_t P, int64_t F) {
  std::vector<uint32_t> bits(static_cast<size_t>(P * F));
  for (int64_t p = 0; p < P; ++p) g.draw_row(static_cast<int>(p), F, &bits[static_cast<size_t>(p * F)]);
  return bits;
}

// The top 24 bits of a draw as a fraction in [0, 1): exact in fp32.
float unit_fraction(uint32_t bits) { return static_cast<float>(bits >> 8) * 0x1p-24f; }

}  // namespace

// dst[p, j] = the low 8, 16 or 32 bits of the draw.
void exec(ExecState& m, const Rng& op) {
  Tile dst = m.tile(op.dst, "dst");
  const std::vector<uint32_t> bits = draw(engine_generators(m, op.engine, Engine::vector), dst.P, dst.F);
  dst.write_all_bits(bits);
}

void exec(ExecState& m, const SetRngSeed& op) {
  Tile seed = m.tile(op.src_seeds, "src_seeds");
  m.generators().vector.seed(seed.read_bits(0));
}

void exec(ExecState& m, const RandSetState& op) {
  Tile src = m.tile(op.src_seeds, "src_seeds");
  const std::vector<uint32_t> words = src.read_all_bits();
  LaneGenerators& g = engine_generators(m, op.engine, Engine::gpsimd);
  for (int64_t p = 0; p < src.P; ++p) g.set_words(static_cast<int>(p), &words[static_cast<size_t>(p * src.F)]);
}

void exec(ExecState& m, const RandGetState& op) {
  Tile dst = m.tile(op.dst, "dst");
  LaneGenerators& g = engine_generators(m, op.engine, Engine::gpsimd);
  std::vector<uint32_t> words;
  for (int64_t p = 0; p < dst.P; ++p) {
    const std::vector<uint32_t> row = g.words(static_cast<int>(p));
    words.insert(words.end(), row.begin(), row.end());
  }
  dst.write_all_bits(words);
}

// v = min + (max - min) * (b >> 8) / (2^24 - 1), in double, rounded once to fp32 and kept inside
// [min, max] (both ends reachable), then written to dst (RNE; saturating for integers).
void exec(ExecState& m, const Rand2& op) {
  Tile dst = m.tile(op.dst, "dst");
  const std::vector<float> lo = m.column(op.min, dst.P, "min"), hi = m.column(op.max, dst.P, "max");
  for (int64_t p = 0; p < dst.P; ++p)
    if (!(lo[p] < hi[p]))
      m.fail("operand", "rand2 needs min < max; partition " + std::to_string(p) + " has min " + std::to_string(lo[p]) +
                            " and max " + std::to_string(hi[p]));
  const std::vector<uint32_t> bits = draw(m.generators().vector, dst.P, dst.F);
  std::vector<float> values(bits.size());
  for (int64_t p = 0; p < dst.P; ++p)
    for (int64_t j = 0; j < dst.F; ++j) {
      const double t = static_cast<double>(bits[dst.at(p, j)] >> 8) / 16777215.0;
      const auto v = static_cast<float>(static_cast<double>(lo[p]) + (static_cast<double>(hi[p]) - lo[p]) * t);
      values[dst.at(p, j)] = std::clamp(v, lo[p], hi[p]);
    }
  dst.write_all(values);
}

// Drops element (p, j) when u < prob[p], u = unit_fraction(draw), prob clamped to [0, 1] (NaN:
// 0); kept elements keep data's bits, dropped ones are all-zero bits (no rescaling).
void exec(ExecState& m, const Dropout& op) {
  Tile data = m.tile(op.data, "data");
  const std::vector<uint32_t> in = data.read_all_bits();
  std::vector<float> prob = m.column(op.prob, data.P, "prob");
  for (float& q : prob) q = q > 0.0f ? std::min(q, 1.0f) : 0.0f;
  const std::vector<uint32_t> bits = draw(m.generators().vector, data.P, data.F);
  std::vector<uint32_t> out(in.size());
  for (int64_t p = 0; p < data.P; ++p)
    for (int64_t j = 0; j < data.F; ++j) {
      const int64_t i = data.at(p, j);
      out[i] = unit_fraction(bits[i]) < prob[p] ? 0u : in[i];
    }
  Tile dst = m.tile(op.dst, "dst");
  dst.write_all_bits(out);
}

}  // namespace knit::sim
