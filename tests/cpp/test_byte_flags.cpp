// The simulator's two-level initialized / matmul-written flags (simulator/src/byte_flags.h)
// against a plain one-byte-per-flag array driven by the same random writes and checks.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "byte_flags.h"

using knit::sim::ByteFlags;

namespace {

bool naive_all(const std::vector<uint8_t>& f, int64_t at, int64_t len, uint8_t value) {
  for (int64_t i = at; i < at + len; ++i)
    if (f[static_cast<size_t>(i)] != value) return false;
  return true;
}

// Every flag and a spread of ranges (whole blocks, partial heads and tails, single bytes).
void require_same(const ByteFlags& flags, const std::vector<uint8_t>& naive, std::mt19937& rng) {
  const int64_t n = static_cast<int64_t>(naive.size());
  for (int64_t i = 0; i < n; ++i) REQUIRE(flags.get(i) == naive[static_cast<size_t>(i)]);
  // for_each_zero_run visits exactly the zero flags, in order, each once.
  std::vector<int64_t> zeros, naive_zeros;
  flags.for_each_zero_run([&](int64_t at, int64_t len) {
    for (int64_t i = at; i < at + len; ++i) zeros.push_back(i);
  });
  for (int64_t i = 0; i < n; ++i)
    if (naive[static_cast<size_t>(i)] == 0) naive_zeros.push_back(i);
  REQUIRE(zeros == naive_zeros);
  // first_set finds the first 1 (or -1), skipping uniform blocks of 0s.
  int64_t naive_first = -1;
  for (int64_t i = 0; i < n && naive_first < 0; ++i)
    if (naive[static_cast<size_t>(i)]) naive_first = i;
  REQUIRE(flags.first_set() == naive_first);
  for (int probe = 0; probe < 200; ++probe) {
    const int64_t at = static_cast<int64_t>(rng() % static_cast<uint32_t>(n));
    const int64_t len = 1 + static_cast<int64_t>(rng() % static_cast<uint32_t>(n - at));
    for (uint8_t value : {uint8_t{0}, uint8_t{1}})
      REQUIRE(flags.all(at, len, value) == naive_all(naive, at, len, value));
  }
}

}  // namespace

TEST_CASE("ByteFlags matches one byte per flag under random writes", "[byte_flags]") {
  // 1000 is not a multiple of the block size: the last block is short.
  for (int64_t n : {int64_t{1}, int64_t{63}, int64_t{64}, int64_t{200}, int64_t{1000}}) {
    std::mt19937 rng(static_cast<uint32_t>(n));
    ByteFlags flags;
    flags.reset(static_cast<size_t>(n));
    std::vector<uint8_t> naive(static_cast<size_t>(n), 0);
    REQUIRE(flags.size() == static_cast<size_t>(n));
    require_same(flags, naive, rng);
    for (int step = 0; step < 300; ++step) {
      const int64_t at = static_cast<int64_t>(rng() % static_cast<uint32_t>(n));
      // Mostly element-sized writes (the interpreter's), sometimes long runs (the native path's).
      const int64_t room = n - at;
      const int64_t len = rng() % 4 ? std::min<int64_t>(room, 1 + rng() % 4) : 1 + static_cast<int64_t>(rng() % room);
      const uint8_t value = static_cast<uint8_t>(rng() % 2);
      flags.set(at, len, value);
      std::fill(naive.begin() + at, naive.begin() + at + len, value);
      if (step % 50 == 0) require_same(flags, naive, rng);
    }
    require_same(flags, naive, rng);
  }
}

TEST_CASE("ByteFlags: element writes that fill a block make it uniform again", "[byte_flags]") {
  ByteFlags flags;
  flags.reset(256);
  // Write block 1 (bytes 64..127) four bytes at a time, as the interpreter does for fp32.
  for (int64_t at = 64; at < 128; at += 4) {
    REQUIRE_FALSE(flags.all(64, 64, 1));
    flags.set(at, 4, 1);
  }
  REQUIRE(flags.all(64, 64, 1));
  REQUIRE(flags.all(0, 64, 0));
  REQUIRE(flags.all(128, 128, 0));
  REQUIRE_FALSE(flags.all(60, 8, 1));
  // Clearing one byte in the middle of a uniform block is seen, and nothing else changes.
  flags.set(100, 1, 0);
  REQUIRE(flags.get(100) == 0);
  REQUIRE(flags.get(99) == 1);
  REQUIRE(flags.get(101) == 1);
  REQUIRE_FALSE(flags.all(64, 64, 1));
  REQUIRE(flags.all(64, 36, 1));
  REQUIRE(flags.all(101, 27, 1));
}

TEST_CASE("ByteFlags: a stale byte array under uniform blocks is never read", "[byte_flags]") {
  // Byte arrays of 1 MiB and more go back to a pool and return unzeroed: after one that held
  // ones, a fresh ByteFlags of the same size must still read all zeros.
  const int64_t n = int64_t{1} << 21;
  {
    ByteFlags old;
    old.reset(n);
    for (int64_t at = 0; at < n; at += 3) old.set(at, 1, 1);  // mixed blocks, bytes written
  }
  ByteFlags flags;
  flags.reset(n);
  REQUIRE(flags.all(0, n, 0));
  flags.set(10, 1, 1);  // a partial write materializes the block's zeros first
  for (int64_t i = 0; i < 64; ++i) REQUIRE(flags.get(i) == (i == 10 ? 1 : 0));
}
