// User errors of the general verifier (ir/src/verifier.cpp) and of the data-movement / Tensor
// Engine rules (ir/src/verify_data.cpp), each triggered from a C++ DSL kernel traced with
// knit::trace. The statement that breaks the rule records its own line with __LINE__, and the
// test checks the rule id, that the diagnostic names this file and that line, and that the
// message names the limit that was broken (the NKI ISA docs of each instruction).
#include <catch2/catch.hpp>

#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include <knit/knit.h>

#include "knit/ir/verifier.h"

namespace ir = knit::ir;
using namespace knit;
using ir::Target;

namespace {

struct Failure {
  bool thrown = false;
  std::string rule = "<no error>", message, what;
  SourceLoc loc;
  ErrorKind kind = ErrorKind::User;
};

template <class Fn>
Failure trace_failure(Fn&& fn, const std::vector<ArgSpec>& args, Target target = Target::trn2) {
  Failure f;
  try {
    trace("k", fn, args, target);
  } catch (const knit::Error& e) {
    f.thrown = true;
    f.rule = e.rule();
    f.message = e.message();
    f.what = e.what();
    f.loc = e.loc();
    f.kind = e.kind();
  }
  return f;
}

// The failure is a user error with `rule` at line `line` of this file, and its message contains
// every string of `mentions`.
// `line` is taken by reference: it is read only after the traced kernel (an argument) has set it.
void check_failure(const Failure& f, const std::string& rule, const int& line,
                   std::initializer_list<std::string> mentions) {
  INFO("what(): " << f.what);
  REQUIRE(f.thrown);
  CHECK(f.rule == rule);
  CHECK(f.kind == ErrorKind::User);
  CHECK(f.loc.file == __FILE__);
  CHECK(f.loc.line == line);
  CHECK(f.what.find(std::string(__FILE__) + ":" + std::to_string(line) + ":") != std::string::npos);
  CHECK(f.what.find("[" + rule + "]") != std::string::npos);
  for (const std::string& m : mentions) {
    INFO("message should mention '" << m << "'");
    CHECK(f.message.find(m) != std::string::npos);
  }
}

template <class Fn>
void check_ok(Fn&& fn, const std::vector<ArgSpec>& args, Target target = Target::trn2) {
  const Failure f = trace_failure(fn, args, target);
  INFO("unexpected error: " << f.what);
  CHECK_FALSE(f.thrown);
}

}  // namespace

// ---- tensor declarations (verify_tensor) ---------------------------------------------------------

TEST_CASE("tensor declarations: partition dim limit", "[core][verifier]") {
  int line = 0;
  auto k = [&]() {
    line = __LINE__ + 1;  // the statement below
    nl::ndarray({256, 64}, nl::float32, nl::sbuf, "big");
  };
  const Failure f = trace_failure(k, {});
  check_failure(f, "partition-limit", line, {"256", "128", "big"});
  // The diagnostic quotes the offending source line.
  CHECK(f.what.find("nl::ndarray({256, 64}") != std::string::npos);

  auto p = [&]() {
    line = __LINE__ + 1;  // the statement below
    nl::ndarray({129, 4}, nl::float32, nl::psum);
  };
  check_failure(trace_failure(p, {}), "partition-limit", line, {"129", "128"});
  check_ok([]() { nl::ndarray({128, 4}, nl::float32, nl::psum); }, {});
  // HBM tensors have no partition dim.
  check_ok([]() { nl::ndarray({4096, 4}, nl::float32, nl::hbm); }, {});
}

TEST_CASE("tensor declarations: SBUF capacity per target", "[core][verifier]") {
  struct Case {
    Target target;
    int64_t bytes;  // per partition: 192 / 224 / 256 KiB (docs/architecture.md)
  };
  for (const Case c :
       {Case{Target::trn1, 192 * 1024}, Case{Target::trn2, 224 * 1024}, Case{Target::trn3, 256 * 1024}}) {
    INFO("target " << ir::to_string(c.target));
    const int64_t fits = c.bytes / 4;
    check_ok([&]() { nl::ndarray({128, fits}, nl::float32, nl::sbuf); }, {}, c.target);
    check_ok([&]() { nl::ndarray({128, 2, c.bytes / 4}, nl::bfloat16, nl::sbuf); }, {}, c.target);
    int line = 0;
    auto over = [&]() {
      line = __LINE__ + 1;  // the statement below
      nl::ndarray({128, fits + 1}, nl::float32, nl::sbuf, "tile");
    };
    check_failure(trace_failure(over, {}, c.target), "capacity", line,
                  {std::to_string(c.bytes), std::to_string(c.bytes + 4), std::string(ir::to_string(c.target))});
    auto over_bf16 = [&]() {
      line = __LINE__ + 1;  // the statement below
      nl::ndarray({64, c.bytes / 2 + 1}, nl::bfloat16, nl::sbuf);
    };
    check_failure(trace_failure(over_bf16, {}, c.target), "capacity", line, {std::to_string(c.bytes + 2)});
  }
  // What overflows trn1 fits trn2, and what overflows trn2 fits trn3.
  check_ok([]() { nl::ndarray({128, 192 * 256 + 1}, nl::float32, nl::sbuf); }, {}, Target::trn2);
  check_ok([]() { nl::ndarray({128, 224 * 256 + 1}, nl::float32, nl::sbuf); }, {}, Target::trn3);
}

