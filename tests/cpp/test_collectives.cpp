// knit::cc (cc.h): collectives from C++ kernels traced on several ranks, run on the reference
// interpreter and checked against hand-computed values.
#include <vector>

#include <knit/cc.h>
#include <catch2/catch.hpp>

#include "test_util.h"

using namespace knit;
using knit::test::host;
using knit::test::output_copy;
using knit::test::sbuf_copy;
using DT = ir::DType;

namespace {

// x (HBM) -> an SBUF tile -> all_reduce / all_gather within the group -> outputs.
std::tuple<nl::tensor, nl::tensor> reduce_and_gather(nl::tensor x) {
  auto tile = sbuf_copy(x);
  auto summed = nl::ndarray(x.shape(), x.dtype());
  auto gathered = nl::ndarray({x.shape()[0], 2 * x.shape()[1]}, x.dtype());
  cc::all_reduce({tile}, {summed}, {{{0, 1}, {2, 3}}}, nl::add);
  cc::all_gather({tile}, {gathered}, {{{0, 1}, {2, 3}}}, 1);
  return {output_copy(summed), output_copy(gathered)};
}

}  // namespace

TEST_CASE("cc: all_reduce and all_gather over two rank lists of four ranks", "[collectives]") {
  ir::Kernel k = cc::trace_ranks("reduce_and_gather", reduce_and_gather, {arg({2, 2}, nl::float32, "x")}, 4);
  std::vector<HostTensor> args;
  for (int r = 0; r < 4; ++r) args.push_back(host(DT::float32, {2, 2}, {1.0f * r, 10.0f * r, 100.0f * r, 0.5f}));
  auto out = run(k, args);
  REQUIRE(out.size() == 8);  // (summed, gathered) per rank, rank after rank
  for (int r = 0; r < 4; ++r) {
    const int first = r < 2 ? 0 : 2;  // its list: {0, 1} or {2, 3}
    const HostTensor& summed = out[2 * r];
    const HostTensor& gathered = out[2 * r + 1];
    const float s = 2.0f * first + 1;  // first + (first + 1)
    CHECK(summed.get(0) == s);
    CHECK(summed.get(1) == 10 * s);
    CHECK(summed.get(2) == 100 * s);
    CHECK(summed.get(3) == 1.0f);
    // gathered row 0: [x_first[0, :], x_second[0, :]]
    CHECK(gathered.get(0) == 1.0f * first);
    CHECK(gathered.get(1) == 10.0f * first);
    CHECK(gathered.get(2) == 1.0f * (first + 1));
    CHECK(gathered.get(3) == 10.0f * (first + 1));
  }
}

TEST_CASE("cc: rank_id offsets a view; a ring step moves each rank's row on", "[collectives]") {
  auto kernel = [](nl::tensor table) {
    auto mine = nl::ndarray({1, 3}, table.dtype(), nl::shared_hbm, "mine");
    isa::dma_copy(mine, table.ap({{3, 1}, {1, 3}}, 0, {.scalar_offset = cc::rank_id()}));
    auto next = nl::ndarray({1, 3}, table.dtype(), nl::shared_hbm, "next");
    cc::collective_permute_implicit(mine, next, {{{0, 1, 2}}});
    return output_copy(next);
  };
  ir::Kernel k = cc::trace_ranks("ring", kernel, {arg({3, 3}, nl::float32, "table")}, 3);
  const std::vector<float> table{0, 1, 2, 10, 11, 12, 20, 21, 22};
  auto out = run(
      k, {host(DT::float32, {3, 3}, table), host(DT::float32, {3, 3}, table), host(DT::float32, {3, 3}, table)});
  for (int r = 0; r < 3; ++r) {
    const int from = (r + 2) % 3;  // its predecessor in the ring
    for (int j = 0; j < 3; ++j) CHECK(out[r].get(j) == table[3 * from + j]);
  }
}

TEST_CASE("cc: a rank that skips a collective deadlocks with every rank named", "[collectives]") {
  auto kernel = [](nl::tensor x) {
    auto tile = sbuf_copy(x);
    auto summed = nl::ndarray(x.shape(), x.dtype());
    isa::tensor_copy(summed, tile);
    if (cc::detail::tracing().rank == 1) cc::all_reduce({tile}, {summed}, {{{0, 1}}}, nl::add);
    return output_copy(summed);
  };
  ir::Kernel k = cc::trace_ranks("skip", kernel, {arg({1, 2}, nl::float32)}, 2);
  std::vector<HostTensor> args{host(DT::float32, {1, 2}, {1, 2}), host(DT::float32, {1, 2}, {3, 4})};
  CHECK_THROWS_WITH(run(k, args),
                    Catch::Contains("rank 0: finished") && Catch::Contains("rank 1: waits at collective"));
}
