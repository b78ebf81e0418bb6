// C++ kernels with registers, device loops and branches, register-offset and indirect views and
// dma_compute (dsl/include/knit/control.h, nl.h, isa.h), run on the reference interpreter and
// checked against plain C++ loops. Two of them are also compared, as IR text, with the IR the
// Python front end traces for the same kernels (tests/golden, pinned by test_dynamic.py).
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "test_util.h"

using namespace knit;
using test::host;
using test::ints;
using test::ints_of;
using DT = ir::DType;

namespace {

// Runs `fn` and expects a knit::Error with `rule`, whose message contains `detail`, reported at a
// line of this file.
template <class Fn>
void expect_error(Fn&& fn, const std::string& rule, const std::string& detail) {
  try {
    fn();
  } catch (const knit::Error& e) {
    INFO(e.what());
    CHECK(e.rule() == rule);
    CHECK_THAT(e.message(), Catch::Contains(detail));
    CHECK_THAT(e.loc().file, Catch::EndsWith("test_dsl_dynamic.cpp"));
    return;
  }
  FAIL("expected a knit::Error with rule " << rule);
}

int count_ops(const ir::Kernel& k, ir::Opcode op) {
  int n = 0;
  for (const ir::Instruction& inst : k.body) n += inst.opcode() == op;
  return n;
}

// Python's // and %, written the obvious way (C++'s / and % truncate toward zero).
int32_t floor_div(int32_t a, int32_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
int32_t floor_mod(int32_t a, int32_t b) { return a - floor_div(a, b) * b; }

// ---- kernels ---------------------------------------------------------------------------------

// a + 1 over 128-row tiles: one device loop whose body is traced once; the tile offset moves with i.
nl::tensor add_one_by_tiles(nl::tensor a) {
  const int64_t n = a.shape(0), f = a.shape(1);
  auto out = nl::ndarray({n, f}, a.dtype(), nl::shared_hbm);
  nl::dynamic_range(n / 128, [&](nl::reg i) {
    auto t = nl::ndarray({128, f}, a.dtype(), nl::sbuf);
    isa::dma_copy(t, a(nl::ds(i * 128, 128), nl::all));
    isa::tensor_scalar(t, t, nl::add, 1.0);
    isa::dma_copy(out(nl::ds(i * 128, 128), nl::all), t);
  });
  return out;
}

// The sum of the first n_tiles 128-row tiles of a; the trip count is read from a tensor.
nl::tensor sum_first_n_tiles(nl::tensor a, nl::tensor n_tiles) {
  const int64_t f = a.shape(1);
  auto nt = nl::ndarray({1, 1}, nl::int32, nl::sbuf);
  isa::dma_copy(nt, n_tiles);
  nl::reg count = isa::register_alloc();
  isa::register_load(count, nt);
  auto acc = nl::ndarray({128, f}, nl::float32, nl::sbuf);
  isa::memset(acc, 0.0);
  nl::fori_loop(0, count, [&](nl::reg i) {
    auto t = nl::ndarray({128, f}, nl::float32, nl::sbuf);
    isa::dma_copy(t, a(nl::ds(i * 128, 128), nl::all));
    isa::tensor_tensor(acc, acc, t, nl::add);
  });
  auto out = nl::ndarray({128, f}, nl::float32, nl::shared_hbm);
  isa::dma_copy(out, acc);
  return out;
}

// Every register operator applied to a = x[0], b = x[1], stored back one result per column.
std::vector<nl::reg> register_results(nl::reg a, nl::reg b) {
  return {a / b,  a % b, a * b + 3 * a - 7, a<b, a <= b, a> b, a >= b, a == b, a != b, a & b, a | b, (a ^ b) << 2,
          a >> 1, -a,    b * 128 + a - 64};
}
std::vector<int32_t> plain_results(int32_t a, int32_t b) {
  return {floor_div(a, b),
          floor_mod(a, b),
          a * b + 3 * a - 7,
          a<b, a <= b, a>
              b,
          a >= b,
          a == b,
          a != b,
          a & b,
          a | b,
          (a ^ b) << 2,
          a >> 1,
          -a,
          b * 128 + a - 64};
}
nl::tensor register_math(nl::tensor x) {
  auto xs = nl::ndarray({1, 2}, nl::int32, nl::sbuf);
  isa::dma_copy(xs, x);
  const nl::reg a = isa::scalar_load(xs(nl::ds(0, 1), nl::ds(0, 1)));
  const nl::reg b = isa::scalar_load(xs(nl::ds(0, 1), nl::ds(1, 1)));
  const std::vector<nl::reg> results = register_results(a, b);
  const int64_t n = static_cast<int64_t>(results.size());
  auto out_s = nl::ndarray({1, n}, nl::int32, nl::sbuf);
  for (int64_t k = 0; k < n; ++k) isa::scalar_store(out_s(nl::ds(0, 1), nl::ds(k, 1)), results[k]);
  auto out = nl::ndarray({1, n}, nl::int32, nl::shared_hbm);
  isa::dma_copy(out, out_s);
  return out;
}

// The number of Collatz steps from x to 1: while_loop + if_else on registers.
nl::tensor collatz_steps(nl::tensor x) {
  auto xs = nl::ndarray({1, 1}, nl::int32, nl::sbuf);
  isa::dma_copy(xs, x);
  nl::reg v = isa::register_alloc();
  isa::register_load(v, xs);
  nl::reg steps = isa::register_alloc(0);
  nl::while_loop(v > 1, [&](nl::reg) {
    nl::if_else(v % 2, [&] { isa::register_move(v, v * 3 + 1); }, [&] { isa::register_move(v, v / 2); });
    isa::register_move(steps, steps + 1);
    return v > 1;
  });
  auto out_s = nl::ndarray({1, 1}, nl::int32, nl::sbuf);
  isa::register_store(out_s, steps);
  auto out = nl::ndarray({1, 1}, nl::int32, nl::shared_hbm);
  isa::dma_copy(out, out_s);
  return out;
}

// out[r] = table[idx[r]] (an indirect DMA); rows not gathered keep -1.
auto gather_rows(isa::oob_mode mode) {
  return [mode](nl::tensor table, nl::tensor idx) {
    const int64_t n = idx.shape(0), f = table.shape(1);
    auto it = nl::ndarray({n, 1}, nl::int32, nl::sbuf);
    isa::dma_copy(it, idx);
    auto t = nl::ndarray({n, f}, table.dtype(), nl::sbuf);
    isa::memset(t, -1.0);
    isa::dma_copy(t, table.ap({{f, n}, {1, f}}, 0, {.vector_offset = it}), {.oob_mode = mode});
    auto out = nl::ndarray({n, f}, table.dtype(), nl::shared_hbm);
    isa::dma_copy(out, t);
    return out;
  };
}

// dst[idx[r]] += vals[r] in place (dma_compute with an indirect dst).
auto scatter_add(bool unique) {
  return [unique](nl::tensor dst, nl::tensor idx, nl::tensor vals) {
    const int64_t n = vals.shape(0), f = vals.shape(1);
    auto it = nl::ndarray({n, 1}, nl::int32, nl::sbuf);
    isa::dma_copy(it, idx);
    auto v = nl::ndarray({n, f}, vals.dtype(), nl::sbuf);
    isa::dma_copy(v, vals);
    auto rows = dst.ap({{f, n}, {1, f}}, 0, {.vector_offset = it});
    isa::dma_compute(rows, {rows, v}, {.unique_indices = unique});
  };
}

// Rows start .. start+3 of a, with start read from a 1x1 tensor (.ap scalar_offset).
nl::tensor window_at(nl::tensor a, nl::tensor start) {
  auto s = nl::ndarray({1, 1}, nl::int32, nl::sbuf);
  isa::dma_copy(s, start);
  const int64_t f = a.shape(1);
  auto t = nl::ndarray({4, f}, a.dtype(), nl::sbuf);
  isa::dma_copy(t, a.ap({{f, 4}, {1, f}}, 0, {.scalar_offset = isa::scalar_load(s)}));
  auto out = nl::ndarray({4, f}, a.dtype(), nl::shared_hbm);
  isa::dma_copy(out, t);
  return out;
}

// The kernel's IR text without source locations (which name each front end's own files).
std::string text_without_locations(ir::Kernel k) {
  for (ir::TensorDecl& t : k.tensors) t.loc = {};
  for (ir::Instruction& inst : k.body) inst.loc = {};
  return ir::print(k);
}

std::string golden(const std::string& name) {
  std::ifstream in(std::string(KNIT_SOURCE_DIR) + "/tests/golden/" + name);
  REQUIRE(in.good());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("a device loop over tiles is traced once and moves its offsets", "[dsl-dynamic]") {
  const ir::Kernel k = trace("add_one_by_tiles", add_one_by_tiles, {arg({512, 64}, nl::float32, "a")});
  CHECK(count_ops(k, ir::Opcode::loop) == 1);
  CHECK(count_ops(k, ir::Opcode::dma_copy) == 2);
  const std::vector<float> a = test::random_values(512 * 64, 1);
  const std::vector<float> out = run(k, {host(DT::float32, {512, 64}, a)})[0].to_floats();
  for (size_t i = 0; i < a.size(); ++i) REQUIRE(out[i] == a[i] + 1.0f);
}

TEST_CASE("fori_loop takes its trip count from a tensor at run time", "[dsl-dynamic]") {
  const ir::Kernel k = trace("sum_first_n_tiles", sum_first_n_tiles,
                             {arg({512, 8}, nl::float32, "a"), arg({1, 1}, nl::int32, "n_tiles")});
  const std::vector<float> a = test::random_values(512 * 8, 2);
  for (int32_t n : {0, 1, 3}) {
    INFO("n = " << n);
    std::vector<float> want(128 * 8, 0.0f);
    for (int i = 0; i < n; ++i)  // same fp32 order as the kernel
      for (int e = 0; e < 128 * 8; ++e) want[e] += a[i * 128 * 8 + e];
    CHECK(run(k, {host(DT::float32, {512, 8}, a), ints({1, 1}, {n})})[0].to_floats() == want);
  }
}

TEST_CASE("register arithmetic matches plain C++ with floor division", "[dsl-dynamic]") {
  const ir::Kernel k = trace("register_math", register_math, {arg({1, 2}, nl::int32, "x")});
  for (auto [a, b] : {std::pair{17, 5}, {-17, 5}, {17, -5}, {-17, -5}, {3, 3}, {-7, 2}, {0, -3}}) {
    INFO(a << ", " << b);
    CHECK(ints_of(run(k, {ints({1, 2}, {a, b})})[0]) == plain_results(a, b));
  }
  expect_error([&] { run(k, {ints({1, 2}, {5, 0})}); }, "register-divide-by-zero", "division by zero");
}

TEST_CASE("affine register expressions emit nothing until they are needed in a register", "[dsl-dynamic]") {
  frontend::Builder b("k", ir::Target::trn2);
  frontend::Builder::Scope scope(b);
  const nl::reg i = isa::register_alloc(), j = isa::register_alloc();
  const size_t before = b.kernel().body.size();
  const nl::reg e = (i * 128 + 64) - 2 * (j - 3) + j * 2 - i * 128;  // 70, no register terms left
  CHECK(b.kernel().body.size() == before);
  CHECK(e.is_static());
  CHECK(e.constant() == 70);
  CHECK((i + 0).id() == i.id());
  CHECK((i * 2).id() == -1);
}

TEST_CASE("while_loop and if_else count Collatz steps", "[dsl-dynamic]") {
  const ir::Kernel k = trace("collatz_steps", collatz_steps, {arg({1, 1}, nl::int32, "x")});
  for (int32_t start : {1, 6, 27}) {
    int32_t v = start, steps = 0;
    while (v > 1) {
      v = v % 2 ? 3 * v + 1 : v / 2;
      ++steps;
    }
    CHECK(ints_of(run(k, {ints({1, 1}, {start})})[0])[0] == steps);
  }
}

TEST_CASE("an if_else on a value known while tracing picks its branch at trace time", "[dsl-dynamic]") {
  const ir::Kernel k = trace("k",
                             [](nl::tensor x) {
                               auto t = nl::ndarray({1, 1}, nl::int32, nl::sbuf);
                               nl::if_else(0, [&] { isa::memset(t, 1.0); }, [&] { isa::memset(t, 2.0); });
                               nl::if_else(1, [&] { isa::dma_copy(t, x); });
                               auto out = nl::ndarray({1, 1}, nl::int32, nl::shared_hbm);
                               isa::dma_copy(out, t);
                               return out;
                             },
                             {arg({1, 1}, nl::int32, "x")});
  CHECK(count_ops(k, ir::Opcode::if_) == 0);
  CHECK(count_ops(k, ir::Opcode::memset) == 1);
  CHECK(ints_of(run(k, {ints({1, 1}, {9})})[0])[0] == 9);
}

TEST_CASE("an indirect gather matches a plain loop; out-of-range rows fail or are skipped", "[dsl-dynamic]") {
  const std::vector<ArgSpec> args{arg({100, 32}, nl::float32, "table"), arg({128, 1}, nl::int32, "idx")};
  const std::vector<float> table = test::random_values(100 * 32, 3);
  std::vector<int32_t> idx(128);
  for (int r = 0; r < 128; ++r) idx[r] = (r * 37 + 11) % 100;
  auto out = run(trace("gather", gather_rows(isa::oob_mode::error), args),
                 {host(DT::float32, {100, 32}, table), ints({128, 1}, idx)})[0]
                 .to_floats();
  for (int r = 0; r < 128; ++r)
    for (int c = 0; c < 32; ++c) REQUIRE(out[r * 32 + c] == table[idx[r] * 32 + c]);

  const std::vector<ArgSpec> small{arg({10, 4}, nl::float32, "table"), arg({4, 1}, nl::int32, "idx")};
  const std::vector<float> t10 = test::random_values(40, 4);
  const std::vector<int32_t> bad{3, 10, 0, -2};
  const ir::Kernel strict = trace("gather", gather_rows(isa::oob_mode::error), small);
  expect_error([&] { run(strict, {host(DT::float32, {10, 4}, t10), ints({4, 1}, bad)}); }, "indirect-out-of-bounds",
               "index 10 (entry 1");
  out = run(trace("gather", gather_rows(isa::oob_mode::skip), small),
            {host(DT::float32, {10, 4}, t10), ints({4, 1}, bad)})[0]
            .to_floats();
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) CHECK(out[r * 4 + c] == (bad[r] < 0 || bad[r] >= 10 ? -1.0f : t10[bad[r] * 4 + c]));
}

TEST_CASE("dma_compute scatter-adds repeated rows like a plain loop", "[dsl-dynamic]") {
  const std::vector<ArgSpec> args{arg({16, 8}, nl::float32, "dst"), arg({32, 1}, nl::int32, "idx"),
                                  arg({32, 8}, nl::float32, "vals")};
  const std::vector<float> base = test::random_values(16 * 8, 5), vals = test::random_values(32 * 8, 6);
  std::vector<int32_t> idx(32);
  for (int r = 0; r < 32; ++r) idx[r] = (r * 5) % 7;  // rows 0..6, each several times
  std::vector<HostTensor> io{host(DT::float32, {16, 8}, base), ints({32, 1}, idx), host(DT::float32, {32, 8}, vals)};
  run(trace("scatter_add", scatter_add(false), args), io);
  std::vector<float> want = base;
  for (int r = 0; r < 32; ++r)  // same order of fp32 adds as the kernel
    for (int c = 0; c < 8; ++c) want[idx[r] * 8 + c] += vals[r * 8 + c];
  CHECK(io[0].to_floats() == want);

  const ir::Kernel unique = trace("scatter_add", scatter_add(true), args);
  expect_error(
      [&] { run(unique, {host(DT::float32, {16, 8}, base), ints({32, 1}, idx), host(DT::float32, {32, 8}, vals)}); },
      "duplicate-index", "repeats index");
}

TEST_CASE("a scalar_offset read from a tensor moves an ap window, bounds-checked at run time", "[dsl-dynamic]") {
  const ir::Kernel k = trace("window_at", window_at, {arg({10, 8}, nl::float32, "a"), arg({1, 1}, nl::int32, "s")});
  std::vector<float> a(80);
  for (int i = 0; i < 80; ++i) a[i] = static_cast<float>(i);
  const std::vector<float> out = run(k, {host(DT::float32, {10, 8}, a), ints({1, 1}, {5})})[0].to_floats();
  CHECK(out == std::vector<float>(a.begin() + 5 * 8, a.begin() + 9 * 8));
  expect_error([&] { run(k, {host(DT::float32, {10, 8}, a), ints({1, 1}, {7})}); }, "view-out-of-range", "= 7");
}

TEST_CASE("register misuse is reported at the kernel line", "[dsl-dynamic]") {
  auto partition = [](nl::tensor a) {
    auto t = nl::ndarray({128, 4}, a.dtype(), nl::sbuf);
    nl::dynamic_range(2, [&](nl::reg i) { isa::memset(t(nl::ds(i, 1), nl::all), 1.0); });
  };
  expect_error([&] { trace("bad", partition, {arg({128, 4}, nl::float32, "a")}); }, "dynamic-partition",
               "partition dim");
  auto move_to_expression = [](nl::tensor) {
    const nl::reg r = isa::register_alloc(1);
    isa::register_move(r * 2, 3);
  };
  expect_error([&] { trace("bad", move_to_expression, {arg({1, 1}, nl::int32, "a")}); }, "operand",
               "dst must be a register");
}

TEST_CASE("C++ kernels trace to the same IR as the same Python kernels", "[dsl-dynamic]") {
  // tests/golden/*.tir is the text the Python front end gives for add_one_by_tiles and
  // collatz_steps in tests/python/test_dynamic.py (checked there).
  CHECK(text_without_locations(trace("add_one_by_tiles", add_one_by_tiles, {arg({512, 64}, nl::float32, "a")})) ==
        golden("add_one_by_tiles.tir"));
  CHECK(text_without_locations(trace("collatz_steps", collatz_steps, {arg({1, 1}, nl::int32, "x")})) ==
        golden("collatz_steps.tir"));
}
