#include "knit/sim/machine_config.h"

namespace knit::sim {

namespace {

// Columns follow MachineConfig's field order. Sources: hw-model.md sections in brackets;
// "cal" = calibrated against §3.1/§3.2 by bench/calibration.py (see docs/performance.md).
const MachineConfig kConfigs[] = {
    {
        ir::Target::trn1, "NC-v2",
        /*pe_ghz*/ 2.8, /*act_ghz*/ 1.4, /*dve_ghz*/ 1.12, /*pool_ghz*/ 1.4,  // [§1.2]
        /*mm_min_cycles*/ 64, /*fp32_factor*/ 4, /*pe_pipe_cycles*/ 256,      // [§5.2]
        /*peak_bf16_tflops*/ 91.75,                                           // [§1.3 derived]
        /*min_ii*/ 64, /*overhead_cycles*/ 60, /*pool_start_cycles*/ 150,     // [§5.3, §5.6, §1.6]
        /*dve_perf_mode*/ false, /*act_16bit_factor*/ 1,                      // [§1.4, §1.5]
        /*act_table_ns*/ 1300,                                                // [§5.4 estimated]
        /*sync_ns*/ 75,                                                       // [§5.6 estimated]
        /*dma_engines*/ 16, /*dma_engine_bytes_per_ns*/ 17,                   // [§1.8]
        /*hbm_bytes_per_ns*/ 410,                                             // [§1.1 derived]
        /*dma_fixed_ns*/ 1300,                                                // [§1.8 upper bound]
        /*dma_efficiency*/ 0.65,  // cal: §3.1 tiled / hoisted / blocked (docs/performance.md)
        /*dma_half_chunk_bytes*/ 512,                                         // [§5.7 estimated]
        /*launch_ns*/ 15000,                                                  // [§5.8 estimated]
    },
    {
        ir::Target::trn2, "NC-v3",
        2.4, 1.2, 0.96, 1.2,  // [§1.2]
        64, 4, 256,           // [§5.2; fp32 x4 derived from §3.2]
        78.6,                 // [§1.3 derived]
        64, 60, 150,          // [§5.3, §5.6, §1.6]
        true, 1,              // [§1.4 perf mode]
        1300,                 // [§5.4]
        75,                   // [§5.6]
        16, 23,               // [§1.8, verified 23.1 B/ns]
        362,                  // [§1.1 derived]
        1300,                 // [§1.8]
        1.0,                  // cal: §3.2 fp32 tiled reaches the HBM-per-core peak
        512,                  // [§5.7]
        15000,                // [§5.8]
    },
    {
        ir::Target::trn3, "NC-v4",
        2.4, 1.2, 1.2, 1.2,  // [§1.2]
        64, 4, 256,          // [§5.2]
        78.6,                // [§1.3 derived]
        64, 60, 150,         // [§5.3, §5.6, §1.6]
        true, 2,             // [§1.4, §1.5 NC-v4 2x bf16 on ScalarE]
        1300,                // [§5.4]
        75,                  // [§5.6]
        16, 33,              // [§1.8]
        612,                 // [§1.1 derived]
        1300,                // [§1.8]
        1.0,                 // no published trn3 figure: as trn2 (estimated)
        512,                 // [§5.7]
        15000,               // [§5.8]
    },
};

}  // namespace

const MachineConfig& machine_config(ir::Target target) {
  for (const MachineConfig& c : kConfigs)
    if (c.target == target) return c;
  return kConfigs[1];
}

}  // namespace knit::sim
