// The simulator's pooled byte arrays (simulator/src/zeroed_bytes.h): which freed block a new
// array of the same size gets, and that it comes back zeroed when asked.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "zeroed_bytes.h"

using knit::sim::ZeroedBytes;

namespace {

// Large enough to be pooled (1 MiB and up), and a size no other test in this process uses, so
// that blocks freed by other tests cannot answer the resets below.
constexpr size_t kSize = (size_t{3} << 20) + 4096 * 7;

}  // namespace

TEST_CASE("a reset gets the block of its size freed last, zeroed when asked", "[zeroed_bytes]") {
  ZeroedBytes first, second;
  first.reset(kSize);
  second.reset(kSize);
  const uint8_t* older = first.data();
  const uint8_t* newer = second.data();
  REQUIRE(older != newer);
  std::memset(second.data(), 0xab, kSize);
  first.reset(0);   // freed first
  second.reset(0);  // freed last: the warmer block
  ZeroedBytes again;
  again.reset(kSize);
  CHECK(again.data() == newer);
  for (size_t i = 0; i < kSize; i += 4093) REQUIRE(again[i] == 0);
  ZeroedBytes next;
  next.reset(kSize, /*zero=*/false);
  CHECK(next.data() == older);
}

TEST_CASE("sparse blocks and data blocks are pooled apart", "[zeroed_bytes]") {
  const size_t size = kSize + 4096;
  ZeroedBytes sparse;
  sparse.reset(size, /*zero=*/false, ZeroedBytes::Use::sparse);
  const uint8_t* sparse_block = sparse.data();
  sparse.reset(0);
  ZeroedBytes data;
  data.reset(size, /*zero=*/false);
  CHECK(data.data() != sparse_block);  // a data array never gets a cold flag block
  ZeroedBytes flags;
  flags.reset(size, /*zero=*/false, ZeroedBytes::Use::sparse);
  CHECK(flags.data() == sparse_block);
}
