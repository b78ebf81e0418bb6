// The codegen passes (codegen/include/knit/codegen/lower.h) fed directly from IR text: engine
// assignment, dependences on byte ranges, semaphore waits and program statistics, SBUF/PSUM
// allocation, the engine program's binary form and the KNIT_DEBUG per-pass dumps. Expected values
// are worked out by hand from the kernels written here (queues, positions, byte offsets).
// Execution of lowered programs is tested in test_engine_run.cpp.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "kernels.h"
#include "knit/codegen/access.h"
#include "knit/codegen/allocate.h"
#include "knit/codegen/capacity_error.h"
#include "knit/codegen/engine_program.h"
#include "knit/codegen/lower.h"
#include "knit/ir/liveness.h"
#include "knit/ir/text.h"
#include "knit/ir/verifier.h"
#include "knit/sim/interpreter.h"
#include "test_util.h"

using namespace knit;
using codegen::Dependence;
using codegen::EngineInstr;
using codegen::EngineProgram;
using codegen::Queue;
using codegen::Wait;

namespace {

// Every pass of the pipeline run by hand on a parsed kernel, each result kept for inspection.
struct Passes {
  ir::Kernel kernel;
  std::vector<ir::LiveRange> live;
  codegen::MemoryPlan plan;
  std::vector<Queue> queues;
  std::vector<Dependence> deps;
  EngineProgram program;
};

Passes run_passes(const std::string& text) {
  Passes p;
  p.kernel = ir::parse(text, "codegen.ir");
  ir::verify(p.kernel);
  p.live = ir::live_ranges(p.kernel, ir::match_blocks(p.kernel));
  p.plan = codegen::allocate(p.kernel, p.live);
  p.queues = codegen::assign_engines(p.kernel);
  p.deps = codegen::dependences(p.kernel, p.plan, p.queues);
  p.program = codegen::build_program(p.kernel, p.plan, p.queues, p.deps);
  return p;
}

// Dependences as "from->to kind" strings, so a whole set compares (and prints) at once.
std::set<std::string> dep_set(const std::vector<Dependence>& deps) {
  static const char* kinds[] = {"raw", "war", "waw"};
  std::set<std::string> out;
  for (const Dependence& d : deps)
    out.insert(std::to_string(d.from) + "->" + std::to_string(d.to) + " " + kinds[static_cast<int>(d.kind)]);
  return out;
}

// The dependences whose consumer is body index `to`.
std::set<std::string> deps_into(const std::vector<Dependence>& deps, uint32_t to) {
  std::vector<Dependence> some;
  for (const Dependence& d : deps)
    if (d.to == to) some.push_back(d);
  return dep_set(some);
}

// The engine instruction of body index `ir` (FAIL if it sits on no queue).
const EngineInstr& instr_at(const EngineProgram& p, uint32_t ir) {
  for (const codegen::Region& r : p.regions)
    for (const auto& queue : r.queues)
      for (const EngineInstr& e : queue)
        if (e.ir == ir) return e;
  FAIL("body instruction " << ir << " is on no queue");
  throw;  // unreachable
}

// Waits as "queue>=count" strings, in the order the program lists them.
std::vector<std::string> waits_of(const EngineProgram& p, uint32_t ir) {
  std::vector<std::string> out;
  for (const Wait& w : instr_at(p, ir).waits)
    out.push_back(std::string(codegen::queue_name(w.queue)) + ">=" + std::to_string(w.count));
  return out;
}

// Runs `f` and expects a knit::Error with `rule`; returns it for further checks.
template <class F>
Error expect_error(F&& f, const std::string& rule) {
  try {
    f();
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.rule() == rule);
    return e;
  }
  FAIL("expected a knit::Error with rule " << rule);
  throw;  // unreachable
}

// A fresh directory under the system temp directory, removed at the end of the scope.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& name) {
    path = std::filesystem::temp_directory_path() / ("knit-codegen-test-" + name + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

// ---- engine assignment -----------------------------------------------------------------------

// Instructions 9, 10 and 14 are barriers; the DMA counter runs on across them.
const char* const kEngines = R"(kernel "engines" target=trn2 {
  param %0 "x" hbm float32[128, 64]
  tensor %1 "out" shared_hbm float32[128, 64]
  tensor %2 "a" sbuf float32[128, 64]
  tensor %3 "b" sbuf float32[128, 64]
  tensor %4 "acc" psum float32[64, 64]
  tensor %5 "c" sbuf float32[128, 64]
  tensor %6 "d" sbuf float32[128, 64]
  dma_copy dst=%2@0[[64,128],[1,64]] src=%0@0[[64,128],[1,64]]
  dma_copy dst=%3@0[[64,128],[1,64]] src=%0@0[[64,128],[1,64]]
  nc_matmul dst=%4@0[[64,64],[1,64]] stationary=%2@0[[64,128],[1,64]] moving=%3@0[[64,128],[1,64]]
  activation dst=%5@0[[64,128],[1,64]] op=exp data=%2@0[[64,128],[1,64]]
  iota dst=%6@0[[64,128],[1,64]] pattern=[[1,64]] channel_multiplier=64
  affine_select dst=%6@0[[64,128],[1,64]] pattern=[[-1,64]] channel_multiplier=1 on_true_tile=%6@0[[64,128],[1,64]] on_false_value=0 cmp_op=greater_equal
  tensor_tensor dst=%5@0[[64,128],[1,64]] data1=%5@0[[64,128],[1,64]] data2=%3@0[[64,128],[1,64]] op=add
  tensor_tensor dst=%6@0[[64,128],[1,64]] data1=%6@0[[64,128],[1,64]] data2=%2@0[[64,128],[1,64]] op=add engine=gpsimd
  tensor_scalar dst=%5@0[[64,128],[1,64]] data=%5@0[[64,128],[1,64]] op0=multiply operand0=2 engine=scalar
  register_move dst=r0 src=2
  loop iv=r1 start=0 stop=r0
    dma_copy dst=%1@0[[64,128],[1,64]] src=%5@0[[64,128],[1,64]]
    dma_copy dst=%1@0[[64,128],[1,64]] src=%6@0[[64,128],[1,64]]
    dma_copy dst=%1@0[[64,128],[1,64]] src=%3@0[[64,128],[1,64]]
  end
  tensor_tensor dst=%6@0[[64,128],[1,64]] data1=%6@0[[64,128],[1,64]] data2=%2@0[[64,128],[1,64]] op=power
  tensor_scalar dst=%5@0[[64,128],[1,64]] data=%5@0[[64,128],[1,64]] op0=add operand0=1
  dma_copy dst=%1@0[[64,128],[1,64]] src=%5@0[[64,128],[1,64]]
  return %1
}
)";

