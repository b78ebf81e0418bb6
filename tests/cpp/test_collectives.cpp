// knit::cc (cc.h): collectives from C++ kernels traced on several ranks, run on the reference
// interpreter and checked against hand-computed values.
#include <algorithm>
#include <cstring>
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

TEST_CASE("cc: the ring-position register picks ring[(pos - k) mod N] for a shuffled ring", "[collectives]") {
  const std::vector<int64_t> ring{3, 1, 0, 2};
  auto kernel = [&](nl::tensor table) {
    auto out = nl::ndarray({4, 2}, table.dtype(), nl::shared_hbm, "out");
    for (int k = 0; k < 4; ++k) {
      nl::reg who = cc::collective_permute_implicit_current_processing_rank_id(k, {{ring}});
      isa::dma_copy(out.ap({{2, 1}, {1, 2}}, 2 * k), table.ap({{2, 1}, {1, 2}}, 0, {.scalar_offset = who}));
    }
    return out;
  };
  ir::Kernel k = cc::trace_ranks("ring_position", kernel, {arg({4, 2}, nl::float32, "table")}, 4);
  const std::vector<float> table{0, 0.5f, 1, 1.5f, 2, 2.5f, 3, 3.5f};  // row r holds r, r + 0.5
  std::vector<HostTensor> args(4, host(DT::float32, {4, 2}, table));
  auto out = run(k, args);
  for (int64_t r = 0; r < 4; ++r) {
    const int64_t pos = std::find(ring.begin(), ring.end(), r) - ring.begin();
    for (int64_t step = 0; step < 4; ++step)
      CHECK(out[r].get(2 * step) == static_cast<float>(ring[(pos - step + 4) % 4]));
  }
}

TEST_CASE("cc: all_to_all_v places each sender's chunk in its slot and counts it", "[collectives]") {
  auto kernel = [](nl::tensor src, nl::tensor meta) {
    auto buf = nl::ndarray(src.shape(), src.dtype(), nl::shared_hbm, "buf");
    auto m = nl::ndarray(meta.shape(), meta.dtype(), nl::shared_hbm, "meta");
    auto dst = nl::ndarray({4}, src.dtype(), nl::shared_hbm, "dst");
    isa::dma_copy(buf, src);
    isa::dma_copy(m, meta);
    isa::dma_copy(dst, src.ap({{0, 4}}));  // every slot starts as src[0]
    cc::all_to_all_v(buf, dst, {{{0, 1}}}, m);
    return std::make_tuple(output_copy(dst), output_copy(m));
  };
  ir::Kernel k = cc::trace_ranks("a2av", kernel, {arg({4}, nl::float32, "src"), arg({3, 2}, nl::uint32, "meta")}, 2);
  // rank 0 sends 1 element (at 0) to rank 0 and 2 (at 1) to rank 1; rank 1 sends 2 (at 2) to 0, none to 1
  auto meta = [](std::vector<uint32_t> v) {
    HostTensor h = HostTensor::zeros(DT::uint32, {3, 2});
    std::memcpy(h.bytes.data(), v.data(), v.size() * 4);
    return h;
  };
  std::vector<HostTensor> args{host(DT::float32, {4}, {10, 11, 12, 13}), meta({1, 2, 0, 1, 0, 0}),
                               host(DT::float32, {4}, {20, 21, 22, 23}), meta({2, 0, 2, 0, 0, 0})};
  auto out = run(k, args);
  const std::vector<float> dst0{10, 10, 22, 23}, dst1{11, 12, 20, 20};  // slots of 2: sender 0, sender 1
  for (int64_t i = 0; i < 4; ++i) {
    CHECK(out[0].get(i) == dst0[i]);
    CHECK(out[2].get(i) == dst1[i]);
  }
  CHECK(knit::test::raw_u32(out[1], 4) == 1);  // rank 0's receive counts: 1 from 0, 2 from 1
  CHECK(knit::test::raw_u32(out[1], 5) == 2);
  CHECK(knit::test::raw_u32(out[3], 4) == 2);  // rank 1's: 2 from 0, 0 from 1
  CHECK(knit::test::raw_u32(out[3], 5) == 0);
}
