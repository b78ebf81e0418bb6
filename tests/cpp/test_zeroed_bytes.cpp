// The simulator's pooled byte arrays (simulator/src/zeroed_bytes.h): which freed block a new
// array of the same size gets, and that it comes back zeroed when asked.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

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

TEST_CASE("large data blocks are 2 MiB-aligned mappings, zero when fresh, back to the pool when shared",
          "[zeroed_bytes]") {
  // Sizes no other test uses: a fresh mapping each (huge_pages_note in zeroed_bytes.cpp).
  for (const size_t size : {(size_t{2} << 20) + 12345, (size_t{5} << 20) + 1}) {
    ZeroedBytes block;
    block.reset(size);
    REQUIRE(reinterpret_cast<uintptr_t>(block.data()) % (size_t{2} << 20) == 0);
    for (size_t i = 0; i < size; i += 4093) REQUIRE(block[i] == 0);
    REQUIRE(block[size - 1] == 0);
    std::memset(block.data(), 0x5a, size);  // every byte of the mapping is writable
    const uint8_t* where = block.data();
    {
      std::shared_ptr<uint8_t> owner = block.share();  // an output handed to the caller
      REQUIRE(owner.get() == where);
      REQUIRE(block.size() == 0);
    }
    ZeroedBytes again;  // the shared block came back to the pool, and comes back zeroed
    again.reset(size);
    CHECK(again.data() == where);
    for (size_t i = 0; i < size; i += 4093) REQUIRE(again[i] == 0);
  }
  // Larger than the pool holds: unmapped at once when freed, and a new one is zero too.
  const size_t huge = (size_t{513} << 20) + 3;
  ZeroedBytes big;
  big.reset(huge);
  big[huge - 1] = 7;
  big.reset(0);
  big.reset(huge);
  REQUIRE(big[huge - 1] == 0);
}
