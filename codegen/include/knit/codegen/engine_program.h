// The engine program: what a NeuronCore runs for a kernel (docs/codegen.md).
//
// A kernel body is cut into regions at its barrier instructions: the block instructions
// (loop / while / if / else / end), register instructions, `program` (the start of a grid
// instance's core) and the cross-core sync points (core_barrier, sendrecv). A barrier runs on
// the sync engine once every queue has drained, so registers are constant inside a region and
// a region starts with nothing in flight. Inside a region each instruction sits on one in-order
// queue (an engine's, or a DMA queue). Finishing an instruction increments its queue's
// semaphore; an instruction may wait for other queues' semaphores to reach counts (counted from
// the region's start). Waits exist only where a dependence crosses queues and is not already
// implied by earlier waits.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "knit/codegen/allocate.h"
#include "knit/ir/ir.h"

namespace knit::codegen {

// In-order instruction queues. pe = TensorE, act = ScalarE, dve = VectorE, pool = GpSimd; DMA
// instructions are spread round-robin over the DMA queues.
#define KNIT_QUEUES(X) \
  X(pe)                \
  X(act)               \
  X(dve)               \
  X(pool)              \
  X(dma0)              \
  X(dma1)              \
  X(dma2)              \
  X(dma3)
enum class Queue : uint8_t {
#define KNIT_X(q) q,
  KNIT_QUEUES(KNIT_X)
#undef KNIT_X
};
constexpr int kNumQueues = 8;
constexpr int kFirstDmaQueue = static_cast<int>(Queue::dma0);
constexpr int kNumDmaQueues = kNumQueues - kFirstDmaQueue;
const char* queue_name(Queue q);
using QueueCounts = std::array<int32_t, kNumQueues>;  // completed instructions per queue

// Wait until `queue` has completed `count` instructions of the current region.
struct Wait {
  Queue queue = Queue::pe;
  int32_t count = 0;
  bool operator==(const Wait&) const = default;
};

struct EngineInstr {
  uint32_t ir = 0;  // index of the instruction in the kernel body
  Queue queue = Queue::dve;
  std::vector<Wait> waits;
  bool operator==(const EngineInstr&) const = default;
};

// Body indices [begin, end) without barriers; `end` is the barrier that follows (or the body's
// size). Instructions are listed per queue, in queue order.
struct Region {
  uint32_t begin = 0, end = 0;
  std::array<std::vector<EngineInstr>, kNumQueues> queues;
  bool operator==(const Region&) const = default;
};

struct ProgramStats {
  std::array<int64_t, kNumQueues> instructions{};  // static counts: a loop body counts once
  int64_t barriers = 0;                            // instructions run by the sync engine between regions
  int64_t waits = 0;                               // semaphore waits
  int64_t dependences = 0;                         // cross-queue dependences the waits enforce
  int64_t dma_bytes = 0;                           // bytes written by DMA instructions, each counted once
  int64_t sbuf_high_water = 0;                     // bytes per partition
  int64_t psum_high_water = 0;
  std::string summary() const;
};

// Data a later stage derives from a finished program alone and reuses on every run (today the
// timing model's per-instruction costs, simulator/src/timing.cpp, its only user): computed once
// under the lock, then shared by the program's runs and copies. Codegen never looks inside.
struct DerivedData {
  std::mutex mutex;
  std::shared_ptr<const void> value;
};

struct EngineProgram {
  ir::Kernel kernel;  // the legalized kernel (its target is the program's target)
  MemoryPlan plan;
  std::vector<Region> regions;
  std::vector<int32_t> region_at;  // body index -> region starting there, else -1
  int64_t dependences = 0;         // cross-queue dependences the waits enforce
  // Set by lower() and from_text(), which verify the kernel and build or check the structure,
  // so the simulator need not repeat that on every run. Code that edits a program afterwards
  // must clear it and give it a fresh `derived`; a hand-built program leaves it false and is
  // checked when it runs.
  bool verified = false;
  std::shared_ptr<DerivedData> derived = std::make_shared<DerivedData>();

  ProgramStats stats() const;
  // Readable listing: regions, barriers, each instruction with its queue, concrete addresses
  // and waits, and its source line.
  std::string disassemble() const;
  // Text form: the kernel's IR text, then the schedule (allocations, regions, each queue's
  // instructions and waits); docs/codegen.md. from_text(to_text()) is the same program and
  // prints the same text. Malformed text is a user error (rule "ir-parse"), a schedule that does
  // not fit its kernel one with rule "corrupt-program"; the result is verified.
  std::string to_text() const;
  static EngineProgram from_text(std::string_view text, const std::string& source_name = "<engine program>");
};

// Body instructions that end a region (see above).
bool is_barrier(const ir::Instruction& inst);

// Every non-barrier instruction sits on exactly one queue of the region containing it, queues in
// body order; internal error otherwise (a hand-built or decoded program is checked with it).
void check_structure(const EngineProgram& p);

// The region's instructions in the order one issuer starts them when it always takes the ready
// queue head (its waits met) with the lowest body index: body order, unless a wait names a later
// instruction (a backward with_schedule edge). Shorter than the region when its waits deadlock.
std::vector<uint32_t> issue_order(const Region& region);

// Rebuilds `region_at` from `regions`.
void index_regions(EngineProgram& p);

}  // namespace knit::codegen
