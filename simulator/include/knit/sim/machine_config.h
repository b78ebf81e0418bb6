// The machine table lives in codegen (knit/codegen/machine_config.h): the engine assignment
// weighs the same costs the timing model charges. The simulator names it as its own.
#pragma once

#include "knit/codegen/machine_config.h"

namespace knit::sim {

using codegen::dma_peak_bytes_per_ns;
using codegen::machine_config;
using codegen::MachineConfig;

}  // namespace knit::sim
