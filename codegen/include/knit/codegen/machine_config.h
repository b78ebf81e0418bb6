// NeuronCore timing facts per target, in one table (machine_config.cpp). Every constant names
// its source (a page of AWS's Neuron documentation, named in machine_config.cpp) and whether the
// number is documented, derived, estimated, or calibrated here against the published
// measurements (bench/calibration.py); docs/simulator.md tabulates them. The cost formulas that
// use them live in cost.cpp. Both sit below the simulator because the engine assignment
// (lower.cpp) weighs the same costs as the timing replay.
#pragma once

#include "knit/ir/types.h"

namespace knit::codegen {

struct MachineConfig {
  ir::Target target;
  const char* core_name;  // "NC-v2" / "NC-v3" / "NC-v4"

  // Engine clocks, GHz (NKI architecture guides, documented).
  double pe_ghz, act_ghz, dve_ghz, pool_ghz;

  // TensorE (architecture guides; nki.isa.nc_matmul's cost section).
  int mm_min_cycles;        // MM_INIT_LATENCY floor of a MultiplyMoving (documented v2)
  int fp32_factor;          // fp32 matmul cost multiple (documented v2; derived v3 from Trn2 profiles)
  int pe_pipe_cycles;       // fill/drain before the last PSUM write (estimated)
  double peak_bf16_tflops;  // 128*128*2*f (derived)

  // VectorE / ScalarE / GpSimd (nki.isa cost sections, architecture guides).
  int min_ii;             // MIN_II of VectorE / ScalarE (documented)
  int overhead_cycles;    // per-instruction access setup OVH (documented v2)
  int pool_start_cycles;  // GPSIMD_START (documented)
  bool dve_perf_mode;     // NC-v3+ 2x/4x bf16 modes of VectorE (documented)
  int act_16bit_factor;   // ScalarE elements/cycle for 16-bit data (2 on NC-v4, documented)
  double act_table_ns;    // activation-table switch (estimated from a Trn2 figure)

  // Synchronization: a semaphore seen by another engine (estimated).
  double sync_ns;

  // DMA ("Introduction to DMA with NKI", the NKI DMA bandwidth guide).
  int dma_engines;                 // per core (documented)
  double dma_engine_bytes_per_ns;  // practical peak per engine (documented; v3 verified)
  double hbm_bytes_per_ns;         // per core (derived: device bandwidth / cores)
  double dma_fixed_ns;             // per transfer: descriptors + semaphores (documented upper bound)
  double dma_efficiency;           // fraction of the peak large transfers reach (calibrated on published matmuls)
  double dma_half_chunk_bytes;     // per-row descriptor overhead, as bytes (estimated)

  // Whole kernel: launch, start-up, tear-down (estimated).
  double launch_ns;
};

const MachineConfig& machine_config(ir::Target target);

// The core's DMA rate for large transfers: its engines' peak, capped by its HBM bandwidth, at the
// calibrated efficiency (bytes / ns).
double dma_peak_bytes_per_ns(const MachineConfig& c);

}  // namespace knit::codegen
