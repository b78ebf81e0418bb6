// Scheduling edges (Instruction::after: kernel.with_schedule, nl.no_reorder, depends_on in the
// Python API): their IR text form, and how codegen turns them into semaphore waits. Expected
// queues and waits are worked out by hand from the kernels written here.
#include <catch2/catch.hpp>

#include "knit/codegen/allocate.h"
#include "knit/codegen/engine_program.h"
#include "knit/codegen/lower.h"
#include "knit/ir/liveness.h"
#include "knit/ir/text.h"

using namespace knit;

namespace {

// A load of t, then exp of its left half on ScalarE and 2x its right half on VectorE: the two
// are independent (they read disjoint bytes and write different tiles), so only an edge can order
// them. `after` is the tensor_scalar's after= field, `act_after` the activation's ("" for none).
std::string two_engines(const std::string& after, const std::string& act_after = "") {
  return R"(kernel "two" target=trn2 {
  param %0 "x" hbm float32[128, 64]
  tensor %1 "out" shared_hbm float32[128, 64]
  tensor %2 "t" sbuf float32[128, 64]
  tensor %3 "u" sbuf float32[128, 32]
  tensor %4 "v" sbuf float32[128, 32]
  dma_copy dst=%2@0[[64,128],[1,64]] src=%0@0[[64,128],[1,64]]
  activation dst=%3@0[[32,128],[1,32]] op=exp data=%2@0[[64,128],[1,32]] name="act" )" +
         act_after + R"(
  tensor_scalar dst=%4@0[[32,128],[1,32]] data=%2@32[[64,128],[1,32]] op0=multiply operand0=2 name="vec" )" +
         after + R"(
  dma_copy dst=%1@0[[64,128],[1,32]] src=%3@0[[32,128],[1,32]]
  dma_copy dst=%1@32[[64,128],[1,32]] src=%4@0[[32,128],[1,32]]
  return %1
}
)";
}

const codegen::EngineInstr& on_queue(const codegen::EngineProgram& p, uint32_t ir) {
  for (const auto& region : p.regions)
    for (const auto& queue : region.queues)
      for (const auto& e : queue)
        if (e.ir == ir) return e;
  FAIL("instruction " << ir << " is on no queue");
  throw;
}

bool waits_for(const codegen::EngineInstr& e, codegen::Queue q) {
  for (const codegen::Wait& w : e.waits)
    if (w.queue == q) return true;
  return false;
}

}  // namespace

TEST_CASE("after= round-trips through the IR text", "[schedule]") {
  const ir::Kernel k = ir::parse(two_engines("after=[1]"));
  REQUIRE(k.body[2].after == std::vector<uint32_t>{1});
  CHECK(k.body[2].name == "vec");
  const std::string text = ir::print(k);
  CHECK(text.find(R"(name="vec" after=[1])") != std::string::npos);
  CHECK(ir::parse(text) == k);
  CHECK(ir::parse(two_engines("")).body[2].after.empty());
}

TEST_CASE("after= names another instruction of the kernel", "[schedule]") {
  CHECK_THROWS_WITH(ir::parse(two_engines("after=[2]")), Catch::Contains("another instruction's index"));
  CHECK_THROWS_WITH(ir::parse(two_engines("after=[7]")), Catch::Contains("the kernel has 5 instructions"));
  const ir::Kernel k = ir::parse(two_engines("", "after=[2]"));  // a later one: a backward edge
  REQUIRE(k.body[1].after == std::vector<uint32_t>{2});
  CHECK(ir::parse(ir::print(k)) == k);
}

TEST_CASE("a backward edge makes the earlier instruction's queue wait for the later one", "[schedule]") {
  const codegen::EngineProgram p = codegen::lower(ir::parse(two_engines("", "after=[2]")));
  CHECK(waits_for(on_queue(p, 1), codegen::Queue::dve));
  CHECK_FALSE(waits_for(on_queue(p, 2), codegen::Queue::act));
  REQUIRE(p.regions.size() == 1);
  CHECK(codegen::issue_order(p.regions[0]) == std::vector<uint32_t>{0, 2, 1, 3, 4});
  CHECK(codegen::issue_order(codegen::lower(ir::parse(two_engines(""))).regions[0]) ==
        std::vector<uint32_t>{0, 1, 2, 3, 4});
}

TEST_CASE("an edge across engine queues becomes an order dependence and a wait", "[schedule]") {
  const ir::Kernel k = ir::parse(two_engines("after=[1]"));
  const auto live = ir::live_ranges(k, ir::match_blocks(k));
  const codegen::MemoryPlan plan = codegen::allocate(k, live);
  const auto queues = codegen::assign_engines(k);
  REQUIRE(queues[1] == codegen::Queue::act);
  REQUIRE(queues[2] == codegen::Queue::dve);
  bool found = false;
  for (const codegen::Dependence& d : codegen::dependences(k, plan, queues))
    found = found || (d.from == 1 && d.to == 2 && d.kind == codegen::Dependence::Kind::order);
  CHECK(found);

  CHECK(waits_for(on_queue(codegen::lower(k), 2), codegen::Queue::act));
  CHECK_FALSE(waits_for(on_queue(codegen::lower(ir::parse(two_engines(""))), 2), codegen::Queue::act));
}

TEST_CASE("an edge within one queue needs no wait", "[schedule]") {
  // Both on VectorE (named: left open, the second would go to the idle ScalarE): queue order
  // already runs them in order.
  const ir::Kernel k = ir::parse(R"(kernel "one" target=trn2 {
  param %0 "x" hbm float32[128, 64]
  tensor %1 "out" shared_hbm float32[128, 64]
  tensor %2 "t" sbuf float32[128, 64]
  tensor %3 "u" sbuf float32[128, 64]
  dma_copy dst=%2@0[[64,128],[1,64]] src=%0@0[[64,128],[1,64]]
  tensor_copy dst=%3@0[[64,128],[1,32]] src=%2@0[[64,128],[1,32]] engine=vector
  tensor_copy dst=%3@32[[64,128],[1,32]] src=%2@32[[64,128],[1,32]] engine=vector after=[1]
  dma_copy dst=%1@0[[64,128],[1,64]] src=%3@0[[64,128],[1,64]]
  return %1
}
)");
  const codegen::EngineProgram p = codegen::lower(k);
  CHECK(on_queue(p, 2).queue == on_queue(p, 1).queue);
  CHECK(on_queue(p, 2).waits.empty());
}