TEST_CASE("tensor declarations: PSUM capacity and address pins", "[core][verifier]") {
  int line = 0;
  check_ok([]() { nl::ndarray({128, 2, 2048}, nl::float32, nl::psum); }, {});  // exactly 16 KiB
  auto big = [&]() {
    line = __LINE__ + 1;  // the statement below
    nl::ndarray({128, 4097}, nl::float32, nl::psum);
  };
  check_failure(trace_failure(big, {}), "capacity", line, {"16384", "16388", "psum"});

  using Pin = std::array<int64_t, 2>;
  check_ok([]() { nl::ndarray({128, 512}, nl::float32, nl::psum, "acc", Pin{0, 2048}); }, {});
  check_ok([]() { nl::ndarray({128, 512}, nl::float32, nl::psum, "acc", Pin{0, 14336}); }, {});  // last bank
  auto unaligned = [&]() {
    line = __LINE__ + 1;  // the statement below
    nl::ndarray({128, 512}, nl::float32, nl::psum, "acc", Pin{0, 1024});
  };
  check_failure(trace_failure(unaligned, {}), "address", line, {"2 KiB", "1024"});
  auto past_end = [&]() {
    line = __LINE__ + 1;  // the statement below
    nl::ndarray({128, 512}, nl::float32, nl::psum, "acc", Pin{0, 16384});
  };
  check_failure(trace_failure(past_end, {}), "address", line, {"(0, 16384)"});
  auto partitions = [&]() {
    line = __LINE__ + 1;  // the statement below
    nl::ndarray({64, 16}, nl::float32, nl::sbuf, "s", Pin{100, 0});
  };
  check_failure(trace_failure(partitions, {}), "address", line, {"(100, 0)"});
  check_ok([]() { nl::ndarray({64, 16}, nl::float32, nl::sbuf, "s", Pin{64, 1000}); }, {});  // unaligned SBUF is fine
  auto hbm_pin = [&]() {
    line = __LINE__ + 1;  // the statement below
    nl::ndarray({64, 16}, nl::float32, nl::hbm, "h", Pin{0, 0});
  };
  check_failure(trace_failure(hbm_pin, {}), "address", line, {"sbuf/psum"});
}

TEST_CASE("tensor declarations: shape rules", "[core][verifier]") {
  int line = 0;
  auto rank1 = [&]() {
    line = __LINE__ + 1;  // the statement below
    nl::ndarray({128}, nl::float32, nl::sbuf);
  };
  check_failure(trace_failure(rank1, {}), "tensor-shape", line, {"partition dim"});
  auto zero = [&]() {
    line = __LINE__ + 1;  // the statement below
    nl::ndarray({128, 0}, nl::float32, nl::sbuf);
  };
  check_failure(trace_failure(zero, {}), "tensor-shape", line, {">= 1"});
  auto empty = [&]() {
    line = __LINE__ + 1;  // the statement below
    nl::ndarray({}, nl::float32, nl::hbm);
  };
  check_failure(trace_failure(empty, {}), "tensor-shape", line, {});
}

TEST_CASE("kernel outputs must be HBM tensors", "[core][verifier]") {
  int line = 0;
  auto k = [&](nl::tensor a) {
    line = __LINE__ + 1;  // the statement below
    auto t = nl::ndarray({128, 64}, nl::float32, nl::sbuf, "result");
    isa::dma_copy(t, a);
    return t;
  };
  check_failure(trace_failure(k, {arg({128, 64}, nl::float32, "a")}), "kernel-output", line,
                {"result", "sbuf", "shared_hbm"});
  auto ok = [](nl::tensor a) {
    auto t = nl::ndarray({128, 64}, nl::float32, nl::sbuf);
    auto out = nl::ndarray({128, 64}, nl::float32, nl::shared_hbm);
    isa::dma_copy(t, a);
    isa::dma_copy(out, t);
    return out;
  };
  check_ok(ok, {arg({128, 64}, nl::float32, "a")});
}

TEST_CASE("trace checks the number of argument specs", "[core][verifier]") {
  auto k = [](nl::tensor, nl::tensor) {};
  int line = 0;
  Failure f;
  try {
    line = __LINE__ + 1;  // the statement below
    trace("two", k, {arg({4}, nl::float32)});
  } catch (const knit::Error& e) {
    f.thrown = true;
    f.rule = e.rule();
    f.message = e.message();
    f.what = e.what();
    f.loc = e.loc();
  }
  check_failure(f, "kernel-args", line, {"2", "1"});
}

// ---- dma_copy ------------------------------------------------------------------------------------