TEST_CASE("assign_engines follows the engine rules; loads round-robin, stores take dma3", "[codegen]") {
  const Passes p = run_passes(kEngines);
  REQUIRE(p.kernel.body.size() == 18);
  const std::vector<std::pair<uint32_t, Queue>> expected = {
      {0, Queue::dma0},                                         // dma_copy
      {1, Queue::dma1},                                         // dma_copy
      {2, Queue::pe},                                           // nc_matmul
      {3, Queue::act},                                          // activation
      {4, Queue::pool},                                         // iota
      {5, Queue::pool},                                         // affine_select
      {6, Queue::dve},                                          // tensor_tensor, engine unknown
      {7, Queue::pool},                                         // tensor_tensor engine=gpsimd
      {8, Queue::act},                                          // tensor_scalar engine=scalar
      {11, Queue::dma3},                                        // stores to HBM: the last DMA queue
      {12, Queue::dma3}, {13, Queue::dma3}, {15, Queue::pool},  // tensor_tensor op=power, engine unknown: GpSimd only
      {16, Queue::act},                                         // tensor_scalar, engine open: ScalarE finishes it first
      {17, Queue::dma3},
  };
  for (const auto& [ir, queue] : expected) {
    INFO("body " << ir << ": " << ir::print(p.kernel, p.kernel.body[ir]));
    CHECK(codegen::queue_name(p.queues[ir]) == std::string(codegen::queue_name(queue)));
    // The program puts it on that queue.
    CHECK(instr_at(p.program, ir).queue == queue);
  }

  // Barriers (register_move, loop, end) are on no queue and start no region; the regions are the
  // stretches between them.
  for (uint32_t b : {9u, 10u, 14u}) {
    CHECK(codegen::is_barrier(p.kernel.body[b]));
    for (const codegen::Region& r : p.program.regions)
      for (const auto& queue : r.queues)
        for (const EngineInstr& e : queue) CHECK(e.ir != b);
    CHECK(p.program.region_at[b] == -1);
  }
  REQUIRE(p.program.regions.size() == 3);
  CHECK(p.program.regions[0].begin == 0);
  CHECK(p.program.regions[0].end == 9);
  CHECK(p.program.regions[1].begin == 11);
  CHECK(p.program.regions[1].end == 14);
  CHECK(p.program.regions[2].begin == 15);
  CHECK(p.program.regions[2].end == 18);
  CHECK(p.program.region_at[11] == 1);
  codegen::check_structure(p.program);

  // lower() runs the same passes: same regions and queues.
  const EngineProgram lowered = codegen::lower(p.kernel);
  CHECK(lowered.regions == p.program.regions);
}

// nki.isa.nc_transpose: nc_transpose with engine=unknown picks the engine by buffers, and the verifier
// (ir/src/verify_data.cpp, check(NcTranspose)) resolves SBUF -> SBUF to the Vector Engine
// (<= [32, 32]); only SBUF -> PSUM is a Tensor Engine transpose. The Tensor Engine cannot write SBUF.
TEST_CASE("assign_engines puts an SBUF to SBUF nc_transpose on the Vector Engine", "[codegen]") {
  const Passes p = run_passes(R"(kernel "vt" target=trn2 {
  param %0 "x" hbm float32[32, 32]
  tensor %1 "out" shared_hbm float32[32, 32]
  tensor %2 "a" sbuf float32[32, 32]
  tensor %3 "b" sbuf float32[32, 32]
  tensor %4 "c" psum float32[32, 32]
  dma_copy dst=%2@0[[32,32],[1,32]] src=%0@0[[32,32],[1,32]]
  nc_transpose dst=%3@0[[32,32],[1,32]] data=%2@0[[32,32],[1,32]]
  nc_transpose dst=%4@0[[32,32],[1,32]] data=%2@0[[32,32],[1,32]]
  dma_copy dst=%1@0[[32,32],[1,32]] src=%3@0[[32,32],[1,32]]
  return %1
}
)");
  CHECK(p.queues[2] == Queue::pe);   // SBUF -> PSUM: Tensor Engine
  CHECK(p.queues[1] == Queue::dve);  // SBUF -> SBUF: Vector Engine
}

// ---- dependences -----------------------------------------------------------------------------

TEST_CASE("dependences finds RAW, WAR and WAW across queues", "[codegen]") {
  const Passes p = run_passes(R"(kernel "deps" target=trn2 {
  param %0 "x" hbm float32[128, 64]
  tensor %1 "out" shared_hbm float32[128, 64]
  tensor %2 "t" sbuf float32[128, 64]
  tensor %3 "u" sbuf float32[128, 64]
  dma_copy dst=%2@0[[64,128],[1,64]] src=%0@0[[64,128],[1,64]]
  activation dst=%3@0[[64,128],[1,64]] op=exp data=%2@0[[64,128],[1,64]]
  dma_copy dst=%2@0[[64,128],[1,64]] src=%0@0[[64,128],[1,64]]
  tensor_scalar dst=%3@0[[64,128],[1,64]] data=%2@0[[64,128],[1,64]] op0=add operand0=1 engine=vector
  dma_copy dst=%1@0[[64,128],[1,64]] src=%3@0[[64,128],[1,64]]
  return %1
}
)");
  // Queues: 0 dma0, 1 act, 2 dma1, 3 dve (named), 4 dma3 (stores take dma3).
  CHECK(dep_set(p.deps) == std::set<std::string>{
                               "0->1 raw",  // act reads t loaded by dma0
                               "0->2 waw",  // dma1 reloads t that dma0 wrote
                               "1->2 war",  // ... and that act read
                               "2->3 raw",  // dve reads the reloaded t
                               "1->3 waw",  // dve overwrites u, written by act
                               "3->4 raw",  // the store reads u
                           });
}

TEST_CASE("dependences see byte ranges: disjoint halves of a tile do not conflict", "[codegen]") {
  // 0 (dve) writes all of t (and places it); 1 (dma0) and 2 (dma1) load its left and right halves;
  // 3 (dma3) stores all of t.
  const Passes p = run_passes(R"(kernel "halves" target=trn2 {
  param %0 "x" hbm float32[128, 64]
  tensor %1 "out" shared_hbm float32[128, 64]
  tensor %2 "t" sbuf float32[128, 64]
  memset dst=%2@0[[64,128],[1,64]] value=0
  dma_copy dst=%2@0[[64,128],[1,32]] src=%0@0[[64,128],[1,32]]
  dma_copy dst=%2@32[[64,128],[1,32]] src=%0@32[[64,128],[1,32]]
  dma_copy dst=%1@0[[64,128],[1,64]] src=%2@0[[64,128],[1,64]]
  return %1
}
)");
  // No 1->2: the halves are bytes [0, 128) and [128, 256) of each partition. The store reads
  // bytes last written by 1 and 2 only, so nothing orders it after the memset directly.
  CHECK(dep_set(p.deps) == std::set<std::string>{"0->1 waw", "0->2 waw", "1->3 raw", "2->3 raw"});
  // DMA bytes: two half loads (128 x 32 fp32) and the whole store.
  CHECK(p.program.stats().dma_bytes == 2 * 128 * 32 * 4 + 128 * 64 * 4);
}

namespace {

// Two [128, 64] float32 tiles (256 bytes per partition) pinned at byte offsets 0 and `b_offset`:
// overlapping when b_offset < 256. 0 (dma0) loads a, 1 (dma1) loads b, 2 (dma3) stores a.
std::string pinned_pair(int b_offset) {
  return R"(kernel "pins" target=trn2 {
  param %0 "x" hbm float32[128, 64]
  tensor %1 "out" shared_hbm float32[128, 64]
  tensor %2 "a" sbuf float32[128, 64] address=(0, 0)
  tensor %3 "b" sbuf float32[128, 64] address=(0, )" +
         std::to_string(b_offset) + R"()
  dma_copy dst=%2@0[[64,128],[1,64]] src=%0@0[[64,128],[1,64]]
  dma_copy dst=%3@0[[64,128],[1,64]] src=%0@0[[64,128],[1,64]]
  dma_copy dst=%1@0[[64,128],[1,64]] src=%2@0[[64,128],[1,64]]
  dma_copy dst=%1@0[[64,128],[1,64]] src=%3@0[[64,128],[1,64]]
  return %1
}
)";
}

}  // namespace

