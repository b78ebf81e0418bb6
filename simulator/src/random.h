// The random-number generators of the Vector Engine and GpSimd: per-lane xorwow states, their
// seeding hash and the round-robin over a lane's states. NKI names the algorithm (XORWOW) but not
// its constants, seeding or interleaving; Knit's choices are documented in docs/architecture.md
// "Random numbers" (nki-0.6-additions.md §1.6 DESIGN CHOICE).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "knit/ir/ir.h"

namespace knit::sim {

using XorwowState = std::array<uint32_t, 6>;  // [x, y, z, w, v, d]

// Advances `s` one step and returns its 32-bit draw.
uint32_t xorwow_next(XorwowState& s);
// splitmix64's output function (Steele, Lea and Flood 2014): a bijective 64-bit mix.
uint64_t splitmix64_mix(uint64_t z);
// The state seed `seed` gives state `k` of lane `lane`: word i is the high half of
// splitmix64_mix(key + (i + 1) * 0x9E3779B97F4A7C15), key = seed << 32 | lane << 8 | k.
XorwowState seeded_state(uint32_t seed, int lane, int k);

// One engine's generators: `per_lane` states for each of the 128 lanes.
class LaneGenerators {
 public:
  static constexpr int kLanes = 128;
  LaneGenerators(int per_lane, int first_k);
  int per_lane() const { return per_lane_; }
  // Every lane's states from `seed` (seeded_state with k = first_k, first_k + 1, ...).
  void seed(uint32_t seed);
  // Draws `count` words for lane p, element j from state j mod per_lane.
  void draw_row(int lane, int64_t count, uint32_t* out);
  // Lane p's states as 6 * per_lane words (state 0's six words first), and back.
  std::vector<uint32_t> words(int lane) const;
  void set_words(int lane, const uint32_t* words);

 private:
  int per_lane_, first_k_;
  std::vector<XorwowState> states_;  // lane-major
};

// The generators of one core: the Vector Engine's (4 states per lane on trn3, else 1) and GpSimd's.
struct CoreGenerators {
  explicit CoreGenerators(int vector_states) : vector(vector_states, 0), gpsimd(1, 4) {}
  LaneGenerators vector, gpsimd;
};

}  // namespace knit::sim