TEST_CASE("dma_copy rules", "[core][verifier]") {
  const std::vector<ArgSpec> args{arg({128, 64}, nl::float32, "a")};
  int line = 0;
  SECTION("element counts must match") {
    auto k = [&](nl::tensor a) {
      auto t = nl::ndarray({128, 64}, nl::float32, nl::sbuf);
      line = __LINE__ + 1;  // the statement below
      isa::dma_copy(t, a(nl::all, nl::ds(0, 32)));
    };
    check_failure(trace_failure(k, args), "dma-size", line, {"dma_copy", "8192", "4096"});
    // Only the total count matters: [128, 64] <- [64, 128] is fine.
    check_ok([](nl::tensor a) { isa::dma_copy(nl::ndarray({64, 128}, nl::float32, nl::sbuf), a); }, args);
  }
  SECTION("PSUM source is rejected") {
    auto k = [&](nl::tensor a) {
      auto p = nl::ndarray({128, 64}, nl::float32, nl::psum);
      isa::memset(p, 0);
      auto out = nl::ndarray({128, 64}, nl::float32, nl::shared_hbm);
      line = __LINE__ + 1;  // the statement below
      isa::dma_copy(out, p);
      return out;
    };
    check_failure(trace_failure(k, args), "buffer", line, {"src", "psum"});
  }
  SECTION("PSUM destination is rejected") {
    auto k = [&](nl::tensor a) {
      auto p = nl::ndarray({128, 64}, nl::float32, nl::psum);
      line = __LINE__ + 1;  // the statement below
      isa::dma_copy(p, a);
    };
    check_failure(trace_failure(k, args), "buffer", line, {"dst", "PSUM"});
  }
  SECTION("hwdge cannot convert dtypes") {
    auto k = [&](nl::tensor a) {
      auto t = nl::ndarray({128, 64}, nl::bfloat16, nl::sbuf);
      line = __LINE__ + 1;  // the statement below
      isa::dma_copy(t, a, {.dge_mode = isa::dge_mode::hwdge});
    };
    check_failure(trace_failure(k, args), "dtype", line, {"hwdge", "float32", "bfloat16"});
    check_ok(
        [](nl::tensor a) {
          isa::dma_copy(nl::ndarray({128, 64}, nl::bfloat16, nl::sbuf), a, {.dge_mode = isa::dge_mode::swdge});
        },
        args);
    check_ok(
        [](nl::tensor a) {
          isa::dma_copy(nl::ndarray({128, 64}, nl::float32, nl::sbuf), a, {.dge_mode = isa::dge_mode::hwdge});
        },
        args);
  }
  SECTION("queue engine") {
    auto k = [&](nl::tensor a) {
      auto t = nl::ndarray({128, 64}, nl::float32, nl::sbuf);
      line = __LINE__ + 1;  // the statement below
      isa::dma_copy(t, a, {.engine = isa::engine::gpsimd});
    };
    check_failure(trace_failure(k, args), "engine", line, {"gpsimd"});
  }
  SECTION("out-of-bounds views are rejected at the call") {
    auto k = [&](nl::tensor a) {
      auto t = nl::ndarray({128, 64}, nl::float32, nl::sbuf);
      line = __LINE__ + 1;  // the statement below
      isa::dma_copy(t, a.ap({{64, 128}, {1, 64}}, 1));
    };
    check_failure(trace_failure(k, args), "view-out-of-range", line, {"src"});
    auto s = [&](nl::tensor a) {
      line = __LINE__ + 1;  // the statement below
      auto t = a(nl::ds(100, 64), nl::all);
      (void)t;
    };
    check_failure(trace_failure(s, args), "view-out-of-range", line, {"128"});
  }
}

// ---- nc_matmul ------------------------------------------------------------------------------------

namespace {
// stationary [K, M], moving [K, N] in SBUF; dst [M, N] in PSUM.
struct MM {
  int64_t K = 128, M = 128, N = 512;
  ir::DType st = nl::bfloat16, mv = nl::bfloat16, dst = nl::float32;
  int64_t dst_n = 0;  // dst free size; 0 = N
};
}  // namespace

TEST_CASE("nc_matmul: N limit per target", "[core][verifier]") {
  int line = 0;
  auto kernel = [&](MM m) {
    return [&line, m]() {
      auto st = nl::ndarray({m.K, m.M}, m.st, nl::sbuf);
      auto mv = nl::ndarray({m.K, m.N}, m.mv, nl::sbuf);
      auto acc = nl::ndarray({m.M, m.dst_n ? m.dst_n : m.N}, m.dst, nl::psum);
      line = __LINE__ + 1;  // the statement below
      isa::nc_matmul(acc, st, mv);
    };
  };
  // trn2: N <= 512 (one PSUM bank of fp32).
  check_ok(kernel({}), {});
  check_failure(trace_failure(kernel({.N = 1024}), {}, Target::trn2), "matmul-shape", line, {"N=1024", "512", "trn2"});
  check_failure(trace_failure(kernel({.N = 513}), {}, Target::trn1), "matmul-shape", line, {"N=513", "512"});
  // trn3: N <= 4096 with an fp32 dst (the whole PSUM partition).
  check_ok(kernel({.N = 1024}), {}, Target::trn3);
  check_ok(kernel({.N = 4096}), {}, Target::trn3);
  // N = 4097 cannot have an fp32 dst (it would not fit PSUM); the N limit fires before the dst shape.
  check_failure(trace_failure(kernel({.N = 4097, .dst_n = 512}), {}, Target::trn3), "matmul-shape", line,
                {"N=4097", "4096", "trn3"});
  check_failure(trace_failure(kernel({.N = 513, .dst_n = 512}), {}, Target::trn2), "matmul-shape", line,
                {"N=513", "512"});
}

