// Cycle-approximate timing of an engine program (docs/simulator.md).
//
// The run order of regions and barriers comes from executing the program (run_program with
// record_execution, or timing_only for shape placeholders). Timing replays it event by event:
// each queue runs in order; an instruction starts when its queue is free and every semaphore it
// waits for has been raised (producer finished + sync latency); it keeps its engine busy for its
// cost (cost.cpp, docs/simulator.md) and its result is visible after the engine's pipeline latency.
// DMA transfers pay a fixed cost, then share the core's DMA bandwidth in issue order. A barrier
// waits for every queue to drain. Grid instances of an LNC2 kernel are separate cores.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "knit/codegen/cost.h"
#include "knit/codegen/engine_program.h"
#include "knit/sim/interpreter.h"
#include "knit/sim/machine_config.h"

namespace knit::sim {

using codegen::InstrCost;
using codegen::instruction_cost;

struct TimedInstruction {
  int32_t core = 0;
  uint32_t ir = 0;
  codegen::Queue queue = codegen::Queue::pe;
  double start_ns = 0, end_ns = 0;  // engine busy (DMA: the data transfer)
  double issue_ns = 0;              // DMA: when the queue issued it (fixed cost follows)
  double stall_ns = 0;              // waited beyond its queue being free
  int8_t stalled_on = -1;           // the queue whose semaphore held it longest (-1: none)
  int32_t waited_row = -1;          // timeline row of the producer that semaphore waited for (-1: none)
  int64_t dma_bytes = 0;            // DMA: bytes the transfer moves
};

// One rank's part in one collective: it arrived at arrive_ns, the group's last rank arrived at
// start_ns, and the data had moved at end_ns (collective_cost.h: `steps` ring steps over `path`).
struct TimedCollective {
  int32_t rank = 0;
  uint32_t ir = 0;
  double arrive_ns = 0, start_ns = 0, end_ns = 0;
  int64_t steps = 0;
  double step_bytes = 0;
  const char* path = "none";
};

struct TimingReport {
  ir::Target target = ir::Target::trn2;
  double total_ns = 0;  // launch overhead + the slowest core
  std::array<double, codegen::kNumQueues> busy_ns{};
  std::array<int64_t, codegen::kNumQueues> instructions{};  // executed (loops count every trip)
  std::array<std::array<double, codegen::kNumQueues>, codegen::kNumQueues> stall_ns{};  // [waiter][producer]
  int64_t barriers = 0;
  int64_t dma_bytes = 0;
  int64_t hbm_read_bytes = 0, hbm_write_bytes = 0;
  double flops = 0;
  double pe_array_ns = 0;
  double dma_active_ns = 0;                // time the DMA bandwidth was in use
  std::vector<TimedInstruction> timeline;  // with keep_timeline
  std::vector<TimedCollective> collectives;
  std::vector<double> core_end_ns;  // per core (rank), when its last result was visible
};

// `lnc`: physical cores per rank of a multi-rank kernel, for the collective cost model (0: the
// target's default).
TimingReport simulate_timing(const codegen::EngineProgram& program, const std::vector<Executed>& executed,
                             bool keep_timeline, int lnc = 0);

}  // namespace knit::sim