TEST_CASE("dependences see aliasing through overlapping address= pins", "[codegen]") {
  SECTION("overlapping pins: b's load overwrites bytes [128, 256) of a") {
    const Passes p = run_passes(pinned_pair(128));
    REQUIRE(p.plan.tensors[3]->offset == 128);
    // 3 stores b after 2 to the same HBM bytes: both stores are on dma3, whose order keeps them in
    // order, so that WAW needs no cross-queue dependence.
    CHECK(dep_set(p.deps) == std::set<std::string>{"0->1 waw", "0->2 raw", "1->2 raw", "1->3 raw"});
  }
  SECTION("disjoint pins: the two loads are independent") {
    const Passes p = run_passes(pinned_pair(256));
    REQUIRE(p.plan.tensors[3]->offset == 256);
    CHECK(dep_set(p.deps) == std::set<std::string>{"0->2 raw", "1->3 raw"});  // (stores in dma3's order)
  }
}

TEST_CASE("dependences never cross a barrier", "[codegen]") {
  // Producer / consumer pairs inside one region, and across the loop block's barriers.
  const Passes p = run_passes(R"(kernel "barrier" target=trn2 {
  param %0 "x" hbm float32[128, 64]
  tensor %1 "out" shared_hbm float32[128, 64]
  tensor %2 "t" sbuf float32[128, 64]
  tensor %3 "u" sbuf float32[128, 64]
  tensor %4 "v" sbuf float32[128, 64]
  dma_copy dst=%2@0[[64,128],[1,64]] src=%0@0[[64,128],[1,64]]
  activation dst=%3@0[[64,128],[1,64]] op=exp data=%2@0[[64,128],[1,64]]
  loop iv=r0 start=0 stop=2
    tensor_scalar dst=%4@0[[64,128],[1,64]] data=%3@0[[64,128],[1,64]] op0=add operand0=1
    dma_copy dst=%1@0[[64,128],[1,64]] src=%4@0[[64,128],[1,64]]
  end
  tensor_scalar dst=%3@0[[64,128],[1,64]] data=%4@0[[64,128],[1,64]] op0=add operand0=1 engine=gpsimd
  dma_copy dst=%1@0[[64,128],[1,64]] src=%3@0[[64,128],[1,64]]
  return %1
}
)");
  // 0 dma0 -> 1 act in the first region, 3 dve -> 4 dma3 inside the loop, 6 pool -> 7 dma3 after
  // it. 3 reads u written by 1, 6 reads v written by 3 and overwrites u read by 3, but the
  // loop and end barriers drain every queue in between: no dependence crosses them.
  CHECK(dep_set(p.deps) == std::set<std::string>{"0->1 raw", "3->4 raw", "6->7 raw"});
  REQUIRE(p.program.regions.size() == 3);
  CHECK(waits_of(p.program, 3).empty());
  CHECK(waits_of(p.program, 6).empty());
  CHECK(waits_of(p.program, 7) == std::vector<std::string>{"pool>=1"});
}

// The kind of a dependence of an in-place update (dst and data the same bytes) on the producer
// of its input: the consumer reads what the producer wrote, so the dependence is a RAW (it is a
// WAW too, but the read is what makes the consumer need the producer's data; the dump in
// 05-dependences.txt reports this kind).
TEST_CASE("an in-place update depends on its input's producer as a RAW", "[codegen]") {
  const Passes p = run_passes(R"(kernel "inplace" target=trn2 {
  param %0 "x" hbm float32[128, 64]
  tensor %1 "out" shared_hbm float32[128, 64]
  tensor %2 "t" sbuf float32[128, 64]
  dma_copy dst=%2@0[[64,128],[1,64]] src=%0@0[[64,128],[1,64]]
  activation dst=%2@0[[64,128],[1,64]] op=exp data=%2@0[[64,128],[1,64]]
  dma_copy dst=%1@0[[64,128],[1,64]] src=%2@0[[64,128],[1,64]]
  return %1
}
)");
  CHECK(deps_into(p.deps, 1) == std::set<std::string>{"0->1 raw"});
}

// ---- byte-range accesses -----------------------------------------------------------------------

TEST_CASE("instruction_accesses gives each operand's byte range inside a partition", "[codegen]") {
  const Passes p = run_passes(R"(kernel "ranges" target=trn2 {
  param %0 "x" hbm float32[128, 64]
  tensor %1 "out" shared_hbm float32[128, 64]
  tensor %2 "t" sbuf float32[128, 64]
  tensor %3 "u" sbuf float32[128, 64]
  dma_copy dst=%2@0[[64,128],[1,64]] src=%0@0[[64,128],[1,64]]
  tensor_copy dst=%3@1[[64,64],[2,16]] src=%2@128[[64,64],[1,16]]
  tensor_copy dst=%3@63[[64,128],[-1,16]] src=%2@0[[64,128],[1,16]]
  dma_copy dst=%1@64[[64,2],[1,8]] src=%3@0[[64,2],[1,8]]
  return %1
}
)");
  // t at bytes [0, 256) of each partition, u at [256, 512).
  REQUIRE(p.plan.tensors[2]->offset == 0);
  REQUIRE(p.plan.tensors[3]->offset == 256);
  const std::vector<std::vector<int>> places = codegen::placements(p.kernel, p.live);
  CHECK(places[1] == std::vector<int>{3});
  auto ranges = [&](uint32_t i) {
    std::vector<std::string> out;
    for (const codegen::Access& a : codegen::instruction_accesses(p.kernel, p.plan, p.kernel.body[i], places[i]))
      out.push_back(std::string(a.operand) + (a.write ? " w [" : " r [") + std::to_string(a.lo) + ", " +
                    std::to_string(a.hi) + ")");
    return out;
  };
  // Placing u writes all of it; the strided dst covers elements 1, 3, ..., 31 (bytes 4..127,
  // gaps included); the src starts at partition 2 (offset 128 = 2 x 64), byte 0.
  // Reads come first (an instruction reads its inputs before writing).
  CHECK(ranges(1) == std::vector<std::string>{"src r [0, 64)", "allocation w [256, 512)", "dst w [260, 384)"});
  // A reversed dst: elements 63 down to 48.
  CHECK(ranges(2) == std::vector<std::string>{"src r [0, 64)", "dst w [448, 512)"});
  // HBM: flat elements 64..71 and 128..135 of out, bytes [256, 544).
  CHECK(ranges(3) == std::vector<std::string>{"src r [256, 288)", "dst w [256, 544)"});
}

TEST_CASE("AccessTracker reports the conflicting earlier accesses of each byte", "[codegen]") {
  codegen::AccessTracker tracker;
  std::set<std::string> seen;
  auto record = [&](uint64_t memory, int64_t lo, int64_t hi, bool write, int queue, uint32_t ir) {
    seen.clear();
    tracker.record(codegen::Access{memory, lo, hi, write, "x"}, codegen::Epoch{queue, 0, ir},
                   [&](const codegen::Epoch& e, bool was_write) {
                     seen.insert(std::to_string(e.ir) + (was_write ? " write" : " read"));
                   });
    return seen;
  };
  using S = std::set<std::string>;
  CHECK(record(1, 0, 100, true, 0, 0) == S{});
  CHECK(record(1, 50, 150, false, 1, 1) == S{"0 write"});  // overlaps [50, 100)
  CHECK(record(1, 120, 200, false, 2, 2) == S{});          // never written, reads do not conflict
  CHECK(record(1, 0, 200, true, 3, 3) == S{"0 write", "1 read", "2 read"});
  CHECK(record(2, 0, 200, true, 0, 4) == S{});           // another memory
  CHECK(record(1, 0, 10, false, 0, 5) == S{"3 write"});  // the write replaced every earlier access
  CHECK(record(1, 10, 10, true, 0, 6) == S{});           // empty range
  tracker.clear();
  CHECK(record(1, 0, 200, true, 1, 7) == S{});
}

