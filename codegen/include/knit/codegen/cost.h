// What one instruction costs on one engine queue (cost.cpp, docs/simulator.md "Instruction
// costs"). The timing replay (simulator/src/timing.cpp) charges these costs; the engine
// assignment (lower.cpp, assign_engines) weighs them to place instructions whose engine the
// kernel leaves open. One formula per instruction class, constants from machine_config.h.
#pragma once

#include <cstdint>

#include "knit/codegen/engine_program.h"
#include "knit/codegen/machine_config.h"

namespace knit::codegen {

// What one instruction costs on its engine, in ns: `busy` keeps the engine (or, for DMA, the
// core's DMA bandwidth) occupied; `latency` more passes before its result is visible.
struct InstrCost {
  double busy_ns = 0;
  double latency_ns = 0;
  double fixed_ns = 0;     // DMA: descriptor + trigger time before the data moves
  double flops = 0;        // model FLOPs (matmul: 2*K*M*N)
  double pe_array_ns = 0;  // TensorE time at full array use (for HFU)
  int64_t dma_bytes = 0;
  int64_t hbm_read_bytes = 0, hbm_write_bytes = 0;  // the DMA's HBM side(s)
  int act_table = -1;                               // ScalarE function set the instruction needs (-1: none)
};
InstrCost instruction_cost(const ir::Kernel& k, const ir::Instruction& inst, Queue queue, const MachineConfig& config);

}  // namespace knit::codegen
