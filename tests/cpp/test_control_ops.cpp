// Registers, loop / while / if blocks, dynamic view offsets, indirect views and dma_compute, run
// on the reference interpreter from IR text. Expected values are computed here with plain loops.
#include <algorithm>
#include <numeric>

#include <catch2/catch.hpp>

#include "knit/ir/text.h"
#include "knit/ir/verifier.h"
#include "test_util.h"

using namespace knit;
using DT = ir::DType;
using test::ints;
using test::ints_of;

namespace {

std::vector<sim::HostTensor> run(const std::string& text, std::vector<sim::HostTensor> args,
                                 sim::InterpretOptions options = {}) {
  const ir::Kernel k = ir::parse(text, "control.ir");
  return sim::interpret(k, args, options).outputs;
}

// Runs `text` and expects a knit::Error with `rule` whose message contains `detail`.
void expect_error(const std::string& text, std::vector<sim::HostTensor> args, const std::string& rule,
                  const std::string& detail, sim::InterpretOptions options = {}) {
  try {
    run(text, std::move(args), options);
  } catch (const knit::Error& e) {
    INFO(e.what());
    CHECK(e.rule() == rule);
    CHECK_THAT(e.message(), Catch::Contains(detail));
    return;
  }
  FAIL("expected a knit::Error with rule " << rule);
}

// A one-element int32 output that each test's body fills through register_store.
const std::string kHead =
    "kernel \"k\" target=trn2 {\n"
    "  tensor %0 \"out\" shared_hbm int32[1, 1]\n";

}  // namespace

TEST_CASE("register arithmetic is 32-bit with floor division", "[control]") {
  struct Case {
    const char* op;
    int32_t a, b, want;
  };
  const Case cases[] = {
      {"add", 2147483647, 1, -2147483647 - 1},  // wraps
      {"subtract", -5, 7, -12},
      {"multiply", 65536, 65536, 0},  // 2^32 wraps to 0
      {"divide", -7, 2, -4},          // floor, as Python's //
      {"divide", 7, -2, -4},
      {"mod", -7, 3, 2},  // sign of the divisor, as Python's %
      {"mod", 7, -3, -2},
      {"maximum", -3, 2, 2},
      {"minimum", -3, 2, -3},
      {"less", 1, 2, 1},
      {"greater_equal", 1, 2, 0},
      {"equal", 4, 4, 1},
      {"bitwise_xor", 6, 3, 5},
      {"left_shift", 1, 33, 2},    // shift count mod 32
      {"right_shift", -8, 1, -4},  // arithmetic
      {"logical_and", 3, 0, 0},
  };
  for (const Case& c : cases) {
    INFO(c.op << "(" << c.a << ", " << c.b << ")");
    const std::string text = kHead + "  register_move dst=r0 src=" + std::to_string(c.a) + "\n" +
                             "  register_alu dst=r1 a=r0 op=" + c.op + " b=" + std::to_string(c.b) + "\n" +
                             "  register_store dst=%0@0[[1,1],[1,1]] src=r1\n  return %0\n}\n";
    CHECK(ints_of(run(text, {})[0])[0] == c.want);
  }
  expect_error(kHead +
                   "  register_move dst=r0 src=1\n  register_alu dst=r1 a=r0 op=divide b=0\n"
                   "  register_store dst=%0@0[[1,1],[1,1]] src=r1\n  return %0\n}\n",
               {}, "register-divide-by-zero", "division by zero");
}

TEST_CASE("nested loops, while and if/else run with concrete register values", "[control]") {
  // out = sum over i < 5, j < i of (i * 10 + j), odd i only, plus a while countdown from 3.
  const std::string text = kHead +
                           "  register_move dst=r0 src=0\n"
                           "  loop iv=r1 start=0 stop=5\n"
                           "    register_alu dst=r5 a=r1 op=mod b=2\n"
                           "    if cond=r5\n"
                           "      loop iv=r2 start=0 stop=r1\n"
                           "        register_alu dst=r3 a=r1 op=multiply b=10\n"
                           "        register_alu dst=r3 a=r3 op=add b=r2\n"
                           "        register_alu dst=r0 a=r0 op=add b=r3\n"
                           "      end\n"
                           "    else\n"
                           "      register_alu dst=r0 a=r0 op=add b=1000\n"
                           "    end\n"
                           "  end\n"
                           "  register_move dst=r6 src=3\n"
                           "  while cond=r6\n"
                           "    register_alu dst=r0 a=r0 op=add b=r6\n"
                           "    register_alu dst=r6 a=r6 op=subtract b=1\n"
                           "  end\n"
                           "  register_store dst=%0@0[[1,1],[1,1]] src=r0\n  return %0\n}\n";
  int32_t want = 0;
  for (int i = 0; i < 5; ++i) {
    if (i % 2) {
      for (int j = 0; j < i; ++j) want += i * 10 + j;
    } else {
      want += 1000;
    }
  }
  want += 3 + 2 + 1;
  CHECK(ints_of(run(text, {})[0])[0] == want);
}