// ---- synchronization and statistics -----------------------------------------------------------

// A on dma0 -> B on act -> C on pool, where C also reads A's tile; then a same-queue consumer of C
// and a store. Positions: 0 dma0.0, 1 act.0, 2 pool.0, 3 pool.1, 4 dma3.0 (stores take dma3).
const char* const kSync = R"(kernel "sync" target=trn2 {
  param %0 "x" hbm float32[128, 64]
  tensor %1 "out" shared_hbm float32[128, 64]
  tensor %2 "a" sbuf float32[128, 64] @ "sync.py":3
  tensor %3 "b" sbuf float32[128, 64] @ "sync.py":4
  tensor %4 "c" sbuf float32[128, 64] @ "sync.py":5
  dma_copy dst=%2@0[[64,128],[1,64]] src=%0@0[[64,128],[1,64]] @ "sync.py":10
  activation dst=%3@0[[64,128],[1,64]] op=exp data=%2@0[[64,128],[1,64]] @ "sync.py":11
  tensor_tensor dst=%4@0[[64,128],[1,64]] data1=%2@0[[64,128],[1,64]] data2=%3@0[[64,128],[1,64]] op=add engine=gpsimd @ "sync.py":12
  tensor_scalar dst=%4@0[[64,128],[1,64]] data=%4@0[[64,128],[1,64]] op0=multiply operand0=2 engine=gpsimd @ "sync.py":13
  dma_copy dst=%1@0[[64,128],[1,64]] src=%4@0[[64,128],[1,64]] @ "sync.py":14
  return %1
}
)";

TEST_CASE("waits enforce cross-queue dependences only, and drop waits implied by others", "[codegen]") {
  const Passes p = run_passes(kSync);
  // C (2) depends on A (0) and B (1); 3 depends only on 2, on its own queue: no dependence.
  CHECK(dep_set(p.deps) == std::set<std::string>{"0->1 raw", "0->2 raw", "1->2 raw", "3->4 raw"});
  CHECK(waits_of(p.program, 0).empty());
  CHECK(waits_of(p.program, 1) == std::vector<std::string>{"dma0>=1"});
  // B waited for A, so C waiting for B implies A: the dma0 wait is dropped.
  CHECK(waits_of(p.program, 2) == std::vector<std::string>{"act>=1"});
  CHECK(waits_of(p.program, 3).empty());  // same queue as its producer
  // The store waits for pool's second instruction: position 1 + 1.
  CHECK(waits_of(p.program, 4) == std::vector<std::string>{"pool>=2"});
  CHECK(p.program.dependences == 4);

  const codegen::ProgramStats s = p.program.stats();
  const std::array<int64_t, codegen::kNumQueues> per_queue = {/*pe*/ 0,   /*act*/ 1,  /*dve*/ 0,  /*pool*/ 2,
                                                              /*dma0*/ 1, /*dma1*/ 0, /*dma2*/ 0, /*dma3*/ 1};
  CHECK(s.instructions == per_queue);
  CHECK(s.waits == 3);
  CHECK(s.dependences == 4);
  CHECK(s.barriers == 0);
  CHECK(s.dma_bytes == 2 * 128 * 64 * 4);
  CHECK(s.sbuf_high_water == 3 * 256);  // three 256-byte tiles alive together
  CHECK(s.psum_high_water == 0);
  CHECK_THAT(s.summary(), Catch::Contains("pool=2") && Catch::Contains("semaphore waits: 3 (for 4 cross-queue"));

  // The disassembly shows the waits on the waiting instructions.
  const std::string asm_text = p.program.disassemble();
  CHECK_THAT(asm_text, Catch::Contains("pool.0   wait act>=1; tensor_tensor"));
  CHECK_THAT(asm_text, Catch::Contains("dma3.0   wait pool>=2; dma_copy"));
}

TEST_CASE("a wait already implied by the waiter's own queue is not repeated", "[codegen]") {
  // Two act instructions both read the tile dma0 loads: only the first waits for it.
  const Passes p = run_passes(R"(kernel "chain" target=trn2 {
  param %0 "x" hbm float32[128, 64]
  tensor %1 "out" shared_hbm float32[128, 64]
  tensor %2 "a" sbuf float32[128, 64]
  tensor %3 "b" sbuf float32[128, 64]
  tensor %4 "c" sbuf float32[128, 64]
  dma_copy dst=%2@0[[64,128],[1,64]] src=%0@0[[64,128],[1,64]]
  dma_copy dst=%3@0[[64,128],[1,64]] src=%0@0[[64,128],[1,64]]
  activation dst=%4@0[[64,128],[1,64]] op=exp data=%2@0[[64,128],[1,64]]
  activation dst=%4@0[[64,128],[1,64]] op=exp data=%2@0[[64,128],[1,64]]
  tensor_tensor dst=%4@0[[64,128],[1,64]] data1=%2@0[[64,128],[1,64]] data2=%3@0[[64,128],[1,64]] op=add
  dma_copy dst=%1@0[[64,128],[1,64]] src=%4@0[[64,128],[1,64]]
  return %1
}
)");
  // 0 dma0.0, 1 dma1.0, 2 act.0, 3 act.1, 4 dve.0, 5 dma3.0.
  CHECK(waits_of(p.program, 2) == std::vector<std::string>{"dma0>=1"});
  CHECK(waits_of(p.program, 3).empty());  // act.0 already waited for dma0
  // 4 reads a (dma0) and b (dma1) and overwrites c (act.1): act>=2 implies dma0>=1, not dma1.
  CHECK(waits_of(p.program, 4) == std::vector<std::string>{"act>=2", "dma1>=1"});
  CHECK(waits_of(p.program, 5) == std::vector<std::string>{"dve>=1"});
  const codegen::ProgramStats s = p.program.stats();
  CHECK(s.waits == 4);
  CHECK(s.dependences == p.program.dependences);
  CHECK(s.dependences == static_cast<int64_t>(p.deps.size()));
}

TEST_CASE("stats count a loop body once and barriers separately", "[codegen]") {
  const Passes p = run_passes(kEngines);
  const codegen::ProgramStats s = p.program.stats();
  // kEngines: pe 1 (matmul), act 3 (activation, scalar tensor_scalar, the open tensor_scalar),
  // dve 1 (tensor_tensor), pool 4 (iota, affine_select, gpsimd tensor_tensor, power); of the six
  // DMAs the loads round-robin (dma0 {0}, dma1 {1}) and the stores take dma3 {11, 12, 13, 17}.
  const std::array<int64_t, codegen::kNumQueues> per_queue = {1, 3, 1, 4, 1, 1, 0, 4};
  CHECK(s.instructions == per_queue);
  CHECK(s.barriers == 3);
  // Six [128, 64] float32 DMA destinations.
  CHECK(s.dma_bytes == 6 * 128 * 64 * 4);
  CHECK(s.psum_high_water == 64 * 4);
}

