// The reference interpreter: the living definition of every instruction's semantics.
//
// It executes a kernel's IR in program order on real bytes: HBM tensors are host buffers; SBUF
// and PSUM are per-partition byte arrays of the target's sizes, where each on-chip tensor is
// placed (its address= pin, else by codegen::allocate) when first used and released after its last use;
// an automatically placed tensor starts fresh, a pinned one sees what its bytes hold (aliasing).
// Fresh tensors are filled with NaN / 4 and a per-byte "initialized" bitmap catches reads of
// never-written memory; values computed from them carry poison to where they matter
// (Uninitialized). Each instruction reads all its inputs before writing its outputs.
// Numerics follow ir/numerics.h; later fast paths must match this interpreter bit for bit.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "knit/codegen/engine_program.h"
#include "knit/ir/ir.h"
#include "knit/sim/host_tensor.h"

namespace knit::sim {

// How run_program picks the next queue among those whose next instruction may start:
// program_order reproduces the IR's order; round_robin and random (seeded) explore other legal
// interleavings, which must give the same results for a correctly synchronized program.
enum class Schedule : uint8_t { program_order, round_robin, random };

// How run_program executes data instructions: `jit` runs each instruction as a body specialized
// for its shape and compiled to native code with LLVM ORC (bit-identical to the reference
// executors; a kernel too small to be worth compiling runs on the reference executors), and an
// instruction the native path cannot run is a runtime error naming it and why. `jit_fallback`
// is `jit` that hands such instructions to the reference executors instead (listed in
// RunResult::fallbacks). `jit_strict` is `jit` that compiles every kernel (no break-even).
// `reference` runs every instruction through the reference executors, element by element.
// interpret() is always the reference.
enum class Backend : uint8_t { reference, jit, jit_strict, jit_fallback };

// What a read of never-written memory does (docs/simulator.md, "Never-written memory").
enum class Uninitialized : uint8_t {
  // The value read is poison, and so is every element computed from it (per the op table's
  // PoisonRule); poison is an error only where it matters: in a kernel output at the end of the
  // run, in a register (register_load), or as an indirect index. NKI's simulator reads NaN / 4 and
  // goes on, so kernels whose never-written values end in masked-off lanes run.
  report,
  warn,   // as report, but each such use is a warning
  error,  // strict: every read of a never-written byte is an error (uninitialized-read)
  off,    // no checks: never-written bytes read as NaN / 4
};

// $KNIT_MAX_INSTRUCTIONS (a positive whole number), else kDefaultInstructionBudget; any other
// value is an error (rule "instruction-limit").
inline constexpr int64_t kDefaultInstructionBudget = 1'000'000'000;
int64_t default_instruction_budget();

// One rank's operands of a collective, read before any rank of its group writes: what a
// CollectiveTransport carries between the processes of a torch.distributed job.
struct RankOperands {
  std::vector<uint32_t> src, src1;               // element bits, in the view's row-major order
  std::vector<uint8_t> src_poison, src1_poison;  // per element: from never-written memory (empty: none)
  std::vector<uint32_t> metadata;                // *_v: the [3, R] table, row-major (empty otherwise)
  // What must match between the ranks (kind, group, op, dim, dtype, shapes), and where the call is
  // ("file:line"): for the checks of a transport between processes.
  std::string call, where;
};
// Given the ranks that meet at a collective (in position order) and this rank's operands,
// returns every one of those ranks' operands, in that order.
using CollectiveTransport =
    std::function<std::vector<RankOperands>(const std::vector<int64_t>& members, const RankOperands& mine)>;

struct InterpretOptions {
  Uninitialized uninitialized = Uninitialized::report;
  // Receives warnings (poison reaching an output, accumulate on unwritten PSUM, ...).
  // Without a handler, warnings are collected in RunResult::warnings only.
  std::function<void(const std::string&)> on_warning;
  // Executed-instruction budget: a kernel whose while loop never ends fails instead of hanging,
  // with an error at the loop's line. Default: $KNIT_MAX_INSTRUCTIONS, else 10^9.
  int64_t max_instructions = default_instruction_budget();
  // Engine programs only (run_program):
  Backend backend = Backend::jit;
  Schedule schedule = Schedule::round_robin;
  uint64_t seed = 0;
  // Report two accesses from different queues to overlapping bytes (one a write) that no
  // semaphore wait orders, with both source lines.
  bool check_races = true;
  // Record the order in which regions and barriers ran (RunResult::executed), for timing.
  bool record_execution = false;
  // Run only the barriers (control flow, registers, core sync) and skip every data instruction:
  // the timing of a kernel whose inputs are shape placeholders (arguments may then have no
  // bytes). A register_load from tensor data is an error in this mode.
  bool timing_only = false;
  // Hand each output's memory over in HostTensor::block instead of copying it into
  // HostTensor::bytes (the Python binding, which wraps the block in the returned array).
  bool outputs_without_copy = false;
  // Called every few thousand executed instructions with the count so far (a progress bar).
  std::function<void(int64_t executed)> on_progress;
  // Multi-rank kernels: by default each `program` is a rank of this machine. With world_rank
  // >= 0 the kernel is one rank (world_rank of world_ranks) of a job whose other ranks run in
  // other processes; their collective operands come through `transport`.
  int64_t world_rank = -1, world_ranks = 0;
  CollectiveTransport transport;
};

// One step of an engine program run: a region (region >= 0) or a barrier at body index pc,
// on core `core`: the grid instance it belongs to (from its `program` marker; 0 without a grid),
// also when the instances run one after another because they never synchronize.
struct Executed {
  int32_t core = 0;
  int32_t region = -1;
  int32_t pc = 0;
};

struct RunResult {
  std::vector<HostTensor> outputs;  // in the kernel's return order
  // Per argument: whether some instruction writes it (only those can have changed).
  std::vector<bool> args_written;
  std::vector<std::string> warnings;
  std::vector<Executed> executed;  // with options.record_execution
  // Data and register instructions executed by native code / by the reference executors.
  int64_t native_instructions = 0;
  int64_t interpreted_instructions = 0;
  // Of those, instructions with an NC-v4 .indirect() operand: the reference executors run them on
  // every backend, by design (not fallbacks).
  int64_t indirect_compute_instructions = 0;
  // Of the native ones, dma_copy instructions whose reader read their source in place instead
  // (forward_note in simulator/src/native/executor.h).
  int64_t forwarded_copies = 0;
  // Instructions the jit backend handed to the reference executors because it cannot run them
  // (no native body, views it cannot walk, partial overlap, ...), one line each, in first-run
  // order: "file:line: opcode: reason". Not listed: kernels too small for compiling to pay, and
  // instances sent there so the reference names an error or warning (uninitialized reads).
  std::vector<std::string> fallbacks;
  // The jit backends' compile decision: the kernel's static element work (every operand of every
  // instruction of its body, loops traced into it counted per iteration), and the work at which
  // compiling its bodies pays (docs/jit.md, "When the JIT compiles"); it compiled at the start
  // when static_work >= break_even_work.
  int64_t static_work = 0;
  int64_t break_even_work = 0;
};

// Runs `kernel` on `args` (one per kernel parameter, matching shape and dtype). Arguments the
// kernel writes to are updated in place. Throws knit::Error for user and runtime errors.
RunResult interpret(const ir::Kernel& kernel, std::vector<HostTensor>& args, const InterpretOptions& options = {});

// Runs an engine program (codegen::lower) the way a NeuronCore would: barriers in order, each
// region's queues interleaved in any order the semaphores allow (options.schedule). Results
// equal interpret()'s bit for bit when the program is correctly synchronized.
RunResult run_program(const codegen::EngineProgram& program, std::vector<HostTensor>& args,
                      const InterpretOptions& options = {});

}  // namespace knit::sim
