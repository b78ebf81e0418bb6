#include "knit/codegen/machine_config.h"

#include <algorithm>

namespace knit::codegen {

namespace {

// Columns follow MachineConfig's field order; docs/simulator.md ("Machine configuration") lists
// them with their status. Sources in brackets, all pages of AWS's Neuron documentation:
//   [arch]   the NKI architecture guides: "Trainium/Inferentia2 Architecture Guide for NKI",
//            "Trainium2 Architecture Guide for NKI", "Trainium3 Architecture Guide for NKI"
//   [chip]   the Trainium, Trainium2 and Trainium3 chip pages (device HBM bandwidth)
//   [isa]    the "Estimated instruction cost" sections of the nki.isa API reference (Neuron
//            2.24-2.26), e.g. nki.isa.nc_matmul, nki.isa.iota
//   [dma]    "Introduction to DMA with NKI" and the NKI DMA bandwidth guide
//   [mm]     the NKI matrix multiplication tutorial's performance table (Trn1, Neuron 2.24)
//   [kopt]   "Introduction to NKI Kernel Optimization" (Trn2 profiles, fp32 matmul)
// "derived" = computed from documented figures, "estimated" = Knit's estimate, "cal" = calibrated
// by bench/calibration.py against [mm] / [kopt] (docs/performance.md).
const MachineConfig kConfigs[] = {
    {
        ir::Target::trn1,
        "NC-v2",
        /*pe_ghz*/ 2.8,
        /*act_ghz*/ 1.4,
        /*dve_ghz*/ 1.12,
        /*pool_ghz*/ 1.4,  // [arch]
        /*mm_min_cycles*/ 64,
        /*fp32_factor*/ 4,
        /*pe_pipe_cycles*/ 256,      // [isa] nc_matmul; pipe estimated
        /*peak_bf16_tflops*/ 91.75,  // derived: 128*128*2*pe_ghz
        /*min_ii*/ 64,
        /*overhead_cycles*/ 60,
        /*pool_start_cycles*/ 150,  // [isa], [arch], [isa] iota
        /*dve_perf_mode*/ false,
        /*act_16bit_factor*/ 1,  // [arch]
        /*act_table_ns*/ 1300,   // estimated, Trn2 profile in [dma]
        /*sync_ns*/ 75,          // estimated (50-100 ns)
        /*dma_engines*/ 16,
        /*dma_engine_bytes_per_ns*/ 17,  // [dma]
        /*hbm_bytes_per_ns*/ 410,        // derived: [chip] device BW / cores
        /*dma_fixed_ns*/ 1300,           // [dma] upper bound
        /*dma_efficiency*/ 0.65,         // cal: [mm] tiled / hoisted / blocked
        /*dma_half_chunk_bytes*/ 512,    // estimated (256-512 B)
        /*launch_ns*/ 15000,             // estimated (10-30 us)
    },
    {
        ir::Target::trn2,
        "NC-v3",
        2.4,
        1.2,
        0.96,
        1.2,  // [arch]
        64,
        4,
        256,   // [isa] nc_matmul; fp32 x4 derived from [kopt]
        78.6,  // derived: 128*128*2*pe_ghz
        64,
        60,
        150,  // [isa], [arch], [isa] iota
        true,
        1,     // [arch] VectorE perf mode
        1300,  // estimated
        75,    // estimated
        16,
        23,     // [dma], measured there: 23.1 B/ns
        362,    // derived: [chip] device BW / cores
        1300,   // [dma]
        1.0,    // cal: [kopt] fp32 tiled reaches the HBM-per-core peak
        512,    // estimated
        15000,  // estimated
    },
    {
        ir::Target::trn3,
        "NC-v4",
        2.4,
        1.2,
        1.2,
        1.2,  // [arch]
        64,
        4,
        256,   // [isa] nc_matmul; pipe estimated
        78.6,  // derived: 128*128*2*pe_ghz
        64,
        60,
        150,  // [isa], [arch], [isa] iota
        true,
        2,     // [arch] NC-v4: 2x bf16 on ScalarE
        1300,  // estimated
        75,    // estimated
        16,
        33,     // [dma]
        612,    // derived: [chip] device BW / cores
        1300,   // [dma]
        1.0,    // no published trn3 figure: as trn2 (estimated)
        512,    // estimated
        15000,  // estimated
    },
};

}  // namespace

double dma_peak_bytes_per_ns(const MachineConfig& c) {
  return std::min(c.dma_engines * c.dma_engine_bytes_per_ns, c.hbm_bytes_per_ns) * c.dma_efficiency;
}

const MachineConfig& machine_config(ir::Target target) {
  for (const MachineConfig& c : kConfigs)
    if (c.target == target) return c;
  return kConfigs[1];
}

}  // namespace knit::codegen