TEST_CASE("stats of the lowered tensor_add example match hand counts", "[codegen]") {
  // Three 128-row tiles of [384, 1024] bfloat16; per tile two loads, one add, one store.
  const ir::Kernel k = trace("tensor_add", examples::tensor_add,
                             {arg({384, 1024}, nl::bfloat16, "a"), arg({384, 1024}, nl::bfloat16, "b")});
  const EngineProgram p = codegen::lower(k);
  const codegen::ProgramStats s = p.stats();
  // Six loads round-robin over dma0-dma2, the three stores take dma3. The bf16 adds leave their engine
  // open (VectorE or GpSimd): the first goes to VectorE (both idle: the default), the second to
  // GpSimd (VectorE now the more loaded), the third back to VectorE (trn2: an add is 596 ns on
  // VectorE in its 2x bf16 mode, 602 ns on GpSimd with its 150-cycle start).
  const std::array<int64_t, codegen::kNumQueues> per_queue = {0, 0, 2, 1, 2, 2, 2, 3};
  CHECK(s.instructions == per_queue);
  CHECK(s.barriers == 0);
  CHECK(p.regions.size() == 1);
  CHECK(s.dma_bytes == 3 * 384 * 1024 * 2);
  // Next fit rotates through fresh bytes: 3 tiles x 3 tensors x 2048 bytes per partition.
  CHECK(s.sbuf_high_water == 9 * 2048);
  // Every add waits for its two loads, every store for its add; each DMA queue is also
  // reused by a later tile, but the tiles' tensors never share bytes, so nothing else is needed.
  CHECK(s.waits == 3 * 3);
  CHECK(s.dependences == 3 * 3);
}

// ---- allocation --------------------------------------------------------------------------------

namespace {

// Loads a into a [128, cols] float32 tile, stores it, then the same with b: a dies before b lives.
std::string two_lifetimes(const char* target, int cols) {
  const std::string c = std::to_string(cols);
  const std::string whole = "@0[[" + c + ",128],[1," + c + "]]";
  return std::string("kernel \"lifetimes\" target=") + target + " {\n" + "  param %0 \"x\" hbm float32[128, " + c +
         "]\n" + "  tensor %1 \"out\" shared_hbm float32[128, " + c + "]\n" + "  tensor %2 \"a\" sbuf float32[128, " +
         c + "]\n" + "  tensor %3 \"b\" sbuf float32[128, " + c + "]\n" + "  dma_copy dst=%2" + whole + " src=%0" +
         whole + "\n" + "  dma_copy dst=%1" + whole + " src=%2" + whole + "\n" + "  dma_copy dst=%3" + whole +
         " src=%0" + whole + "\n" + "  dma_copy dst=%1" + whole + " src=%3" + whole + "\n" + "  return %1\n}\n";
}

}  // namespace

TEST_CASE("allocate reuses the bytes of a dead tensor when it must", "[codegen]") {
  SECTION("no pressure: next fit places b after a") {
    const Passes p = run_passes(two_lifetimes("trn1", 64));
    CHECK(p.plan.tensors[2]->offset == 0);
    CHECK(p.plan.tensors[3]->offset == 256);
    CHECK(p.plan.sbuf_high_water == 512);
  }
  SECTION("two 100 KiB tiles on trn1 (192 KiB per partition): b wraps around to a's bytes") {
    const Passes p = run_passes(two_lifetimes("trn1", 25600));
    CHECK(p.plan.tensors[2]->bytes == 102400);
    CHECK(p.plan.tensors[2]->offset == 0);
    CHECK(p.plan.tensors[3]->offset == 0);
    CHECK(p.plan.sbuf_high_water == 102400);
    // Sharing bytes orders b's load after a's load and store (dma0 wrote them, dma3 read them).
    CHECK(deps_into(p.deps, 2) == std::set<std::string>{"0->2 waw", "1->2 war"});
  }
}

TEST_CASE("allocate honours address= pins exactly and places others around them", "[codegen]") {
  const Passes p = run_passes(R"(kernel "pins" target=trn2 {
  param %0 "x" hbm float32[128, 1024]
  tensor %1 "out" shared_hbm float32[128, 1024]
  tensor %2 "q" sbuf float32[128, 64]
  tensor %3 "p" sbuf float32[64, 64] address=(32, 4096)
  tensor %4 "r" sbuf float32[128, 1024]
  dma_copy dst=%2@0[[64,128],[1,64]] src=%0@0[[1024,128],[1,64]]
  dma_copy dst=%3@0[[64,64],[1,64]] src=%0@0[[1024,64],[1,64]]
  dma_copy dst=%4@0[[1024,128],[1,1024]] src=%0@0[[1024,128],[1,1024]]
  dma_copy dst=%1@0[[1024,128],[1,64]] src=%2@0[[64,128],[1,64]]
  dma_copy dst=%1@0[[1024,64],[1,64]] src=%3@0[[64,64],[1,64]]
  dma_copy dst=%1@0[[1024,128],[1,1024]] src=%4@0[[1024,128],[1,1024]]
  return %1
}
)");
  const codegen::Allocation& pinned = *p.plan.tensors[3];
  CHECK(pinned.pinned);
  CHECK(pinned.partition == 32);
  CHECK(pinned.partitions == 64);
  CHECK(pinned.offset == 4096);
  CHECK(pinned.bytes == 256);
  CHECK(p.plan.tensors[2]->offset == 0);
  CHECK_FALSE(p.plan.tensors[2]->pinned);
  // r (4 KiB) would go right after q at 256 but would then cover p's bytes [4096, 4352) in
  // partitions 32..95: it goes after p instead.
  CHECK(p.plan.tensors[4]->offset == 4352);
  CHECK_FALSE(p.plan.tensors[4]->overlaps(pinned));
}

// A pin reserves its bytes for the pinned tensor's whole live range: aliasing through address=
// is the kernel's explicit choice only between tensors it pinned.
TEST_CASE("allocate keeps automatic tensors off the bytes of a pin alive with them", "[codegen]") {
  const Passes p = run_passes(R"(kernel "late_pin" target=trn2 {
  param %0 "x" hbm float32[128, 64]
  param %1 "y" hbm float32[128, 64]
  tensor %2 "out" shared_hbm float32[128, 64]
  tensor %3 "q" sbuf float32[128, 64]
  tensor %4 "p" sbuf float32[128, 64] address=(0, 0)
  dma_copy dst=%3@0[[64,128],[1,64]] src=%0@0[[64,128],[1,64]]
  dma_copy dst=%4@0[[64,128],[1,64]] src=%1@0[[64,128],[1,64]]
  tensor_tensor dst=%4@0[[64,128],[1,64]] data1=%3@0[[64,128],[1,64]] data2=%4@0[[64,128],[1,64]] op=add
  dma_copy dst=%2@0[[64,128],[1,64]] src=%4@0[[64,128],[1,64]]
  return %2
}
)");
  CHECK(p.plan.tensors[4]->offset == 0);
  CHECK_FALSE(p.plan.tensors[3]->overlaps(*p.plan.tensors[4]));
  const auto x = test::random_values(128 * 64, 1), y = test::random_values(128 * 64, 2);
  std::vector<sim::HostTensor> args = {test::host(ir::DType::float32, {128, 64}, x),
                                       test::host(ir::DType::float32, {128, 64}, y)};
  const sim::HostTensor out = sim::interpret(p.kernel, args).outputs[0];
  for (int64_t i = 0; i < 128 * 64; ++i) REQUIRE(out.get(i) == x[i] + y[i]);
}

