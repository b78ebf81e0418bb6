// The lowering pipeline: IR kernel -> engine program. The passes, in order (lower.cpp reads
// top-down the same way; docs/codegen.md explains each):
//
//   verify -> legalize -> allocate -> engines -> dependences -> synchronize -> engine program
//
// Engine assignment runs before the dependence pass because dependences are kept per queue
// (the last reader of a byte range on each queue), which needs every instruction's queue.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "knit/codegen/engine_program.h"

namespace knit::codegen {

struct LowerOptions {
  std::optional<ir::Target> target;  // default: the kernel's own target
  // Directory for the numbered per-pass dumps. Empty: $KNIT_DEBUG_DIR (default "knit-debug")
  // when KNIT_DEBUG=1 is set in the environment, else no dumps.
  std::string debug_dir;
};

EngineProgram lower(const ir::Kernel& kernel, const LowerOptions& options = {});
// The same, taking the kernel over (no copy): `kernel` may be left empty, but lowering failing
// with a user error (the verifier's, a capacity error) leaves it as it was.
EngineProgram lower(ir::Kernel&& kernel, const LowerOptions& options = {});

// ---- The passes, each usable on its own (tests feed them directly) -------------------------

// legalize: the front ends already emit one ISA instruction per IR instruction (nl.matmul,
// nl.softmax, tile arithmetic are lowered while tracing, frontend/ and python/knit/), so what is
// left is the target: the kernel is re-targeted and re-verified, so an instruction or dtype the
// target lacks (nc_matmul_mx before trn3, double_row before trn2, a tile over its PSUM) is a user
// error naming the kernel line.
ir::Kernel legalize(ir::Kernel kernel, ir::Target target);

// engines: the queue of every body instruction (barriers get Queue::pe, unused). Explicit
// engine= choices are kept (the verifier has rejected illegal ones); engine=unknown follows the
// engines of the nki.isa docs: matmul / transpose -> TensorE; activation -> ScalarE; iota,
// affine_select, gathers, partition reductions, power -> GpSimd; other compute -> VectorE (GpSimd
// cannot touch PSUM); DMA instructions round-robin over the DMA queues.
std::vector<Queue> assign_engines(const ir::Kernel& kernel);

// dependences: for every instruction, the earlier instructions of its region on other queues
// whose accesses conflict with its own on allocated byte ranges (read after write, write after
// read, write after write). Only the latest conflicting instruction per queue is kept (queues
// are in order). Placing a tensor at its first use counts as writing its whole allocation.
// A scheduling edge (Instruction::after) between queues of one region is a dependence of kind
// `order` (same queue: queue order implies it; across a barrier: the barrier does). An edge to a
// later instruction (a backward with_schedule edge) is added by add_backward_edges.
struct Dependence {
  uint32_t from = 0, to = 0;  // body indices; from > to for a backward scheduling edge
  enum class Kind : uint8_t { raw, war, waw, order } kind = Kind::raw;
};
std::vector<Dependence> dependences(const ir::Kernel& kernel, const MemoryPlan& plan, const std::vector<Queue>& queues);

// Scheduling edges that make an instruction wait for one issued after it (schedule_edges.cpp):
// each becomes an `order` dependence from the later instruction, legal only when the two are in
// one region, on different queues, and the later one does not depend on the earlier (through
// `deps`, queue order or the edges added before it); otherwise a `schedule` user error naming
// both lines. Legal edges never change results: the two are independent.
void add_backward_edges(const ir::Kernel& kernel, const std::vector<Queue>& queues, std::vector<Dependence>& deps);

// synchronize + engine program: regions, queues in order, and the fewest waits that enforce
// every dependence (a wait is dropped when earlier waits already imply it). Waits are computed
// in issue order (body order, unless a backward edge makes an instruction follow a later one).
EngineProgram build_program(ir::Kernel kernel, MemoryPlan plan, const std::vector<Queue>& queues,
                            const std::vector<Dependence>& deps);

// Tensors whose live range starts at each body index (the reference interpreter and the
// engine program place them there).
std::vector<std::vector<int>> placements(const ir::Kernel& kernel, const std::vector<ir::LiveRange>& live);

}  // namespace knit::codegen
