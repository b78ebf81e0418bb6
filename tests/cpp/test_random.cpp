// The random-number generator (simulator/src/random.h) against hand-computed values: Marsaglia's
// xorwow step on small states worked through by hand, the splitmix64 finalizer's published first
// output, the seeding layout and the round-robin over a lane's states; and the C++ DSL's isa::
// random-number calls end to end.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "knit/knit.h"
#include "random.h"
#include "test_util.h"

using knit::sim::LaneGenerators;
using knit::sim::seeded_state;
using knit::sim::splitmix64_mix;
using knit::sim::xorwow_next;
using knit::sim::XorwowState;

TEST_CASE("xorwow steps as Marsaglia's layout [x, y, z, w, v, d] says", "[random]") {
  // x = 1: t = 1 ^ (1 >> 2) = 1; v = (5 ^ (5 << 4)) ^ (1 ^ (1 << 1)) = (5 ^ 80) ^ 3 = 85 ^ 3 = 86;
  // d = 10 + 362437 = 362447; the draw is 86 + 362447 = 362533; the words shift down by one.
  XorwowState s{1, 2, 3, 4, 5, 10};
  CHECK(xorwow_next(s) == 362533u);
  CHECK(s == XorwowState{2, 3, 4, 5, 86, 362447});
  // Next: t = 2 ^ 0 = 2; v = (86 ^ 1376) ^ (2 ^ 4) = 1334 ^ 6 = 1328; d = 724884; draw 726212.
  CHECK(xorwow_next(s) == 726212u);
  CHECK(s == XorwowState{3, 4, 5, 86, 1328, 724884});
  // Wrap-around: d near 2^32 and the shifts dropping high bits.
  XorwowState w{0x80000000u, 0, 0, 0, 0xF0000000u, 0xFFFFFFFFu};
  // t = 0x80000000 ^ 0x20000000 = 0xA0000000; t << 1 = 0x40000000 (mod 2^32); t ^ (t << 1) = 0xE0000000;
  // v << 4 = 0 (mod 2^32); v = 0xF0000000 ^ 0xE0000000 = 0x10000000; d = 362436; draw 0x10000000 + 362436.
  CHECK(xorwow_next(w) == 0x10000000u + 362436u);
  CHECK(w[4] == 0x10000000u);
  CHECK(w[5] == 362436u);
}

TEST_CASE("splitmix64_mix is the splitmix64 finalizer", "[random]") {
  // splitmix64 seeded with 0 returns mix(0x9E3779B97F4A7C15) first: 0xE220A8397B1DCDAF
  // (Vigna's reference splitmix64.c).
  CHECK(splitmix64_mix(0x9E3779B97F4A7C15ull) == 0xE220A8397B1DCDAFull);
  CHECK(splitmix64_mix(0) == 0);
}

TEST_CASE("seeded_state hashes (seed, lane, k) into six words", "[random]") {
  const XorwowState s = seeded_state(0, 0, 0);
  // key 0: word i = high half of mix((i + 1) * golden); word 0 = 0xE220A839.
  CHECK(s[0] == 0xE220A839u);
  for (uint64_t i = 0; i < 6; ++i)
    CHECK(s[i] == static_cast<uint32_t>(splitmix64_mix((i + 1) * 0x9E3779B97F4A7C15ull) >> 32));
  CHECK(seeded_state(7, 3, 1) != seeded_state(7, 3, 2));
  CHECK(seeded_state(7, 3, 1) != seeded_state(7, 4, 1));
  CHECK(seeded_state(7, 3, 1) != seeded_state(8, 3, 1));
}