TEST_CASE("a zero-trip loop skips its body and stepped loops stop at the bound", "[control]") {
  const std::string text = kHead +
                           "  register_move dst=r0 src=0\n"
                           "  loop iv=r1 start=4 stop=4\n"
                           "    register_alu dst=r0 a=r0 op=add b=100\n"
                           "  end\n"
                           "  loop iv=r1 start=1 stop=10 step=4\n"  // 1, 5, 9
                           "    register_alu dst=r0 a=r0 op=add b=r1\n"
                           "  end\n"
                           "  register_store dst=%0@0[[1,1],[1,1]] src=r0\n  return %0\n}\n";
  CHECK(ints_of(run(text, {})[0])[0] == 15);
}

TEST_CASE("a tensor used in a loop keeps its contents across iterations", "[control]") {
  // acc (SBUF) += a[i] for each of 4 row blocks, addressed by the loop register.
  const std::string text =
      "kernel \"k\" target=trn2 {\n"
      "  param %0 \"a\" hbm float32[16, 8]\n"
      "  tensor %1 \"out\" shared_hbm float32[4, 8]\n"
      "  tensor %2 \"acc\" sbuf float32[4, 8]\n"
      "  tensor %3 \"t\" sbuf float32[4, 8]\n"
      "  memset dst=%2@0[[8,4],[1,8]]\n"
      "  loop iv=r0 stop=4\n"
      "    dma_copy dst=%3@0[[8,4],[1,8]] src=%0@0+32*r0[[8,4],[1,8]]\n"
      "    tensor_tensor dst=%2@0[[8,4],[1,8]] data1=%2@0[[8,4],[1,8]] data2=%3@0[[8,4],[1,8]]\n"
      "  end\n"
      "  dma_copy dst=%1@0[[8,4],[1,8]] src=%2@0[[8,4],[1,8]]\n"
      "  return %1\n}\n";
  const std::vector<float> a = test::random_values(128, 7);
  auto out = run(text, {test::host(DT::float32, {16, 8}, a)})[0].to_floats();
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 8; ++c) {
      float want = 0;
      for (int i = 0; i < 4; ++i) want += a[(i * 4 + r) * 8 + c];
      CHECK(out[r * 8 + c] == want);  // same fp32 order as the kernel: ((0 + a0) + a1) + ...
    }
}

TEST_CASE("a dynamic offset out of range fails with the register values", "[control]") {
  const std::string text =
      "kernel \"k\" target=trn2 {\n"
      "  param %0 \"a\" hbm float32[8, 8]\n"
      "  tensor %1 \"out\" shared_hbm float32[8, 8]\n"
      "  loop iv=r0 stop=3\n"
      "    dma_copy dst=%1@0+32*r0[[8,4],[1,8]] src=%0@0+32*r0[[8,4],[1,8]]\n"
      "  end\n"
      "  return %1\n}\n";
  expect_error(text, {sim::HostTensor::zeros(DT::float32, {8, 8})}, "view-out-of-range", "r0 = 2");
}

TEST_CASE("register errors: never-set register, instruction budget, block structure", "[control]") {
  expect_error(kHead + "  register_store dst=%0@0[[1,1],[1,1]] src=r4\n  return %0\n}\n", {}, "uninitialized-register",
               "r4");
  sim::InterpretOptions budget;
  budget.max_instructions = 1000;
  expect_error(kHead + "  register_move dst=r0 src=1\n  while cond=r0\n  end\n  return %0\n}\n", {},
               "instruction-limit", "more than 1000", budget);
  expect_error(kHead + "  register_move dst=r0 src=1\n  loop iv=r1 stop=2\n  return %0\n}\n", {}, "block",
               "never closed");
  expect_error(kHead + "  else\n  return %0\n}\n", {}, "block", "else without");
  expect_error(kHead + "  end\n  return %0\n}\n", {}, "block", "end without");
  expect_error(kHead + "  loop iv=r1 stop=2 step=0\n  end\n  return %0\n}\n", {}, "loop-step", "positive");
}