// Regression test: trn3 allows N up to 8192 with a bf16 dst (was capped at 4096).
TEST_CASE("nc_matmul: trn3 allows N = 8192 with a bf16 dst", "[core][verifier]") {
  auto k = []() {
    auto st = nl::ndarray({128, 128}, nl::bfloat16, nl::sbuf);
    auto mv = nl::ndarray({128, 8192}, nl::bfloat16, nl::sbuf);
    auto acc = nl::ndarray({128, 8192}, nl::bfloat16, nl::psum);
    isa::nc_matmul(acc, st, mv);
  };
  check_ok(k, {}, Target::trn3);
}

TEST_CASE("nc_matmul: K and M limits", "[core][verifier]") {
  int line = 0;
  SECTION("K mismatch") {
    auto k = [&]() {
      auto st = nl::ndarray({128, 128}, nl::bfloat16, nl::sbuf);
      auto mv = nl::ndarray({64, 512}, nl::bfloat16, nl::sbuf);
      auto acc = nl::ndarray({128, 512}, nl::float32, nl::psum);
      line = __LINE__ + 1;  // the statement below
      isa::nc_matmul(acc, st, mv);
    };
    check_failure(trace_failure(k, {}), "matmul-shape", line, {"K=128", "K=64"});
  }
  SECTION("K > 128 cannot even be expressed: the operand spans > 128 partitions") {
    auto k = [&]() {
      auto st = nl::ndarray({128, 256}, nl::bfloat16, nl::sbuf);
      auto mv = nl::ndarray({128, 512}, nl::bfloat16, nl::sbuf);
      auto acc = nl::ndarray({128, 512}, nl::float32, nl::psum);
      line = __LINE__ + 1;  // the statement below
      isa::nc_matmul(acc, st.ap({{256, 256}, {1, 128}}, 0), mv.ap({{512, 256}, {1, 512}}, 0));
    };
    check_failure(trace_failure(k, {}), "partition-limit", line, {"256", "128"});
  }
  SECTION("K > row tile size") {
    auto k = [&]() {
      auto st = nl::ndarray({128, 64}, nl::bfloat16, nl::sbuf);
      auto mv = nl::ndarray({128, 512}, nl::bfloat16, nl::sbuf);
      auto acc = nl::ndarray({64, 512}, nl::float32, nl::psum);
      line = __LINE__ + 1;  // the statement below
      isa::nc_matmul(acc, st, mv, {.tile_position = {0, 0}, .tile_size = {64, 64}});
    };
    check_failure(trace_failure(k, {}), "matmul-shape", line, {"K=128", "64"});
  }
  SECTION("M > 128") {
    auto k = [&]() {
      auto st = nl::ndarray({128, 256}, nl::bfloat16, nl::sbuf);
      auto mv = nl::ndarray({128, 512}, nl::bfloat16, nl::sbuf);
      auto acc = nl::ndarray({128, 512}, nl::float32, nl::psum);
      line = __LINE__ + 1;  // the statement below
      isa::nc_matmul(acc, st, mv);
    };
    check_failure(trace_failure(k, {}), "matmul-shape", line, {"M=256", "128"});
  }
  SECTION("M > column tile size") {
    auto k = [&]() {
      auto st = nl::ndarray({64, 64}, nl::bfloat16, nl::sbuf);
      auto mv = nl::ndarray({64, 512}, nl::bfloat16, nl::sbuf);
      auto acc = nl::ndarray({64, 512}, nl::float32, nl::psum);
      line = __LINE__ + 1;  // the statement below
      isa::nc_matmul(acc, st, mv, {.tile_position = {64, 32}, .tile_size = {64, 32}});
    };
    check_failure(trace_failure(k, {}), "matmul-shape", line, {"M=64", "32"});
  }
  SECTION("dst must be [M, N]") {
    auto k = [&]() {
      auto st = nl::ndarray({128, 128}, nl::bfloat16, nl::sbuf);
      auto mv = nl::ndarray({128, 512}, nl::bfloat16, nl::sbuf);
      auto acc = nl::ndarray({128, 256}, nl::float32, nl::psum);
      line = __LINE__ + 1;  // the statement below
      isa::nc_matmul(acc, st, mv);
    };
    check_failure(trace_failure(k, {}), "matmul-shape", line, {"[128, 512]", "256"});
  }
}