TEST_CASE("allocate starts PSUM tensors on a 2 KiB bank", "[codegen]") {
  // s (1600 B per partition), m (a 1 KiB matmul output) and z (32 B), all alive together.
  const Passes p = run_passes(R"(kernel "banks" target=trn2 {
  param %0 "x" hbm float32[128, 128]
  param %1 "y" hbm float32[128, 256]
  tensor %2 "out" shared_hbm float32[128, 256]
  tensor %3 "lhs" sbuf float32[128, 128]
  tensor %4 "rhs" sbuf float32[128, 256]
  tensor %5 "s" psum float32[128, 400]
  tensor %6 "m" psum float32[128, 256]
  tensor %7 "z" psum float32[128, 8]
  tensor %8 "res" sbuf float32[128, 256]
  dma_copy dst=%3@0[[128,128],[1,128]] src=%0@0[[128,128],[1,128]]
  dma_copy dst=%4@0[[256,128],[1,256]] src=%1@0[[256,128],[1,256]]
  memset dst=%5@0[[400,128],[1,400]] value=1
  nc_matmul dst=%6@0[[256,128],[1,256]] stationary=%3@0[[128,128],[1,128]] moving=%4@0[[256,128],[1,256]]
  memset dst=%7@0[[8,128],[1,8]] value=2
  tensor_copy dst=%8@0[[256,128],[1,256]] src=%6@0[[256,128],[1,256]]
  tensor_tensor dst=%8@0[[256,128],[1,256]] data1=%8@0[[256,128],[1,256]] data2=%5@0[[400,128],[1,256]] op=add
  tensor_tensor dst=%8@0[[256,128],[1,8]] data1=%8@0[[256,128],[1,8]] data2=%7@0[[8,128],[1,8]] op=add
  dma_copy dst=%2@0[[256,128],[1,256]] src=%8@0[[256,128],[1,256]]
  return %2
}
)");
  // Next fit would put m at 1600 (straddling banks 0 and 1) if it were merely 64-byte aligned.
  CHECK(p.plan.tensors[5]->offset == 0);
  CHECK(p.plan.tensors[6]->offset == 2048);
  CHECK(p.plan.tensors[7]->offset == 4096);
  CHECK(p.plan.psum_high_water == 4096 + 32);
  for (int id : {5, 6, 7}) {
    const codegen::Allocation& a = *p.plan.tensors[id];
    CHECK(a.offset % 2048 == 0);
    if (a.bytes <= 2048) CHECK(a.offset / 2048 == (a.offset + a.bytes - 1) / 2048);
  }
  // SBUF tensors are 64-byte aligned: lhs [0, 512), rhs [512, 1536), res after rhs.
  CHECK(p.plan.tensors[3]->offset == 0);
  CHECK(p.plan.tensors[4]->offset == 512);
  CHECK(p.plan.tensors[8]->offset == 1536);
}

TEST_CASE("PSUM tiles of the lowered matmul and transpose examples sit inside one bank", "[codegen]") {
  const ir::Kernel kernels[] = {
      trace("matmul", examples::matmul, {arg({512, 512}, nl::bfloat16, "lhsT"), arg({512, 512}, nl::bfloat16, "rhs")}),
      trace("transpose", examples::transpose, {arg({256, 384}, nl::bfloat16, "x")}),
  };
  for (const ir::Kernel& k : kernels)
    for (ir::Target t : {ir::Target::trn1, ir::Target::trn2, ir::Target::trn3}) {
      const EngineProgram p = codegen::lower(k, {.target = t});
      int psum_tiles = 0;
      for (size_t id = 0; id < p.plan.tensors.size(); ++id) {
        if (!p.plan.tensors[id] || p.kernel.tensors[id].buffer != ir::Buffer::psum) continue;
        const codegen::Allocation& a = *p.plan.tensors[id];
        INFO(k.name << " on " << ir::to_string(t) << ": " << p.kernel.tensors[id].name << " at " << a.offset);
        ++psum_tiles;
        CHECK(a.offset % 2048 == 0);
        CHECK(a.bytes <= 2048);  // [128, 512] fp32 accumulators, [128, 128] bf16 transposes
        CHECK(a.offset / 2048 == (a.offset + a.bytes - 1) / 2048);
        CHECK(a.offset + a.bytes <= ir::target_info(t).psum_partition_bytes);
      }
      CHECK(psum_tiles == (k.name == "matmul" ? 4 : 6));  // one per output block
    }
}

TEST_CASE("legalize re-verifies the kernel for the target", "[codegen]") {
  // N = 1024 fp32 columns: one matmul on trn3 (up to 4096), more than one PSUM bank before it.
  const ir::Kernel k = ir::parse(R"(kernel "wide" target=trn3 {
  param %0 "x" hbm float32[128, 128]
  param %1 "y" hbm float32[128, 1024]
  tensor %2 "out" shared_hbm float32[128, 1024]
  tensor %3 "lhs" sbuf float32[128, 128]
  tensor %4 "rhs" sbuf float32[128, 1024]
  tensor %5 "acc" psum float32[128, 1024]
  tensor %6 "res" sbuf float32[128, 1024]
  dma_copy dst=%3@0[[128,128],[1,128]] src=%0@0[[128,128],[1,128]]
  dma_copy dst=%4@0[[1024,128],[1,1024]] src=%1@0[[1024,128],[1,1024]]
  nc_matmul dst=%5@0[[1024,128],[1,1024]] stationary=%3@0[[128,128],[1,128]] moving=%4@0[[1024,128],[1,1024]] @ "wide.py":9
  tensor_copy dst=%6@0[[1024,128],[1,1024]] src=%5@0[[1024,128],[1,1024]]
  dma_copy dst=%2@0[[1024,128],[1,1024]] src=%6@0[[1024,128],[1,1024]]
  return %2
}
)");
  const EngineProgram p = codegen::lower(k);
  CHECK(p.plan.tensors[5]->bytes == 4096);
  CHECK(p.plan.tensors[5]->offset % 2048 == 0);
  for (ir::Target t : {ir::Target::trn1, ir::Target::trn2}) {
    const Error e = expect_error([&] { codegen::lower(k, {.target = t}); }, "matmul-shape");
    CHECK(e.kind() == ErrorKind::User);
    CHECK(e.loc().line == 9);
    CHECK_THROWS_AS(codegen::legalize(k, t), Error);
  }
}

namespace {

// a and b (64 KiB per partition) and c (80 KiB) alive together: 208 KiB, more than trn1's
// 192 KiB, less than trn2's 224 KiB.
const char* const kBig = R"(kernel "big" target=trn1 {
  param %0 "x" hbm float32[128, 20480]
  tensor %1 "out" shared_hbm float32[128, 20480]
  tensor %2 "a" sbuf float32[128, 16384] @ "big.py":3
  tensor %3 "b" sbuf float32[128, 16384] @ "big.py":4
  tensor %4 "c" sbuf float32[128, 20480] @ "big.py":5
  dma_copy dst=%2@0[[16384,128],[1,16384]] src=%0@0[[20480,128],[1,16384]] @ "big.py":7
  dma_copy dst=%3@0[[16384,128],[1,16384]] src=%0@0[[20480,128],[1,16384]] @ "big.py":8
  dma_copy dst=%4@0[[20480,128],[1,20480]] src=%0@0[[20480,128],[1,20480]] @ "big.py":9
  dma_copy dst=%1@0[[20480,128],[1,16384]] src=%2@0[[16384,128],[1,16384]] @ "big.py":10
  dma_copy dst=%1@0[[20480,128],[1,16384]] src=%3@0[[16384,128],[1,16384]] @ "big.py":11
  dma_copy dst=%1@0[[20480,128],[1,20480]] src=%4@0[[20480,128],[1,20480]] @ "big.py":12
  return %1
}
)";

}  // namespace