TEST_CASE("indirect rows: gather, out-of-range error, oob skip, scatter-add", "[control]") {
  const std::string gather =
      "kernel \"k\" target=trn2 {\n"
      "  param %0 \"table\" hbm float32[10, 4]\n"
      "  param %1 \"idx\" hbm int32[6, 1]\n"
      "  tensor %2 \"out\" shared_hbm float32[6, 4]\n"
      "  tensor %3 \"i\" sbuf int32[6, 1]\n"
      "  tensor %4 \"t\" sbuf float32[6, 4]\n"
      "  memset dst=%4@0[[4,6],[1,4]] value=-1\n"
      "  dma_copy dst=%3@0[[1,6],[1,1]] src=%1@0[[1,6],[1,1]]\n"
      "  dma_copy dst=%4@0[[4,6],[1,4]] src=%0@0[[4,6],[1,4]]<0:%3@0[[1,6],[1,1]]> OOB\n"
      "  dma_copy dst=%2@0[[4,6],[1,4]] src=%4@0[[4,6],[1,4]]\n"
      "  return %2\n}\n";
  auto with = [&](const std::string& oob) {
    std::string t = gather;
    t.replace(t.find(" OOB"), 4, oob);
    return t;
  };
  const std::vector<float> table = test::random_values(40, 3);
  const std::vector<int32_t> idx{7, 0, 9, 7, 3, 1};
  auto out = run(with(""), {test::host(DT::float32, {10, 4}, table), ints({6, 1}, idx)})[0].to_floats();
  for (int r = 0; r < 6; ++r)
    for (int c = 0; c < 4; ++c) CHECK(out[r * 4 + c] == table[idx[r] * 4 + c]);

  const std::vector<int32_t> bad{7, 0, 10, 7, -1, 1};
  expect_error(with(""), {test::host(DT::float32, {10, 4}, table), ints({6, 1}, bad)}, "indirect-out-of-bounds",
               "index 10 (entry 2");
  out = run(with(" oob_mode=skip"), {test::host(DT::float32, {10, 4}, table), ints({6, 1}, bad)})[0].to_floats();
  for (int r = 0; r < 6; ++r)
    for (int c = 0; c < 4; ++c) CHECK(out[r * 4 + c] == (bad[r] < 0 || bad[r] >= 10 ? -1.0f : table[bad[r] * 4 + c]));

  // Scatter-add with repeated rows: every contribution lands when unique_indices=false.
  const std::string scatter =
      "kernel \"k\" target=trn2 {\n"
      "  param %0 \"dst\" hbm float32[5, 3]\n"
      "  param %1 \"idx\" hbm int32[4, 1]\n"
      "  param %2 \"vals\" hbm float32[4, 3]\n"
      "  tensor %3 \"i\" sbuf int32[4, 1]\n"
      "  tensor %4 \"v\" sbuf float32[4, 3]\n"
      "  dma_copy dst=%3@0[[1,4],[1,1]] src=%1@0[[1,4],[1,1]]\n"
      "  dma_copy dst=%4@0[[3,4],[1,3]] src=%2@0[[3,4],[1,3]]\n"
      "  dma_compute dst=%0@0[[3,4],[1,3]]<0:%3@0[[1,4],[1,1]]> srcs=[%0@0[[3,4],[1,3]]<0:%3@0[[1,4],[1,1]]>, "
      "%4@0[[3,4],[1,3]]] UNIQUE\n"
      "  return\n}\n";
  auto scatter_with = [&](const std::string& unique) {
    std::string t = scatter;
    t.replace(t.find(" UNIQUE"), 7, unique);
    return t;
  };
  const std::vector<float> base = test::random_values(15, 5), vals = test::random_values(12, 6);
  const std::vector<int32_t> rows{2, 4, 2, 0};
  std::vector<sim::HostTensor> args{test::host(DT::float32, {5, 3}, base), ints({4, 1}, rows),
                                    test::host(DT::float32, {4, 3}, vals)};
  const ir::Kernel k = ir::parse(scatter_with(" unique_indices=false"));
  sim::interpret(k, args);
  std::vector<float> want = base;
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 3; ++c) want[rows[r] * 3 + c] += vals[r * 3 + c];
  CHECK(args[0].to_floats() == want);
  expect_error(scatter_with(""),
               {test::host(DT::float32, {5, 3}, base), ints({4, 1}, rows), test::host(DT::float32, {4, 3}, vals)},
               "duplicate-index", "repeats index 2");
}

TEST_CASE("indirect views are rejected outside DMA and on bad index tensors", "[control]") {
  const std::string head =
      "kernel \"k\" target=trn2 {\n"
      "  param %0 \"table\" hbm float32[10, 4]\n"
      "  tensor %1 \"i\" sbuf int32[6, 1]\n"
      "  tensor %2 \"t\" sbuf float32[6, 4]\n"
      "  tensor %3 \"f\" sbuf float32[6, 1]\n";
  auto verify = [&](const std::string& line) { ir::verify(ir::parse(head + line + "\n  return\n}\n")); };
  CHECK_THROWS_WITH(verify("  dma_copy dst=%2@0[[4,6],[1,4]] src=%0@0[[4,6],[1,4]]<0:%3@0[[1,6],[1,1]]>"),
                    Catch::Contains("use int32 or uint32"));
  CHECK_THROWS_WITH(verify("  dma_copy dst=%2@0[[4,6],[1,4]] src=%0@0[[4,6],[1,4]]<0:%1@0[[1,3],[1,1]]>"),
                    Catch::Contains("one index per row"));
  CHECK_THROWS_WITH(verify("  tensor_copy dst=%2@0[[4,6],[1,4]] src=%2@0[[4,6],[1,4]]<0:%1@0[[1,6],[1,1]]>"),
                    Catch::Contains("only dma_copy and dma_compute"));
}
