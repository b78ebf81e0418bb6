// The JIT's compile decision (simulator/src/native/tiering.h): the break-even work, hand-computed
// from the documented prices, and the per-process ledger of interpreted work.
#include <catch2/catch.hpp>

#include <vector>

#include "native/tiering.h"

using knit::codegen::Specializer;
using knit::codegen::SpecializeRequest;
using knit::sim::native::break_even_work;

TEST_CASE("break-even work prices building, loading and nothing to do", "[tiering]") {
  const std::vector<SpecializeRequest> requests = {
      {"knit_map_body", "a"}, {"knit_map_body", "b"}, {"knit_matmul_body", "c"}, {"knit_reduce_body", "d"}};
  // Everything compiled already: no cost, compile at once.
  REQUIRE(break_even_work(requests, Specializer::Pending{}, 0, 2) == 0);
  // Three modules in the disk cache: 3 x 2 ms / 11 ns = 545454.5 elements.
  REQUIRE(break_even_work(requests, Specializer::Pending{{}, 3}, 0, 2) == 545454);
  // Two row bodies on 2 threads: (10 ms + 2 x 9 ms / 2) / 11 ns = 1727272.7.
  REQUIRE(break_even_work(requests, Specializer::Pending{{0, 1}, 0}, 0, 2) == 1727272);
  // The same on one thread: (10 + 18) ms / 11 ns.
  REQUIRE(break_even_work(requests, Specializer::Pending{{0, 1}, 0}, 0, 1) == 2545454);
  // A matmul body and a row body, plus one dynamic body priced as a row body, on 4 threads
  // (3 bodies: 3 in parallel): (10 + (40 + 9 + 9) / 3) ms / 11 ns = 2666666.7.
  REQUIRE(break_even_work(requests, Specializer::Pending{{2, 3}, 0}, 1, 4) == 2666666);
  // Loading and building add up: 2 ms + (10 + 9) ms on 2 threads (one body: no parallelism).
  REQUIRE(break_even_work(requests, Specializer::Pending{{3}, 1}, 0, 2) == 1909090);
}

TEST_CASE("the ledger adds up interpreted work per set of shapes", "[tiering]") {
  using namespace knit::sim::native;
  const uint64_t a = 0x5eed0001, b = 0x5eed0002;  // keys no kernel of this test binary makes
  REQUIRE(interpreted_work(a) == 0);
  add_interpreted_work(a, 1000);
  add_interpreted_work(a, 234);
  add_interpreted_work(b, 7);
  REQUIRE(interpreted_work(a) == 1234);
  REQUIRE(interpreted_work(b) == 7);
}
