// Engine programs executed by the simulator (sim::run_program): every example kernel
// (examples/kernels/cpp) lowered for trn1, trn2 and trn3 gives the reference interpreter's output
// bytes under program-order, round-robin and random queue interleavings, with the race checker on;
// a program whose synchronization is broken by hand is caught as a race or a deadlock.
#include <random>

#include <catch2/catch.hpp>

#include "kernels.h"
#include "knit/codegen/lower.h"
#include "knit/ir/text.h"
#include "test_util.h"

using namespace knit;
using codegen::EngineInstr;
using codegen::EngineProgram;
using sim::HostTensor;
using test::host;
using test::random_values;
using test::rounded;

namespace {

struct Example {
  ir::Kernel kernel;
  std::vector<HostTensor> args;
};

// The example kernels at the shapes of test_examples.cpp, traced for trn2 (lower re-targets them).
Example tensor_add_example() {
  const int64_t R = 384, C = 1024;
  const ir::DType d = ir::DType::bfloat16;
  return {
      trace("tensor_add", examples::tensor_add, {arg({R, C}, d, "a"), arg({R, C}, d, "b")}),
      {host(d, {R, C}, rounded(d, random_values(R * C, 11))), host(d, {R, C}, rounded(d, random_values(R * C, 12)))}};
}

Example ragged_tensor_add_example() {
  const int64_t R = 200, C = 64;
  const ir::DType d = ir::DType::float32;
  return {trace("tensor_add", examples::tensor_add, {arg({R, C}, d, "a"), arg({R, C}, d, "b")}),
          {host(d, {R, C}, random_values(R * C, 13)), host(d, {R, C}, random_values(R * C, 14))}};
}

Example matmul_example() {
  const int64_t K = 512, M = 512, N = 512;
  const ir::DType d = ir::DType::bfloat16;
  return {
      trace("matmul", examples::matmul, {arg({K, M}, d, "lhsT"), arg({K, N}, d, "rhs")}),
      {host(d, {K, M}, rounded(d, random_values(K * M, 21))), host(d, {K, N}, rounded(d, random_values(K * N, 22)))}};
}

Example softmax_example() {
  const int64_t R = 256, C = 512;
  return {trace("softmax", examples::softmax, {arg({R, C}, nl::float32, "x")}),
          {host(ir::DType::float32, {R, C}, random_values(R * C, 31, -8.0f, 8.0f))}};
}

Example rmsnorm_example() {
  const int64_t R = 256, C = 1024;
  const ir::DType d = ir::DType::bfloat16;
  return {trace("rmsnorm", examples::rmsnorm, {arg({R, C}, d, "x"), arg({C}, d, "w")}),
          {host(d, {R, C}, rounded(d, random_values(R * C, 41))),
           host(d, {C}, rounded(d, random_values(C, 42, 0.5f, 1.5f)))}};
}

Example transpose_example() {
  const int64_t M = 256, N = 384;
  const ir::DType d = ir::DType::bfloat16;
  return {trace("transpose", examples::transpose, {arg({M, N}, d, "x")}),
          {host(d, {M, N}, rounded(d, random_values(M * N, 51)))}};
}

Example gather_rows_example() {
  const int64_t V = 1000, D = 64, N = 300;  // two full 128-id tiles in a device loop, a tail of 44
  std::vector<int32_t> ids(N);
  std::mt19937 rng(61);
  for (int32_t& id : ids) id = static_cast<int32_t>(rng() % V);
  return {trace("gather_rows", examples::gather_rows, {arg({V, D}, nl::float32, "table"), arg({N}, nl::int32, "ids")}),
          {host(ir::DType::float32, {V, D}, random_values(V * D, 62)), test::ints({N}, ids)}};
}

struct ScheduleCase {
  sim::Schedule schedule;
  uint64_t seed;
  const char* name;
};
const ScheduleCase kSchedules[] = {
    {sim::Schedule::program_order, 0, "program_order"}, {sim::Schedule::round_robin, 0, "round_robin"},
    {sim::Schedule::random, 1, "random seed 1"},        {sim::Schedule::random, 2, "random seed 2"},
    {sim::Schedule::random, 7, "random seed 7"},        {sim::Schedule::random, 123456789, "random seed 123456789"},
};

// Lowers `ex` for every target and checks that each schedule reproduces interpret()'s bytes
// (outputs, and the arguments, which a kernel may write in place).
void check_matches_interpreter(const Example& ex) {
  for (ir::Target target : {ir::Target::trn1, ir::Target::trn2, ir::Target::trn3}) {
    const EngineProgram program = codegen::lower(ex.kernel, {.target = target});
    REQUIRE(program.kernel.target == target);
    std::vector<HostTensor> ref_args = ex.args;
    const std::vector<HostTensor> ref = sim::interpret(program.kernel, ref_args).outputs;
    REQUIRE(!ref.empty());
    for (const ScheduleCase& s : kSchedules) {
      INFO(ex.kernel.name << " on " << ir::to_string(target) << ", " << s.name);
      std::vector<HostTensor> args = ex.args;
      sim::InterpretOptions options;
      options.schedule = s.schedule;
      options.seed = s.seed;
      options.check_races = true;
      const std::vector<HostTensor> out = sim::run_program(program, args, options).outputs;
      REQUIRE(out.size() == ref.size());
      for (size_t i = 0; i < out.size(); ++i) {
        CHECK(out[i].shape == ref[i].shape);
        CHECK(out[i].dtype == ref[i].dtype);
        CHECK(out[i].bytes == ref[i].bytes);
      }
      for (size_t i = 0; i < args.size(); ++i) CHECK(args[i].bytes == ref_args[i].bytes);
    }
  }
}

std::string where(const ir::Instruction& inst) { return inst.loc.file + ":" + std::to_string(inst.loc.line); }

EngineInstr& instr_at(EngineProgram& p, uint32_t ir) {
  for (codegen::Region& r : p.regions)
    for (auto& queue : r.queues)
      for (EngineInstr& e : queue)
        if (e.ir == ir) return e;
  FAIL("body instruction " << ir << " is on no queue");
  throw;  // unreachable
}

// Runs `program` and expects a knit::Error with `rule`; returns its message.
std::string expect_run_error(const EngineProgram& program, const std::vector<HostTensor>& inputs,
                             const sim::InterpretOptions& options, const std::string& rule) {
  std::vector<HostTensor> args = inputs;
  try {
    sim::run_program(program, args, options);
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.rule() == rule);
    return e.message();
  }
  FAIL("expected a knit::Error with rule " << rule);
  return {};
}

