// The reference interpreter's machine: tensor placement and memories, liveness, the sequencer
// (control flow, cores, engine-program regions with the race checker) and the native path. The
// executors (exec_*.cpp) see only its ExecState (exec_state.h).
#pragma once

#include <array>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "collectives.h"
#include "exec_state.h"
#include "knit/codegen/access.h"
#include "knit/codegen/allocate.h"
#include "knit/codegen/engine_program.h"
#include "knit/ir/ir.h"
#include "knit/ir/numerics.h"
#include "knit/ir/op_traits.h"
#include "knit/sim/interpreter.h"
#include "memory_pool.h"
#include "native/executor.h"

namespace knit::sim {

class Machine : public ExecState {
 public:
  Machine(const ir::Kernel& kernel, std::vector<HostTensor>& args, const InterpretOptions& options);
  // Runs an engine program instead: its regions' queues interleave as the semaphores allow
  // (engine_run.cpp), with its allocation.
  Machine(const codegen::EngineProgram& program, std::vector<HostTensor>& args, const InterpretOptions& options);
  ~Machine();

  // Executes the whole body, then copies outputs and written-back arguments out.
  RunResult run();

  Tile tile(const ir::View& v, const char* what, ir::OobMode oob = ir::OobMode::error) override;

  const ir::Kernel& kernel() const override { return kernel_; }
  // The memory pool's layouts and memories, for the native path (memory_pool.h).
  using Layout = MemoryPool::Layout;
  bool layout_of(const ir::View& v, Layout& out) const { return pool_->layout_of(v, out); }
  int64_t partition_capacity(ir::Buffer b) const { return pool_->partition_capacity(b); }
  Memory* memory_of(const ir::View& v) const { return pool_->memory_of(v); }
  const ir::Instruction& current() const override { return *current_; }
  // The body index of the instruction executing (execute_at's pc).
  size_t current_pc() const { return current_pc_; }
  void warn(const std::string& message) override;
  [[noreturn]] void fail(const std::string& rule, const std::string& message) const override;
  void undefined_read(const Tile& t, int64_t i, bool never_written, bool accumulating = false) override;
  Backend backend() const { return options_.backend; }

 protected:
  int core() const override { return core_; }

 private:
  Machine(const ir::Kernel& kernel, const codegen::EngineProgram* program, std::vector<HostTensor>& args,
          const InterpretOptions& options);
  // tile() of an .indirect() view: each element's offset through the index tile.
  void column_offsets(const ir::View& v, const char* what, Tile& tile);
  // Block matches and, per body index, the on-chip tensors placed / released there.
  void compute_liveness();
  // Whether `inst`, where tensor `id`'s life starts, writes every byte of it before anything
  // reads it (see MemoryPool::place).
  bool overwrites_whole(const ir::Instruction& inst, int id) const;
  // Which parameters some instruction may write (the accesses the dependence analysis and race
  // checker use, so a write is never missed): only those are copied in and back out.
  std::vector<bool> params_written() const;
  // The warning for output `t` when `unwritten` of its bytes were never written, or nullopt.
  std::optional<std::string> unwritten_output_warning(const ir::TensorDecl& t, int64_t unwritten) const;
  // Kernel output o (an index into kernel().outputs) for the caller, after the run.
  HostTensor output_tensor(size_t o, const std::vector<HostTensor>& done);
  void check_host_memory() const;
  // Executes body[pc] and returns the next pc (control-flow instructions jump; with an engine
  // program, a region's start runs the whole region and returns its end).
  size_t step(size_t pc);
  // Places the tensors that start living at body[pc], then executes it (registers folded in).
  // `check`, when given, sees the byte ranges the concrete instruction touches before it runs.
  void execute_at(size_t pc, const std::function<void(const std::vector<codegen::Access>&)>& check = {});
  void count_executed(size_t pc);
  void fail_over_budget(size_t pc);  // raises (fail)
  size_t run_region(const codegen::Region& region);
  void check_placed(size_t pc, int queue);
  [[noreturn]] void race(const codegen::Access& a, const codegen::Epoch& earlier, bool earlier_wrote, size_t pc,
                         int queue);
  [[noreturn]] void semaphore_deadlock(const codegen::Region& region,
                                       const std::array<size_t, codegen::kNumQueues>& head,
                                       const codegen::QueueCounts& done);
  size_t control(size_t pc, const ir::Instruction& inst);
  // Multi-core kernels (core_barrier / sendrecv): each grid instance's instructions run in
  // order as one core; cores interleave only at their synchronization instructions.
  struct Core {
    int64_t rank = 0;
    size_t pc = 0, end = 0;
    bool done() const { return pc >= end; }
  };
  void run_cores();
  bool release_barriers(std::vector<Core>& cores);
  bool exchange(std::vector<Core>& cores);
  // Collectives (machine_collectives.cpp).
  bool run_collectives(std::vector<Core>& cores);
  int64_t world_rank(const Core& c) const;
  int64_t world_ranks(const std::vector<Core>& cores) const;
  std::vector<int64_t> members_of(const std::vector<Core>& cores, size_t c);
  std::vector<size_t> arrived(const std::vector<Core>& cores, size_t c, const std::vector<int64_t>& members);
  RankOperands read_operands(const Core& core);
  void write_received(const Core& core, const Received& got);
  void perform_collective(std::vector<Core>& cores, const std::vector<size_t>& at, const std::vector<int64_t>& members);
  [[noreturn]] void deadlock(const std::vector<Core>& cores);
  void execute(const ir::Instruction& inst);

