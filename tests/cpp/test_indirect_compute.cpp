// NC-v4 compute indirection (.indirect() views) in the text IR: the `<cols[...]:index>` form
// prints and parses back, the verifier's rules, and a gather/scatter on the reference
// interpreter against offsets worked out here by hand.
#include <algorithm>

#include <catch2/catch.hpp>

#include "knit/ir/text.h"
#include "knit/ir/verifier.h"
#include "test_util.h"

using namespace knit;
using DT = ir::DType;

namespace {

// data (32, 8) and a uint16 index (32, 1); a gather of 4 columns of data into out through it.
std::string kernel(const std::string& target, const std::string& body) {
  return "kernel \"k\" target=" + target +
         " {\n"
         "  param %0 \"data\" hbm float32[32, 8]\n"
         "  param %1 \"index\" hbm uint16[32, 1]\n"
         "  tensor %2 \"d\" sbuf float32[32, 8]\n"
         "  tensor %3 \"i\" sbuf uint16[32, 1]\n"
         "  tensor %4 \"o\" sbuf float32[32, 4]\n"
         "  tensor %5 \"out\" shared_hbm float32[32, 8]\n"
         "  dma_copy dst=%2@0[[8,32],[1,8]] src=%0@0[[8,32],[1,8]]\n"
         "  dma_copy dst=%3@0[[1,32],[1,1]] src=%1@0[[1,32],[1,1]]\n" +
         body +
         "  dma_copy dst=%5@0[[8,32],[1,8]] src=%2@0[[8,32],[1,8]]\n"
         "  return %5\n}\n";
}

const std::string kGather =
    "  tensor_copy dst=%4@0[[4,32],[1,4]] src=%2@0[[8,32],[1,4]]<cols[[1,8]]:%3@0[[1,32],[1,1]]>\n";
// Scatters o (after a memset to 7) into columns of d: d's columns at the indexed offsets become 7.
const std::string kScatter =
    "  memset dst=%4@0[[4,32],[1,4]] value=7\n"
    "  tensor_copy dst=%2@0[[8,32],[1,4]]<cols[[1,8]]:%3@0[[1,32],[1,1]]> src=%4@0[[4,32],[1,4]]\n";

}  // namespace

TEST_CASE(".indirect() views print and parse back", "[indirect]") {
  const ir::Kernel k = ir::parse(kernel("trn3", kGather));
  ir::verify(k);
  const std::string text = ir::print(k);
  CHECK_THAT(text, Catch::Contains("<cols[[1,8]]:%3@0[[1,32],[1,1]]>"));
  CHECK(ir::parse(text) == k);
  const ir::View& src = std::get<ir::TensorCopy>(k.body[2].op).src;
  CHECK(src.indexes_columns());
  CHECK_FALSE(src.indexes_rows());
  CHECK(src.shape() == std::vector<int64_t>{32, 4});
  CHECK_THROWS_WITH(
      ir::parse(
          kernel("trn3", "  tensor_copy dst=%4@0[[4,32],[1,4]] src=%2@0[[8,32],[1,4]]<cols[]:%3@0[[1,32],[1,1]]>\n")),
      Catch::Contains("non-empty gather pattern"));
}

TEST_CASE(".indirect() views: verifier rules", "[indirect]") {
  auto verify = [](const std::string& target, const std::string& body) { ir::verify(ir::parse(kernel(target, body))); };
  CHECK_THROWS_WITH(verify("trn2", kGather), Catch::Contains("needs trn3"));
  CHECK_THROWS_WITH(verify("trn3", "  memset dst=%2@0[[8,32],[1,4]]<cols[[1,8]]:%3@0[[1,32],[1,1]]> value=1\n"),
                    Catch::Contains("does not accept"));
  CHECK_THROWS_WITH(
      verify("trn3", "  tensor_copy dst=%4@0[[4,32],[1,4]] src=%2@0[[8,32],[1,4]]<cols[[1,9]]:%3@0[[1,32],[1,1]]>\n"),
      Catch::Contains("reads or writes outside"));  // the gather pattern leaves the partition
  CHECK_THROWS_WITH(
      verify("trn3", "  tensor_copy dst=%4@0[[4,16],[1,4]] src=%2@0[[8,16],[1,4]]<cols[[1,8]]:%3@0[[1,32],[1,1]]>\n"),
      Catch::Contains("index tile has 32 partitions but the indirected view has 16"));
  CHECK_THROWS_WITH(
      verify("trn3", "  tensor_copy dst=%4@0[[4,32],[1,4]] src=%2@0[[8,32],[1,4]]<cols[[1,8]]:%2@0[[8,32],[1,1]]>\n"),
      Catch::Contains("use uint16, uint32 or int32"));
}