// Load (dma0), exp on act, store (dma3): one cross-queue RAW on each side of the activation.
const char* const kChain = R"(kernel "chain" target=trn2 {
  param %0 "x" hbm float32[128, 64]
  tensor %1 "out" shared_hbm float32[128, 64]
  tensor %2 "t" sbuf float32[128, 64]
  tensor %3 "u" sbuf float32[128, 64]
  dma_copy dst=%2@0[[64,128],[1,64]] src=%0@0[[64,128],[1,64]] @ "chain.py":10
  activation dst=%3@0[[64,128],[1,64]] op=exp data=%2@0[[64,128],[1,64]] @ "chain.py":11
  dma_copy dst=%1@0[[64,128],[1,64]] src=%3@0[[64,128],[1,64]] @ "chain.py":12
  return %1
}
)";

}  // namespace

TEST_CASE("lowered tensor_add runs like the interpreter under every schedule", "[codegen][engine-run]") {
  check_matches_interpreter(tensor_add_example());
  check_matches_interpreter(ragged_tensor_add_example());
}

TEST_CASE("lowered matmul runs like the interpreter under every schedule", "[codegen][engine-run]") {
  check_matches_interpreter(matmul_example());
}

TEST_CASE("lowered softmax runs like the interpreter under every schedule", "[codegen][engine-run]") {
  check_matches_interpreter(softmax_example());
}

TEST_CASE("lowered rmsnorm runs like the interpreter under every schedule", "[codegen][engine-run]") {
  check_matches_interpreter(rmsnorm_example());
}

TEST_CASE("lowered transpose runs like the interpreter under every schedule", "[codegen][engine-run]") {
  check_matches_interpreter(transpose_example());
}

TEST_CASE("lowered gather_rows runs like the interpreter under every schedule", "[codegen][engine-run]") {
  check_matches_interpreter(gather_rows_example());
}