TEST_CASE("nc_matmul: buffers", "[core][verifier]") {
  int line = 0;
  auto kernel = [&](ir::Buffer st_buf, ir::Buffer mv_buf, ir::Buffer dst_buf) {
    return [&line, st_buf, mv_buf, dst_buf]() {
      auto st = nl::ndarray({128, 128}, nl::bfloat16, st_buf);
      auto mv = nl::ndarray({128, 512}, nl::bfloat16, mv_buf);
      auto acc = nl::ndarray({128, 512}, nl::float32, dst_buf);
      line = __LINE__ + 1;  // the statement below
      isa::nc_matmul(acc, st, mv);
    };
  };
  using ir::Buffer;
  check_ok(kernel(Buffer::sbuf, Buffer::sbuf, Buffer::psum), {});
  check_failure(trace_failure(kernel(Buffer::psum, Buffer::sbuf, Buffer::psum), {}), "buffer", line,
                {"stationary", "psum", "sbuf"});
  check_failure(trace_failure(kernel(Buffer::sbuf, Buffer::hbm, Buffer::psum), {}), "buffer", line, {"moving", "hbm"});
  check_failure(trace_failure(kernel(Buffer::sbuf, Buffer::sbuf, Buffer::sbuf), {}), "buffer", line, {"dst", "psum"});
}

TEST_CASE("nc_matmul: dtypes", "[core][verifier]") {
  int line = 0;
  auto kernel = [&](ir::DType st_t, ir::DType mv_t, ir::DType dst_t) {
    return [&line, st_t, mv_t, dst_t]() {
      auto st = nl::ndarray({128, 128}, st_t, nl::sbuf);
      auto mv = nl::ndarray({128, 512}, mv_t, nl::sbuf);
      auto acc = nl::ndarray({128, 512}, dst_t, nl::psum);
      line = __LINE__ + 1;  // the statement below
      isa::nc_matmul(acc, st, mv);
    };
  };
  // fp32/tf32 pair only with each other; the narrow types mix freely.
  check_failure(trace_failure(kernel(nl::float32, nl::bfloat16, nl::float32), {}), "dtype", line,
                {"float32", "bfloat16"});
  check_failure(trace_failure(kernel(nl::float8_e4m3, nl::tfloat32, nl::float32), {}), "dtype", line,
                {"tfloat32", "float8_e4m3"});
  check_ok(kernel(nl::float32, nl::tfloat32, nl::float32), {});
  check_ok(kernel(nl::float8_e4m3, nl::float16, nl::float32), {});
  check_ok(kernel(nl::float8_e5m2, nl::bfloat16, nl::float32), {});
  check_failure(trace_failure(kernel(nl::int8, nl::int8, nl::float32), {}), "dtype", line, {"int8"});
  // dst: fp32 only on trn1/trn2, fp32 or bf16 on trn3.
  check_failure(trace_failure(kernel(nl::bfloat16, nl::bfloat16, nl::bfloat16), {}, Target::trn2), "dtype", line,
                {"dst", "bfloat16", "float32"});
  check_failure(trace_failure(kernel(nl::bfloat16, nl::bfloat16, nl::bfloat16), {}, Target::trn1), "dtype", line,
                {"dst"});
  check_ok(kernel(nl::bfloat16, nl::bfloat16, nl::bfloat16), {}, Target::trn3);
  check_failure(trace_failure(kernel(nl::bfloat16, nl::bfloat16, nl::float16), {}, Target::trn3), "dtype", line,
                {"dst", "float16"});
}

TEST_CASE("nc_matmul: the output stays inside one PSUM bank on trn1/trn2", "[core][verifier]") {
  int line = 0;
  auto kernel = [&](int64_t start) {
    return [&line, start]() {
      auto st = nl::ndarray({128, 128}, nl::bfloat16, nl::sbuf);
      auto mv = nl::ndarray({128, 512}, nl::bfloat16, nl::sbuf);
      auto acc = nl::ndarray({128, 1024}, nl::float32, nl::psum);  // two banks per partition
      line = __LINE__ + 1;                                         // the statement below
      isa::nc_matmul(acc(nl::all, nl::ds(start, 512)), st, mv);
    };
  };
  check_ok(kernel(0), {});
  check_ok(kernel(512), {});  // second bank exactly
  check_failure(trace_failure(kernel(256), {}), "psum-bank", line, {"2 KiB", "1024"});
  check_failure(trace_failure(kernel(1), {}, Target::trn1), "psum-bank", line, {"2 KiB"});
  check_ok(kernel(256), {}, Target::trn3);  // v4 may span banks
}

TEST_CASE("nc_matmul: tile_position / tile_size", "[core][verifier]") {
  int line = 0;
  auto kernel = [&](std::vector<int64_t> pos, std::vector<int64_t> size, int64_t KM = 64) {
    return [&line, pos, size, KM]() {
      auto st = nl::ndarray({KM, KM}, nl::bfloat16, nl::sbuf);
      auto mv = nl::ndarray({KM, 512}, nl::bfloat16, nl::sbuf);
      auto acc = nl::ndarray({KM, 512}, nl::float32, nl::psum);
      line = __LINE__ + 1;  // the statement below
      isa::nc_matmul(acc, st, mv, {.tile_position = pos, .tile_size = size});
    };
  };
  check_ok(kernel({64, 64}, {64, 64}), {});
  check_ok(kernel({0, 0}, {128, 128}, 128), {});
  check_ok(kernel({96, 32}, {32, 32}, 32), {}, Target::trn2);
  check_failure(trace_failure(kernel({}, {64, 64}), {}), "matmul-tiling", line, {"both"});
  check_failure(trace_failure(kernel({0, 0}, {}), {}), "matmul-tiling", line, {"both"});
  check_failure(trace_failure(kernel({0, 0}, {48, 64}), {}), "matmul-tiling", line, {"32, 64 or 128"});
  check_failure(trace_failure(kernel({32, 0}, {64, 64}), {}), "matmul-tiling", line, {"multiple"});
  check_failure(trace_failure(kernel({0, 128}, {64, 64}), {}), "matmul-tiling", line, {"128x128"});
  check_failure(trace_failure(kernel({0, 0}, {32, 32}, 32), {}, Target::trn1), "target", line, {"gen3", "trn1"});
}