TEST_CASE(".indirect() gather and scatter on the reference interpreter", "[indirect]") {
  std::vector<float> data(32 * 8);
  for (int p = 0; p < 32; ++p)
    for (int j = 0; j < 8; ++j) data[p * 8 + j] = static_cast<float>(10 * p + j);
  // Group 0 (partitions 0-15) reads offsets 6, 1, 2, 3 from index rows 0-3; group 1 reads 2, 5,
  // 7, 0 from rows 16-19 (G = 16, one index column).
  std::vector<float> index(32, 0.0f);
  const int64_t g0[] = {6, 1, 2, 3}, g1[] = {2, 5, 7, 0};
  for (int i = 0; i < 4; ++i) index[i] = static_cast<float>(g0[i]), index[16 + i] = static_cast<float>(g1[i]);
  auto args = [&] {
    return std::vector<sim::HostTensor>{test::host(DT::float32, {32, 8}, data), test::host(DT::uint16, {32, 1}, index)};
  };

  std::string gather = kernel("trn3", kGather);
  gather.replace(gather.find("src=%2@0[[8,32],[1,8]]\n  return"), 22, "src=%4@0[[4,32],[1,4]]");
  gather.replace(gather.find("dst=%5@0[[8,32],[1,8]]"), 22, "dst=%5@0[[4,32],[1,4]]");
  auto a = args();
  const std::vector<float> got = sim::interpret(ir::parse(gather), a).outputs[0].to_floats();
  for (int p = 0; p < 32; ++p)
    for (int i = 0; i < 4; ++i) CHECK(got[p * 4 + i] == data[p * 8 + (p < 16 ? g0[i] : g1[i])]);

  auto b = args();
  const std::vector<float> scattered = sim::interpret(ir::parse(kernel("trn3", kScatter)), b).outputs[0].to_floats();
  for (int p = 0; p < 32; ++p)
    for (int j = 0; j < 8; ++j) {
      const int64_t* offs = p < 16 ? g0 : g1;
      const bool hit = std::find(offs, offs + 4, j) != offs + 4;
      CHECK(scattered[p * 8 + j] == (hit ? 7.0f : data[p * 8 + j]));
    }
}

namespace {

// The C++ DSL's tensor::indirect: the worked example's gather (offsets 6, 1, 2, 3 for partitions
// 0-15, 2, 5, 7, 0 for 16-31) into a (32, 4) tile.
nl::tensor dsl_gather(nl::tensor data, nl::tensor index) {
  auto d = nl::ndarray({32, 8}, nl::float32, nl::sbuf);
  auto i = nl::ndarray({32, 1}, nl::uint16, nl::sbuf);
  isa::dma_copy(d, data);
  isa::dma_copy(i, index);
  auto o = nl::ndarray({32, 4}, nl::float32, nl::sbuf);
  const nl::tensor v = d.indirect(i, 4);
  CHECK(v.is_indirect());
  CHECK(v.shape() == std::vector<int64_t>{32, 4});
  isa::tensor_copy(o, v, isa::engine::vector);
  auto out = nl::ndarray({32, 4}, nl::float32, nl::shared_hbm);
  isa::dma_copy(out, o);
  return out;
}

}  // namespace

TEST_CASE("C++ DSL: tensor::indirect gathers, and needs trn3", "[indirect]") {
  const std::vector<ArgSpec> args = {arg({32, 8}, nl::float32, "data"), arg({32, 1}, nl::uint16, "index")};
  const ir::Kernel k = trace("dsl_gather", dsl_gather, args, ir::Target::trn3);
  std::vector<float> data(32 * 8), index(32, 0.0f);
  for (int p = 0; p < 32; ++p)
    for (int j = 0; j < 8; ++j) data[p * 8 + j] = static_cast<float>(10 * p + j);
  const float g0[] = {6, 1, 2, 3}, g1[] = {2, 5, 7, 0};
  for (int i = 0; i < 4; ++i) index[i] = g0[i], index[16 + i] = g1[i];
  std::vector<sim::HostTensor> a = {test::host(DT::float32, {32, 8}, data), test::host(DT::uint16, {32, 1}, index)};
  const std::vector<float> got = sim::interpret(k, a).outputs[0].to_floats();
  for (int p = 0; p < 32; ++p)
    for (int i = 0; i < 4; ++i) CHECK(got[p * 4 + i] == data[p * 8 + static_cast<int>(p < 16 ? g0[i] : g1[i])]);
  CHECK_THROWS_WITH(trace("dsl_gather", dsl_gather, args, ir::Target::trn2), Catch::Contains("needs trn3"));
}