TEST_CASE("the race checker reports a cross-queue RAW left without its wait", "[codegen][engine-run]") {
  const std::vector<HostTensor> args = {host(ir::DType::float32, {128, 64}, random_values(128 * 64, 5))};
  EngineProgram program = codegen::lower(ir::parse(kChain));
  EngineInstr& act = instr_at(program, 1);
  REQUIRE(act.queue == codegen::Queue::act);
  REQUIRE(act.waits == std::vector<codegen::Wait>{{codegen::Queue::dma0, 1}});

  // The synchronized program runs clean under the checker.
  std::vector<HostTensor> ok_args = args;
  sim::InterpretOptions options;
  options.schedule = sim::Schedule::program_order;
  options.check_races = true;
  const HostTensor expected = sim::run_program(program, ok_args, options).outputs[0];

  act.waits.clear();  // bypass the sync pass
  const std::string msg = expect_run_error(program, args, options, "race");
  CHECK_THAT(msg, Catch::Contains("activation (chain.py:11) on queue act reads"));
  CHECK_THAT(msg, Catch::Contains("dma_copy (chain.py:10) on queue dma0 writes"));

  // Without the checker, program order happens to run the two in the right order.
  options.check_races = false;
  std::vector<HostTensor> unchecked_args = args;
  CHECK(sim::run_program(program, unchecked_args, options).outputs[0].bytes == expected.bytes);
}

TEST_CASE("the race checker catches a missing wait in a lowered example", "[codegen][engine-run]") {
  const Example ex = tensor_add_example();
  EngineProgram program = codegen::lower(ex.kernel);
  // The first instruction that waits for a RAW: the tensor_tensor of the first row tile, which
  // reads a_tile and b_tile loaded on two DMA queues.
  const std::vector<codegen::Queue> queues = codegen::assign_engines(program.kernel);
  const std::vector<codegen::Dependence> deps = codegen::dependences(program.kernel, program.plan, queues);
  const codegen::Dependence* raw = nullptr;
  for (const codegen::Dependence& d : deps)
    if (d.kind == codegen::Dependence::Kind::raw && !instr_at(program, d.to).waits.empty()) {
      raw = &d;
      break;
    }
  REQUIRE(raw != nullptr);
  const ir::Instruction& consumer = program.kernel.body[raw->to];
  REQUIRE(consumer.opcode() == ir::Opcode::tensor_tensor);
  instr_at(program, raw->to).waits.clear();

  sim::InterpretOptions options;
  options.schedule = sim::Schedule::program_order;
  const std::string msg = expect_run_error(program, ex.args, options, "race");
  CHECK_THAT(msg, Catch::Contains("tensor_tensor (" + where(consumer) + ")"));
  // The earlier side is one of the loads the tensor_tensor depends on.
  bool names_producer = false;
  for (const codegen::Dependence& d : deps)
    if (d.to == raw->to)
      names_producer |= msg.find("dma_copy (" + where(program.kernel.body[d.from]) + ")") != std::string::npos;
  CHECK(names_producer);
}

TEST_CASE("a wait for a count that never comes is a deadlock, not a hang", "[codegen][engine-run]") {
  const std::vector<HostTensor> args = {host(ir::DType::float32, {128, 64}, random_values(128 * 64, 6))};
  for (sim::Schedule schedule : {sim::Schedule::program_order, sim::Schedule::round_robin, sim::Schedule::random}) {
    EngineProgram program = codegen::lower(ir::parse(kChain));
    // dma0 runs one instruction in the region: wait for a second one.
    instr_at(program, 1).waits = {{codegen::Queue::dma0, 2}};
    sim::InterpretOptions options;
    options.schedule = schedule;
    const std::string msg = expect_run_error(program, args, options, "deadlock");
    CHECK_THAT(msg, Catch::Contains("act: activation (chain.py:11) waits dma0>=2 (is 1)"));
    // The store waits for the activation, so it is stuck too.
    CHECK_THAT(msg, Catch::Contains("dma3: dma_copy (chain.py:12) waits act>=1 (is 0)"));
  }
  // A wait on a queue with no instructions in the region at all.
  EngineProgram program = codegen::lower(ir::parse(kChain));
  instr_at(program, 2).waits.push_back({codegen::Queue::pe, 1});
  const std::string msg = expect_run_error(program, args, {}, "deadlock");
  CHECK_THAT(msg, Catch::Contains("waits act>=1 (is 1) pe>=1 (is 0)"));
}