TEST_CASE("nc_matmul: perf_mode=double_row rules", "[core][verifier]") {
  int line = 0;
  auto kernel = [&](ir::DType t) {
    return [&line, t]() {
      auto st = nl::ndarray({128, 128}, t, nl::sbuf);
      auto mv = nl::ndarray({128, 512}, t, nl::sbuf);
      auto acc = nl::ndarray({128, 512}, nl::float32, nl::psum);
      line = __LINE__ + 1;  // the statement below
      isa::nc_matmul(acc, st, mv, {.perf_mode = isa::matmul_perf_mode::double_row});
    };
  };
  check_failure(trace_failure(kernel(nl::bfloat16), {}), "dtype", line, {"fp8"});
  check_failure(trace_failure(kernel(nl::float8_e4m3), {}), "matmul-shape", line, {"[P, 2, free]"});
  check_failure(trace_failure(kernel(nl::float8_e4m3), {}, Target::trn1), "target", line, {"gen3"});
}

// ---- nc_transpose -------------------------------------------------------------------------------

TEST_CASE("nc_transpose rules", "[core][verifier]") {
  int line = 0;
  auto kernel = [&](std::vector<int64_t> in, ir::Buffer in_buf, std::vector<int64_t> out, ir::Buffer out_buf,
                    isa::engine e = isa::engine::unknown, ir::DType out_t = nl::bfloat16) {
    return [&line, in, in_buf, out, out_buf, e, out_t]() {
      auto data = nl::ndarray(in, nl::bfloat16, in_buf);
      auto dst = nl::ndarray(out, out_t, out_buf);
      line = __LINE__ + 1;  // the statement below
      isa::nc_transpose(dst, data, e);
    };
  };
  using ir::Buffer;
  check_ok(kernel({128, 64}, Buffer::sbuf, {64, 128}, Buffer::psum), {});
  check_ok(kernel({32, 16}, Buffer::psum, {16, 32}, Buffer::sbuf), {});  // Vector Engine
  check_ok(kernel({32, 32}, Buffer::sbuf, {32, 32}, Buffer::sbuf, isa::engine::vector), {});
  check_failure(trace_failure(kernel({128, 64}, Buffer::sbuf, {128, 64}, Buffer::psum), {}), "transpose-shape", line,
                {"[64, 128]"});
  check_failure(trace_failure(kernel({128, 64}, Buffer::sbuf, {64, 128}, Buffer::psum, isa::engine::gpsimd), {}),
                "engine", line, {"gpsimd"});
  check_failure(trace_failure(kernel({128, 64}, Buffer::psum, {64, 128}, Buffer::psum, isa::engine::tensor), {}),
                "buffer", line, {"data", "sbuf"});
  check_failure(trace_failure(kernel({128, 64}, Buffer::sbuf, {64, 128}, Buffer::sbuf, isa::engine::tensor), {}),
                "buffer", line, {"dst", "psum"});
  check_failure(trace_failure(kernel({64, 64}, Buffer::sbuf, {64, 64}, Buffer::sbuf, isa::engine::vector), {}),
                "transpose-shape", line, {"32"});
  check_failure(trace_failure(kernel({64, 16}, Buffer::sbuf, {16, 64}, Buffer::sbuf), {}), "transpose-shape", line,
                {"[32, 32]"});  // engine unknown, SBUF->SBUF picks the Vector Engine
  check_failure(trace_failure(kernel({16, 8}, Buffer::hbm, {128, 1}, Buffer::sbuf, isa::engine::vector), {}), "buffer",
                line, {"data", "hbm"});
  check_failure(
      trace_failure(kernel({128, 64}, Buffer::sbuf, {64, 128}, Buffer::psum, isa::engine::unknown, nl::float32), {}),
      "dtype", line, {"dtype"});
}

// ---- tensor_copy and memset ---------------------------------------------------------------------