TEST_CASE("allocate reports over-subscription with the tensors alive and the capacity", "[codegen]") {
  const ir::Kernel k = ir::parse(kBig);
  REQUIRE(ir::target_info(ir::Target::trn1).sbuf_partition_bytes == 196608);
  REQUIRE(ir::target_info(ir::Target::trn2).sbuf_partition_bytes == 229376);
  const std::vector<ir::LiveRange> live = ir::live_ranges(k, ir::match_blocks(k));
  {
    const Error e = expect_error([&] { codegen::allocate(k, live); }, "capacity");
    CHECK(e.kind() == ErrorKind::User);
    CHECK(e.loc().file == "big.py");
    CHECK(e.loc().line == 5);  // c's declaration
    CHECK_THAT(e.message(), Catch::Contains("tensor 'c' needs 81920 bytes per partition"));
    CHECK_THAT(e.message(), Catch::Contains("196608 bytes per partition on trn1"));
    CHECK_THAT(e.message(), Catch::Contains("131072 held by the tensors alive here"));
    CHECK_THAT(e.message(), Catch::Contains("'a' 65536 bytes at byte 0 (big.py:3)"));
    CHECK_THAT(e.message(), Catch::Contains("'b' 65536 bytes at byte 65536 (big.py:4)"));
  }
  // lower() spills instead: 'b', needed again after 'a' is, goes to HBM while 'c' is placed.
  const EngineProgram spilled = codegen::lower(k);
  REQUIRE(spilled.kernel.tensors.size() == 7);
  CHECK(spilled.kernel.tensors[5].name == "b.spill");
  CHECK(spilled.kernel.tensors[5].buffer == ir::Buffer::hbm);
  CHECK(spilled.kernel.tensors[5].spill_of == 3);
  CHECK(spilled.plan.sbuf_high_water <= 196608);
  // The same kernel fits the larger SBUF of trn2 and trn3.
  for (ir::Target t : {ir::Target::trn2, ir::Target::trn3}) {
    const EngineProgram p = codegen::lower(k, {.target = t});
    CHECK(p.kernel.target == t);
    CHECK(p.plan.tensors[4]->offset == 131072);
    CHECK(p.plan.sbuf_high_water == 212992);
  }
}

// The capacity error's structured state (codegen/capacity_error.h), what the Python layer draws
// as the memory map at the failing point: 'a' and 'b' take 65536 bytes each from byte 0 (next fit),
// so 'c' (81920 bytes) finds no range in trn1's 196608 while both are alive.
TEST_CASE("the capacity error carries the placements, the failing tensor and the live ones", "[codegen]") {
  const ir::Kernel k = ir::parse(kBig);
  const std::vector<ir::LiveRange> live = ir::live_ranges(k, ir::match_blocks(k));
  try {
    codegen::allocate(k, live);
    FAIL("allocate placed 'c' beside 'a' and 'b' in 196608 bytes");
  } catch (const codegen::CapacityError& e) {
    CHECK(e.rule() == "capacity");
    CHECK(e.capacity == 196608);
    REQUIRE(e.placed.size() == 2);
    CHECK(e.placed[0].name == "a");
    CHECK(e.placed[0].at.offset == 0);
    CHECK(e.placed[0].at.bytes == 65536);
    CHECK(e.placed[0].live.first == 0);
    CHECK(e.placed[0].live.last == 3);  // read by the store at body index 3
    CHECK(e.placed[1].name == "b");
    CHECK(e.placed[1].at.offset == 65536);
    CHECK(e.placed[1].live.first == 1);
    CHECK(e.placed[1].live.last == 4);
    CHECK(e.placed[1].loc.line == 4);
    CHECK(e.failing.name == "c");
    CHECK(e.failing.tensor == 4);
    CHECK(e.failing.at.offset == -1);
    CHECK(e.failing.at.bytes == 81920);
    CHECK(e.failing.at.partitions == 128);
    CHECK(e.failing.live.first == 2);
    CHECK(e.failing.live.last == 5);
    CHECK(e.alive == std::vector<int>{2, 3});
    CHECK_THAT(e.message(), Catch::Contains("err.memory_map.save_svg(path)"));
  }
}

// ---- text form ---------------------------------------------------------------------------------