  // Poison (poison.cpp, docs/simulator.md "Never-written memory"). The undefined input elements
  // the current instruction read, per operand, each operand's with the origin of its poison: the
  // never-written read it comes from (an index into origins_), which the reports name.
  struct PoisonedRead {
    std::string what;  // operand name, as given to tile()
    int64_t P = 0, F = 0;
    std::vector<int64_t> elements;
    int origin = -1;
  };
  struct PoisonOrigin {
    SourceLoc loc;
    std::string read;  // "<opcode> reads <element>"
  };
  // The origin of an undefined read of element i of t: this read when never written, else the
  // origin of the poison last written into t's tensor.
  int poison_origin_of(const Tile& t, int64_t i, bool never_written);
  // Whether the current read of t is a use that must be defined (a register, an index).
  bool is_poison_sink(const Tile& t) const;
  [[noreturn]] void strict_uninitialized_read(const Tile& t, int64_t i) const;
  // An error in the default mode (a warning with KNIT_UNINITIALIZED=warn, or when warn_only).
  void report_poison(const std::string& rule, const std::string& message, const SourceLoc& loc, bool warn_only = false);
  std::string poison_origin(int origin) const;
  // After inst ran: its outputs' elements computed from the poisoned reads become poison.
  void propagate_poison(const ir::Instruction& inst);
  void poison_output(const std::vector<PoisonedRead>& reads, ir::PoisonRule rule, const Tile& out,
                     const std::string& out_name);
  // At the end of the run: poison in a kernel output or a written argument is reported.
  void check_outputs_defined();
  // A copy of inst with registers folded into its views' offsets, verified against the
  // concrete values (bounds and partition rules).
  ir::Instruction concretize(const ir::Instruction& inst) const;

  const codegen::EngineProgram* program_ = nullptr;  // null: the reference interpreter
  // A timing-only run of an engine program: its regions are timed, not executed, so no tensor
  // is placed and no on-chip memory or tensor lives are needed.
  bool times_regions_only() const { return options_.timing_only && program_; }
  const ir::Kernel& kernel_;
  std::vector<HostTensor>& args_;
  InterpretOptions options_;
  std::vector<std::string> warnings_;
  std::unique_ptr<NativeExecutor> native_;               // Backend::jit
  codegen::MemoryPlan plan_;                             // SBUF/PSUM addresses of every on-chip tensor
  std::unique_ptr<MemoryPool> pool_;                     // after plan_, which it refers to
  std::vector<std::vector<int>> place_at_, release_at_;  // on-chip tensor ids per body index
  std::vector<bool> overwritten_at_place_;               // by tensor: overwrites_whole at the instruction placing it
  std::vector<bool> params_written_;                     // params_written(), for a run with data
  std::vector<size_t> match_;                            // block instructions: index of the matching else/end/opener
  std::vector<int64_t> loop_stop_;                       // per loop instruction: its stop bound, read at entry
  int core_ = 0;                                         // the core whose instructions are executing
  std::vector<Executed> executed_log_;
  codegen::AccessTracker races_;  // accesses of the running region, for the race checker
  uint64_t rng_state_ = 0;        // Schedule::random
  int64_t executed_ = 0;
  const ir::Instruction* current_ = nullptr;
  size_t current_pc_ = 0;
  int64_t warned_at_ = -1;
  std::vector<PoisonedRead> poison_reads_;
  std::vector<PoisonOrigin> origins_;  // one per source location that read never-written memory
  std::map<std::tuple<std::string, int, int>, int> origin_at_;  // (file, line, column) -> origin
  int origin_of_read_ = -1;                                     // the poison origin of the last collective's operands
  std::vector<int> tensor_origin_;  // per tensor: the origin of the poison last written there, or -1
};

}  // namespace knit::sim
