// The reference interpreter: the living definition of every instruction's semantics.
//
// It executes a kernel's IR in program order on real bytes: HBM tensors are host buffers; SBUF
// and PSUM are per-partition byte arrays of the target's sizes, where each on-chip tensor is
// placed (its address= pin, else first fit) when first used and released after its last use;
// an automatically placed tensor starts fresh, a pinned one sees what its bytes hold (aliasing).
// Fresh tensors are filled with NaN / 4 and a per-byte "initialized" bitmap catches reads of
// never-written memory. Each instruction reads all its inputs before writing its outputs.
// Numerics follow ir/numerics.h; later fast paths must match this interpreter bit for bit.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "knit/ir/ir.h"
#include "knit/sim/host_tensor.h"

namespace knit::sim {

struct InterpretOptions {
  // A read of never-written memory is a runtime error (true) or a warning (false).
  bool uninitialized_read_is_error = true;
  // Receives warnings (uninitialized reads when not errors, accumulate on unwritten PSUM, ...).
  // Without a handler, warnings are collected in RunResult::warnings only.
  std::function<void(const std::string&)> on_warning;
  // Executed-instruction budget: a kernel whose while loop never ends fails instead of hanging.
  int64_t max_instructions = 1'000'000'000;
};

struct RunResult {
  std::vector<HostTensor> outputs;  // in the kernel's return order
  std::vector<std::string> warnings;
};

// Runs `kernel` on `args` (one per kernel parameter, matching shape and dtype). Arguments the
// kernel writes to are updated in place. Throws knit::Error for user and runtime errors.
RunResult interpret(const ir::Kernel& kernel, std::vector<HostTensor>& args, const InterpretOptions& options = {});

}  // namespace knit::sim