namespace {

void check_round_trip(const EngineProgram& p) {
  const std::string text = p.to_text();
  const EngineProgram q = EngineProgram::from_text(text);
  CHECK(q.to_text() == text);  // print -> parse -> print is the identity
  CHECK(q.verified);
  CHECK(q.disassemble() == p.disassemble());
  CHECK(q.regions == p.regions);
  CHECK(q.region_at == p.region_at);
  CHECK(q.kernel == p.kernel);
  CHECK(q.dependences == p.dependences);
  CHECK(q.stats().summary() == p.stats().summary());
  REQUIRE(q.plan.tensors.size() == p.plan.tensors.size());
  CHECK(q.plan.cores == p.plan.cores);
  for (size_t id = 0; id < p.plan.tensors.size(); ++id) {
    REQUIRE(q.plan.tensors[id].has_value() == p.plan.tensors[id].has_value());
    if (!p.plan.tensors[id]) continue;
    CHECK(q.plan.tensors[id]->core == p.plan.tensors[id]->core);
    CHECK(q.plan.tensors[id]->offset == p.plan.tensors[id]->offset);
    CHECK(q.plan.tensors[id]->partition == p.plan.tensors[id]->partition);
    CHECK(q.plan.tensors[id]->partitions == p.plan.tensors[id]->partitions);
    CHECK(q.plan.tensors[id]->bytes == p.plan.tensors[id]->bytes);
    CHECK(q.plan.tensors[id]->pinned == p.plan.tensors[id]->pinned);
  }
}

// The schedule part of a program's text (after the kernel's IR).
std::string schedule_of(const std::string& text) { return text.substr(text.find("engine_program ")); }

// from_text on `text` must throw a user error with `rule` (and nothing else).
void expect_rejected(const std::string& text, const std::string& rule, const std::string& what) {
  INFO(what);
  try {
    (void)EngineProgram::from_text(text);
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.kind() == ErrorKind::User);
    CHECK(e.rule() == rule);
    return;
  }
  FAIL("from_text accepted " + what);
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("engine programs round-trip through the text form", "[codegen]") {
  check_round_trip(run_passes(kSync).program);
  check_round_trip(codegen::lower(ir::parse(kEngines)));
  check_round_trip(codegen::lower(ir::parse(kBig), {.target = ir::Target::trn3}));
}

TEST_CASE("the text form lists allocations, regions, queues and waits", "[codegen]") {
  // kSync: 0 dma0.0, 1 act.0 (after A), 2 pool.0 (after B, which implies A), 3 pool.1, 4 dma3.0.
  const std::string text = run_passes(kSync).program.to_text();
  CHECK(text.starts_with(ir::print(ir::parse(kSync))));
  CHECK(schedule_of(text) ==
        "engine_program cores=1 sbuf_high_water=768 psum_high_water=0 dependences=4 {\n"
        "  alloc %2 core=0 partition=0 partitions=128 offset=0 bytes=256\n"
        "  alloc %3 core=0 partition=0 partitions=128 offset=256 bytes=256\n"
        "  alloc %4 core=0 partition=0 partitions=128 offset=512 bytes=256\n"
        "  region [0, 5)\n"
        "    act: 1 wait(dma0>=1)\n"
        "    pool: 2 wait(act>=1) 3\n"
        "    dma0: 0\n"
        "    dma3: 4 wait(pool>=2)\n"
        "}\n");
}

TEST_CASE("a schedule that does not fit its kernel is a corrupt-program error", "[codegen]") {
  const std::string text = codegen::lower(ir::parse(kEngines)).to_text();
  const std::string sync = run_passes(kSync).program.to_text();
  const std::string big = "9223372036854775807";
  expect_rejected(replaced(sync, "offset=512", "offset=" + big), "corrupt-program", "an offset of INT64_MAX");
  expect_rejected(replaced(sync, "alloc %4 core=0 partition=0", "alloc %4 core=0 partition=" + big), "corrupt-program",
                  "a partition of INT64_MAX");
  expect_rejected(replaced(sync, "partition=0 partitions=128 offset=512", "partition=1 partitions=128 offset=512"),
                  "corrupt-program", "partitions past 128");
  expect_rejected(replaced(sync, "bytes=256\n  region", "bytes=255\n  region"), "corrupt-program", "a wrong size");
  expect_rejected(replaced(sync, "  alloc %4 core=0 partition=0 partitions=128 offset=512 bytes=256\n", ""),
                  "corrupt-program", "a used tensor without an allocation");
  expect_rejected(replaced(sync, "alloc %4 core=0", "alloc %1 core=0"), "corrupt-program", "an HBM allocation");
  expect_rejected(replaced(sync, "alloc %4 core=0", "alloc %3 core=0"), "corrupt-program", "a tensor allocated twice");
  expect_rejected(replaced(sync, "alloc %4 core=0", "alloc %4 core=1"), "corrupt-program", "a core the plan lacks");
  expect_rejected(replaced(sync, "cores=1", "cores=100000"), "corrupt-program", "too many cores");
  expect_rejected(replaced(sync, "    dma0: 0\n", ""), "corrupt-program", "an instruction on no queue");
  expect_rejected(replaced(sync, "dma0: 0", "dma0: 0 1"), "corrupt-program", "an instruction on two queues");
  expect_rejected(replaced(sync, "pool: 2 wait(act>=1) 3", "pool: 3 2 wait(act>=1)"), "corrupt-program",
                  "a queue out of body order");
  expect_rejected(replaced(sync, "pool>=2", "pool>=3"), "corrupt-program", "a wait no queue can satisfy");
  expect_rejected(replaced(sync, "pool>=2", "pool>=0"), "corrupt-program", "a wait for zero");
  expect_rejected(replaced(sync, "region [0, 5)", "region [0, 6)"), "corrupt-program", "a region past the body");
  expect_rejected(replaced(sync, "region [0, 5)", "region [1, 5)"), "corrupt-program", "a region inside a run");
  expect_rejected(replaced(text, "region [0, 9)", "region [0, 11)"), "corrupt-program", "a region over a barrier");
  expect_rejected(replaced(sync, "dma3: 4", "dma7: 4"), "ir-parse", "an unknown queue");
  expect_rejected(replaced(sync, "dependences=4", "dependences=x"), "ir-parse", "a malformed number");
  expect_rejected(sync + "junk", "ir-parse", "text after the program");
}

TEST_CASE("a damaged program text is an error or a checked program, never a crash", "[codegen]") {
  // Every truncation, and every character replaced by one that changes a number or a token: each
  // parse either fails with a user error or gives a program that passed every check.
  const std::string text = codegen::lower(ir::parse(kEngines)).to_text();
  const size_t from = text.find("engine_program ");
  auto try_parse = [&](const std::string& damaged, const std::string& what) {
    INFO(what);
    try {
      const EngineProgram p = EngineProgram::from_text(damaged);
      CHECK(p.verified);
      codegen::check_structure(p);
    } catch (const Error& e) {
      INFO(e.what());
      CHECK(e.kind() == ErrorKind::User);
    }
  };
  for (size_t n = from; n < text.size(); ++n) try_parse(text.substr(0, n), "truncated to " + std::to_string(n));
  for (size_t i = from; i < text.size(); ++i)
    for (const char c : {'0', '9', '-', ' ', '\n', ')', 'x'}) {
      std::string damaged = text;
      damaged[i] = c;
      try_parse(damaged, "byte " + std::to_string(i) + " set to '" + std::string(1, c) + "'");
    }
}

// ---- KNIT_DEBUG dumps ---------------------------------------------------------------------------

namespace {

std::vector<std::string> files_in(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  if (!std::filesystem::is_directory(dir)) return names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

const std::vector<std::string> kDumpFiles = {"01-verify.txt",  "02-legalize.txt",    "03-allocate.txt",
                                             "04-engines.txt", "05-dependences.txt", "06-program.txt"};

}  // namespace

TEST_CASE("lower writes numbered per-pass dumps to debug_dir/<kernel>", "[codegen]") {
  TempDir tmp("dumps");
  const ir::Kernel k = ir::parse(kSync);
  const EngineProgram p = codegen::lower(k, {.debug_dir = tmp.path.string()});
  const std::filesystem::path dir = tmp.path / "sync";
  CHECK(files_in(tmp.path) == std::vector<std::string>{"sync"});
  REQUIRE(files_in(dir) == kDumpFiles);

  const std::string listing = p.disassemble();
  const std::string first_line = listing.substr(0, listing.find('\n'));
  CHECK_THAT(first_line, Catch::StartsWith("# engine program of kernel 'sync' for trn2"));
  CHECK_THAT(read_text(dir / "06-program.txt"), Catch::Contains(first_line));
  CHECK(read_text(dir / "06-program.txt") == listing);
  CHECK(read_text(dir / "01-verify.txt") == ir::print(k));
  // Instruction 1 (activation) is on act and reads what 0 loaded.
  CHECK_THAT(read_text(dir / "04-engines.txt"), Catch::Contains("  # act\n"));
  CHECK_THAT(read_text(dir / "05-dependences.txt"), Catch::Contains("# raw on 0"));
  CHECK_THAT(read_text(dir / "03-allocate.txt"),
             Catch::Contains("c (t4) sbuf core 0 partitions [0, 128) bytes [512, 768)"));
}

TEST_CASE("KNIT_DEBUG=1 turns the dumps on, into KNIT_DEBUG_DIR", "[codegen]") {
  TempDir tmp("env");
  const ir::Kernel k = ir::parse(kSync);
  ::setenv("KNIT_DEBUG_DIR", tmp.path.string().c_str(), 1);
  ::unsetenv("KNIT_DEBUG");
  codegen::lower(k);
  CHECK(files_in(tmp.path).empty());  // off without KNIT_DEBUG=1
  ::setenv("KNIT_DEBUG", "1", 1);
  codegen::lower(k);
  ::unsetenv("KNIT_DEBUG");
  ::unsetenv("KNIT_DEBUG_DIR");
  CHECK(files_in(tmp.path / "sync") == kDumpFiles);
}