TEST_CASE("LaneGenerators draw round-robin over a lane's states and round-trip their words", "[random]") {
  LaneGenerators g(4, 0);
  g.seed(42);
  std::vector<XorwowState> by_hand;
  for (int k = 0; k < 4; ++k) by_hand.push_back(seeded_state(42, 5, k));
  const std::vector<uint32_t> saved = g.words(5);
  REQUIRE(saved.size() == 24);
  CHECK(saved[6] == by_hand[1][0]);
  std::vector<uint32_t> out(10);
  g.draw_row(5, 10, out.data());
  for (int j = 0; j < 10; ++j) CHECK(out[j] == xorwow_next(by_hand[j % 4]));
  g.set_words(5, saved.data());
  std::vector<uint32_t> again(10);
  g.draw_row(5, 10, again.data());
  CHECK(again == out);
  // GpSimd's single state per lane is the hash's k = 4 entry.
  LaneGenerators pool(1, 4);
  XorwowState s = seeded_state(0, 9, 4);
  uint32_t first = 0;
  pool.draw_row(9, 1, &first);
  CHECK(first == xorwow_next(s));
}

namespace {

using namespace knit;

// seed -> set_rng_seed; rng into uint32 [4, 10]; rand2 in [2, 3]; dropout of ones at prob 1; the
// Vector Engine state after all of it.
std::vector<nl::tensor> random_calls(nl::tensor seed_in) {
  auto seed = nl::ndarray({1, 1}, nl::uint32, nl::sbuf);
  isa::dma_copy(seed, seed_in);
  isa::set_rng_seed(seed);
  auto bits = nl::ndarray({4, 10}, nl::uint32, nl::sbuf);
  isa::rng(bits);
  auto uniform = nl::ndarray({4, 10}, nl::float32, nl::sbuf);
  isa::rand2(uniform, 2.0, 3.0);
  auto ones = nl::ndarray({4, 10}, nl::float32, nl::sbuf);
  isa::memset(ones, 1.0);
  auto kept = nl::ndarray({4, 10}, nl::float32, nl::sbuf);
  isa::dropout(kept, ones, 1.0);
  auto state = nl::ndarray({4, 24}, nl::uint32, nl::sbuf);
  isa::rand_get_state(state, isa::vector_engine);
  isa::rand_set_state(state, isa::vector_engine);
  std::vector<nl::tensor> outs;
  for (const nl::tensor& t : {bits, uniform, kept, state}) {
    auto out = nl::ndarray({t.shape(0), t.shape(1)}, t.dtype(), nl::shared_hbm);
    isa::dma_copy(out, t);
    outs.push_back(out);
  }
  return outs;
}

std::vector<uint32_t> words_of(const sim::HostTensor& h) {
  std::vector<uint32_t> w(h.bytes.size() / 4);
  std::memcpy(w.data(), h.bytes.data(), h.bytes.size());
  return w;
}

}  // namespace

TEST_CASE("isa:: random-number calls draw from the documented generator", "[random]") {
  const ir::Kernel k = trace("random_calls", random_calls, {arg({1, 1}, nl::uint32, "seed")}, ir::Target::trn3);
  sim::HostTensor seed = sim::HostTensor::zeros(ir::DType::uint32, {1, 1});
  const uint32_t s = 0xDEADBEEFu;  // beyond fp32's exact integers: the seed moves as bits
  std::memcpy(seed.bytes.data(), &s, 4);
  const std::vector<sim::HostTensor> out = run(k, {seed});
  LaneGenerators model(4, 0);
  model.seed(s);
  std::vector<uint32_t> want(40), uniform_bits(40), dropout_bits(40);
  for (int p = 0; p < 4; ++p) model.draw_row(p, 10, &want[p * 10]);
  for (int p = 0; p < 4; ++p) model.draw_row(p, 10, &uniform_bits[p * 10]);
  for (int p = 0; p < 4; ++p) model.draw_row(p, 10, &dropout_bits[p * 10]);
  CHECK(words_of(out[0]) == want);
  const std::vector<float> u = out[1].to_floats();
  for (size_t i = 0; i < u.size(); ++i) {
    INFO(i);
    CHECK(u[i] == static_cast<float>(2.0 + (uniform_bits[i] >> 8) / 16777215.0));
  }
  CHECK(out[2].to_floats() == std::vector<float>(40, 0.0f));
  std::vector<uint32_t> state;
  for (int p = 0; p < 4; ++p) {
    const std::vector<uint32_t> w = model.words(p);
    state.insert(state.end(), w.begin(), w.end());
  }
  CHECK(words_of(out[3]) == state);
}
