#include "random.h"

namespace knit::sim {

uint32_t xorwow_next(XorwowState& s) {
  const uint32_t t = s[0] ^ (s[0] >> 2);
  s[0] = s[1];
  s[1] = s[2];
  s[2] = s[3];
  s[3] = s[4];
  s[4] = (s[4] ^ (s[4] << 4)) ^ (t ^ (t << 1));
  s[5] += 362437u;
  return s[4] + s[5];
}

uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

XorwowState seeded_state(uint32_t seed, int lane, int k) {
  const uint64_t key = uint64_t{seed} << 32 | uint64_t(lane) << 8 | uint64_t(k);
  XorwowState s{};
  for (uint64_t i = 0; i < s.size(); ++i)
    s[i] = static_cast<uint32_t>(splitmix64_mix(key + (i + 1) * 0x9E3779B97F4A7C15ull) >> 32);
  return s;
}

LaneGenerators::LaneGenerators(int per_lane, int first_k)
    : per_lane_(per_lane), first_k_(first_k), states_(static_cast<size_t>(kLanes * per_lane)) {
  seed(0);
}

void LaneGenerators::seed(uint32_t seed) {
  for (int p = 0; p < kLanes; ++p)
    for (int k = 0; k < per_lane_; ++k) states_[p * per_lane_ + k] = seeded_state(seed, p, first_k_ + k);
}

void LaneGenerators::draw_row(int lane, int64_t count, uint32_t* out) {
  XorwowState* s = &states_[static_cast<size_t>(lane * per_lane_)];
  for (int64_t j = 0; j < count; ++j) out[j] = xorwow_next(s[j % per_lane_]);
}

std::vector<uint32_t> LaneGenerators::words(int lane) const {
  std::vector<uint32_t> w;
  for (int k = 0; k < per_lane_; ++k) {
    const XorwowState& s = states_[static_cast<size_t>(lane * per_lane_ + k)];
    w.insert(w.end(), s.begin(), s.end());
  }
  return w;
}

void LaneGenerators::set_words(int lane, const uint32_t* words) {
  for (int k = 0; k < per_lane_; ++k)
    for (int i = 0; i < 6; ++i) states_[static_cast<size_t>(lane * per_lane_ + k)][i] = words[6 * k + i];
}

}  // namespace knit::sim