TEST_CASE("tensor_copy rules", "[core][verifier]") {
  int line = 0;
  auto kernel = [&](ir::Buffer src_buf, ir::Buffer dst_buf, isa::engine e, std::vector<int64_t> dst_shape = {128, 64}) {
    return [&line, src_buf, dst_buf, e, dst_shape]() {
      auto src = nl::ndarray({128, 64}, nl::float32, src_buf);
      auto dst = nl::ndarray(dst_shape, nl::bfloat16, dst_buf);
      line = __LINE__ + 1;  // the statement below
      isa::tensor_copy(dst, src, e);
    };
  };
  using ir::Buffer;
  check_ok(kernel(Buffer::psum, Buffer::sbuf, isa::engine::vector), {});
  check_ok(kernel(Buffer::sbuf, Buffer::sbuf, isa::engine::gpsimd), {});
  check_ok(kernel(Buffer::psum, Buffer::sbuf, isa::engine::scalar), {}, Target::trn2);
  check_ok(kernel(Buffer::sbuf, Buffer::sbuf, isa::engine::vector, {128, 8, 8}), {});  // free dims flatten
  check_failure(trace_failure(kernel(Buffer::psum, Buffer::sbuf, isa::engine::gpsimd), {}), "buffer", line,
                {"src", "GpSimd", "PSUM"});
  check_failure(trace_failure(kernel(Buffer::sbuf, Buffer::psum, isa::engine::gpsimd), {}), "buffer", line,
                {"dst", "GpSimd"});
  check_failure(trace_failure(kernel(Buffer::psum, Buffer::sbuf, isa::engine::scalar), {}, Target::trn1), "engine",
                line, {"trn2"});
  check_failure(trace_failure(kernel(Buffer::sbuf, Buffer::sbuf, isa::engine::tensor), {}), "engine", line, {"tensor"});
  check_failure(trace_failure(kernel(Buffer::hbm, Buffer::sbuf, isa::engine::vector), {}), "buffer", line,
                {"src", "hbm"});
  check_failure(trace_failure(kernel(Buffer::sbuf, Buffer::sbuf, isa::engine::vector, {64, 128}), {}),
                "partition-mismatch", line, {"64", "128"});
  check_failure(trace_failure(kernel(Buffer::sbuf, Buffer::sbuf, isa::engine::vector, {128, 32}), {}),
                "free-size-mismatch", line, {"32", "64"});
}

TEST_CASE("memset rules", "[core][verifier]") {
  int line = 0;
  auto kernel = [&](ir::DType t, double value, ir::Buffer b = nl::sbuf, isa::engine e = isa::engine::unknown) {
    return [&line, t, value, b, e]() {
      auto dst = nl::ndarray({128, 64}, t, b);
      line = __LINE__ + 1;  // the statement below
      isa::memset(dst, value, e);
    };
  };
  check_ok(kernel(nl::int32, 3), {});
  check_ok(kernel(nl::int8, -100), {});
  check_ok(kernel(nl::float32, 1.5), {});
  check_ok(kernel(nl::bfloat16, -0.25, nl::psum), {});
  check_failure(trace_failure(kernel(nl::int32, 1.5), {}), "dtype", line, {"integer", "1.5"});
  check_failure(trace_failure(kernel(nl::uint8, 0.25), {}), "dtype", line, {"integer"});
  check_failure(trace_failure(kernel(nl::float32, 0, nl::psum, isa::engine::gpsimd), {}), "buffer", line,
                {"GpSimd", "PSUM"});
  check_failure(trace_failure(kernel(nl::float32, 0, nl::sbuf, isa::engine::scalar), {}), "engine", line, {"scalar"});
  check_failure(trace_failure(kernel(nl::float32, 0, nl::hbm), {}), "buffer", line, {"dst", "hbm"});
}

// ---- malformed kernels built by hand: always knit::Error, never a crash ----------------------------

namespace {

ir::Kernel small_kernel() {
  ir::Kernel k = ir::parse(R"(kernel "m" target=trn2 {
  param %0 "a" hbm float32[128, 64] @ "m.py":1
  tensor %1 "s" sbuf float32[128, 64] @ "m.py":2
  tensor %2 "p" psum float32[128, 512] @ "m.py":3
  tensor %3 "b" sbuf bfloat16[128, 512] @ "m.py":4
  tensor %4 "o" shared_hbm float32[128, 64] @ "m.py":5
  dma_copy dst=%1@0[[64,128],[1,64]] src=%0@0[[64,128],[1,64]] @ "m.py":6
  memset dst=%3@0[[512,128],[1,512]] value=1 @ "m.py":7
  nc_matmul dst=%2@0[[512,128],[1,512]] stationary=%3@0[[512,128],[1,128]] moving=%3@0[[512,128],[1,512]] @ "m.py":8
  tensor_copy dst=%1@0[[64,128],[1,64]] src=%2@0[[512,128],[1,64]] @ "m.py":9
  nc_transpose dst=%2@0[[512,64],[1,128]] data=%1@0[[64,128],[1,64]] @ "m.py":10
  dma_copy dst=%4@0[[64,128],[1,64]] src=%1@0[[64,128],[1,64]] @ "m.py":11
  return %4
}
)");
  return k;
}

std::string verify_rule(const ir::Kernel& k, ErrorKind* kind = nullptr) {
  try {
    ir::verify(k);
  } catch (const knit::Error& e) {
    if (kind) *kind = e.kind();
    return e.rule();
  }
  return "<no error>";
}

}  // namespace

