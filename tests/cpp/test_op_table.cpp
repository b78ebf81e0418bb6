// The op table (ir/include/knit/ir/op_traits.h) walked opcode by opcode: its rows agree with the op
// structs and with each other, and the lowering and the cost model read it as documented.
#include <catch2/catch.hpp>

#include <string_view>

#include <knit/knit.h>

#include "all_ops.h"
#include "knit/codegen/lower.h"
#include "knit/ir/op_traits.h"
#include "knit/sim/machine_config.h"
#include "knit/sim/timing.h"

using namespace knit;
using codegen::Queue;
using ir::Engine;
using ir::Opcode;
using ir::OpRole;

namespace {

// Whether the op struct has a field of type T named `name`.
template <class T>
bool has_field(const ir::Instruction& inst, std::string_view name) {
  bool found = false;
  ir::for_each_field(inst, [&](const char* field, const auto& value) {
    found = found || (std::is_same_v<std::decay_t<decltype(value)>, T> && name == field);
  });
  return found;
}

}  // namespace

TEST_CASE("every opcode's op-table row agrees with its op struct", "[core][op-table]") {
  for (size_t i = 0; i < ir::kNumOpcodes; ++i) {
    const auto op = static_cast<Opcode>(i);
    const ir::OpTraits& t = ir::op_traits(op);
    ir::Instruction inst;
    inst.op = ir::default_op(op);
    INFO("opcode " << ir::opcode_name(op));
    REQUIRE(inst.opcode() == op);
    CHECK(Opcode(t.opcode) == op);
    const bool data = ir::moves_tensor_data(op);
    // Sequencer work runs on no engine queue and costs nothing of its own.
    CHECK(data == (Engine(t.engine) != Engine::sync));
    CHECK(data == (ir::cost_rule(op) != ir::CostRule::none));
    CHECK((OpRole(t.role) == OpRole::dma) == (Engine(t.engine) == Engine::dma));
    CHECK((OpRole(t.role) == OpRole::block) == (t.block != ir::BlockPart::none));
    // An `engine=` operand only makes sense on an instruction that runs on an engine queue.
    if (has_field<Engine>(inst, "engine") && !ir::is_core_sync(op)) CHECK(data);
    if (t.engine_rule) CHECK(OpRole(t.role) == OpRole::compute);
    // A whole-dst writer has a dst view to write.
    if (t.writes_whole_dst) CHECK(has_field<ir::View>(inst, "dst"));
  }
}

TEST_CASE("the lowering puts each instruction on its op-table engine", "[core][op-table]") {
  const ir::Kernel k = testing_support::all_ops_kernel();
  const std::vector<Queue> queues = codegen::assign_engines(k);
  REQUIRE(queues.size() == k.body.size());
  for (size_t i = 0; i < k.body.size(); ++i) {
    const ir::Instruction& inst = k.body[i];
    INFO(ir::print(k, inst));
    if (!ir::moves_tensor_data(inst.opcode())) {
      CHECK(codegen::is_barrier(inst));
      continue;
    }
    CHECK_FALSE(codegen::is_barrier(inst));
    const bool on_dma_queue = static_cast<int>(queues[i]) >= codegen::kFirstDmaQueue;
    CHECK(on_dma_queue == ir::is_dma(inst.opcode()));
  }
  // Spot checks against the engines NKI documents for each instruction class.
  auto queue_of = [&](Opcode op) {
    for (size_t i = 0; i < k.body.size(); ++i)
      if (k.body[i].opcode() == op) return queues[i];
    FAIL("no " << ir::opcode_name(op) << " in the kernel");
    return Queue::pe;
  };
  CHECK(queue_of(Opcode::nc_matmul) == Queue::pe);
  CHECK(queue_of(Opcode::activation) == Queue::act);
  CHECK(queue_of(Opcode::iota) == Queue::pool);
  CHECK(queue_of(Opcode::tensor_partition_reduce) == Queue::pool);
  CHECK(queue_of(Opcode::bn_stats) == Queue::dve);
}

TEST_CASE("tensor_tensor's power runs on GpSimd, its other ops on the Vector Engine", "[core][op-table]") {
  ir::Kernel k = testing_support::all_ops_kernel();
  for (ir::Instruction& inst : k.body)
    if (auto* tt = std::get_if<ir::TensorTensor>(&inst.op)) {
      tt->engine = Engine::unknown;
      tt->op = ir::AluOp::power;
      ir::Kernel one = k;
      one.body = {inst};
      CHECK(codegen::assign_engines(one)[0] == Queue::pool);
      std::get<ir::TensorTensor>(one.body[0].op).op = ir::AluOp::add;
      CHECK(codegen::assign_engines(one)[0] == Queue::dve);
    }
}

TEST_CASE("the cost model prices every data instruction on its queue", "[core][op-table]") {
  const ir::Kernel k = testing_support::all_ops_kernel();
  const std::vector<Queue> queues = codegen::assign_engines(k);
  const sim::MachineConfig& config = sim::machine_config(k.target);
  for (size_t i = 0; i < k.body.size(); ++i) {
    const ir::Instruction& inst = k.body[i];
    if (!ir::moves_tensor_data(inst.opcode())) continue;
    INFO(ir::print(k, inst));
    const sim::InstrCost cost = sim::instruction_cost(k, inst, queues[i], config);
    CHECK(cost.busy_ns > 0);
    CHECK(cost.busy_ns < 1e6);  // no 1 ms instruction in a kernel of 128 x 512 tiles
  }
}