TEST_CASE("hand-built kernels: structural errors", "[core][verifier]") {
  REQUIRE(verify_rule(small_kernel()) == "<no error>");
  SECTION("reference to an undeclared tensor") {
    ir::Kernel k = small_kernel();
    std::get<ir::DmaCopy>(k.body[0].op).src.tensor = 9;
    CHECK(verify_rule(k) == "ir-reference");
  }
  SECTION("on-chip view without dims") {
    ir::Kernel k = small_kernel();
    std::get<ir::DmaCopy>(k.body[0].op).dst.dims.clear();
    CHECK(verify_rule(k) == "view-rank");
  }
  SECTION("tensor without a shape") {
    ir::Kernel k = small_kernel();
    k.tensors[0].shape.clear();
    CHECK(verify_rule(k) == "tensor-shape");
  }
  SECTION("a parameter that is not in HBM") {
    ir::Kernel k = small_kernel();
    k.params.push_back(1);
    CHECK(verify_rule(k) == "kernel-param");
  }
  SECTION("an output that is not in HBM, at the tensor's location") {
    ir::Kernel k = small_kernel();
    k.outputs = {4, 1};
    try {
      ir::verify(k);
      FAIL("no error");
    } catch (const knit::Error& e) {
      CHECK(e.rule() == "kernel-output");
      CHECK(e.loc() == SourceLoc{"m.py", 2, 0});
    }
  }
  SECTION("an empty instruction or an undeclared output is still a knit::Error") {
    ir::Kernel k = small_kernel();
    k.body.push_back(ir::Instruction{});  // a DmaCopy with no operands
    CHECK_THROWS_AS(ir::verify(k), knit::Error);
    k.body.back().op = std::monostate{};
    CHECK_THROWS_AS(ir::verify(k), knit::Error);
    ir::Kernel k2 = small_kernel();
    k2.outputs = {42};
    CHECK_THROWS_AS(ir::verify(k2), knit::Error);
  }
  SECTION("a required operand missing from IR text is a knit::Error") {
    const ir::Kernel k = ir::parse(R"(kernel "m" target=trn2 {
  tensor %0 "s" sbuf float32[128, 64]
  memset value=1 @ "m.py":7
  dma_copy src=%0@0[[64,128],[1,64]] @ "m.py":8
  return
}
)");
    ir::Kernel only_memset = k, only_dma = k;
    only_memset.body.resize(1);
    only_dma.body.erase(only_dma.body.begin());
    CHECK_THROWS_AS(ir::verify(only_memset), knit::Error);
    CHECK_THROWS_AS(ir::verify(only_dma), knit::Error);
  }
}

// Regression test for a bug fixed in ir/src/verifier.cpp, verify_instruction.
TEST_CASE("a missing required operand is a user error", "[core][verifier]") {
  const ir::Kernel k = ir::parse(R"(kernel "m" target=trn2 {
  tensor %0 "s" sbuf float32[128, 64]
  memset value=1 @ "m.py":7
  return
}
)");
  ErrorKind kind = ErrorKind::Internal;
  const std::string rule = verify_rule(k, &kind);
  CHECK(rule != "<no error>");
  CHECK(kind == ErrorKind::User);
}

TEST_CASE("randomly corrupted views give knit::Error or pass, never crash", "[core][verifier]") {
  const ir::Kernel base = small_kernel();
  std::mt19937 rng(1234);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const ir::DType dtypes[] = {nl::float32, nl::bfloat16, nl::int8, nl::int32, nl::float8_e4m3, nl::uint16, nl::bool_};
  int errors = 0, passes = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    ir::Kernel k = base;
    ir::Instruction& inst = k.body[pick(0, static_cast<int64_t>(k.body.size()) - 1)];
    // Collect the instruction's views and corrupt one of them.
    std::vector<ir::View*> views;
    std::visit(
        [&](auto& op) {
          if constexpr (!std::is_same_v<std::decay_t<decltype(op)>, std::monostate>)
            op.fields([&](const char*, auto& v) {
              if constexpr (std::is_same_v<std::decay_t<decltype(v)>, ir::View>) views.push_back(&v);
            });
        },
        inst.op);
    REQUIRE_FALSE(views.empty());
    ir::View& v = *views[pick(0, static_cast<int64_t>(views.size()) - 1)];
    switch (pick(0, 4)) {
      case 0: v.tensor = static_cast<int>(pick(-2, 6)); break;
      case 1: v.dtype = dtypes[pick(0, 6)]; break;
      case 2: v.offset = pick(-300, 70000); break;
      case 3:
        v.dims.resize(pick(0, 4));
        for (ir::ApDim& d : v.dims) d = {pick(-600, 600), pick(-1, 300)};
        break;
      default:
        if (!v.dims.empty()) v.dims[pick(0, static_cast<int64_t>(v.dims.size()) - 1)] = {pick(-600, 600), pick(0, 600)};
        break;
    }
    try {
      ir::verify(k);
      ++passes;
    } catch (const knit::Error&) {
      ++errors;
    }
  }
  CHECK(errors > 0);
  CHECK(errors + passes == 3000);
}
