// The reference interpreter's machine state and operand access. Executors (exec_*.cpp) see an
// instruction's operands as Tiles: P partitions x F elements, partition-major, with reads that
// decode to fp32 (checking the initialized bitmap) and writes that round to the view's dtype.
#pragma once

#include <array>
#include <cstdlib>
#include <functional>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "knit/codegen/access.h"
#include "knit/codegen/allocate.h"
#include "knit/codegen/engine_program.h"
#include "knit/ir/ir.h"
#include "knit/ir/numerics.h"
#include "knit/sim/interpreter.h"
#include "byte_flags.h"
#include "native/executor.h"
#include "zeroed_bytes.h"

namespace knit::sim {

struct Memory {
  ZeroedBytes bytes;
  ByteFlags init;        // 1 where the byte was ever written; empty: every byte was (arguments)
  ByteFlags mm_written;  // PSUM only (empty elsewhere): 1 where the last write was a matmul's
  // zero_bytes false: the caller fills every byte itself (a fresh HBM tensor's NaN fill).
  void resize(size_t n, bool track_matmul = false, bool zero_bytes = true) {
    bytes.reset(n, zero_bytes);
    init.reset(n);
    mm_written.reset(track_matmul ? n : 0);
  }
  // An argument's memory: `n` bytes the caller fills, all initialized (no bitmap to keep).
  void resize_initialized(size_t n) {
    bytes.reset(n, /*zero=*/false);
    init.reset(0);
    mm_written.reset(0);
  }
  // An argument no instruction writes: its caller's bytes, in place, all initialized.
  void borrow_initialized(std::span<const uint8_t> in) {
    bytes.borrow(in.data(), in.size());
    init.reset(0);
    mm_written.reset(0);
  }
  bool tracks_init() const { return init.size() != 0; }
  bool tracks_matmul() const { return mm_written.size() != 0; }
};

class Machine;

class Tile {
 public:
  int64_t P = 0, F = 0;
  ir::DType dtype = ir::DType::float32;

  int64_t size() const { return P * F; }
  int64_t at(int64_t p, int64_t j) const { return p * F + j; }

  float read(int64_t i) const;
  void write(int64_t i, float v);
  uint32_t read_bits(int64_t i) const;
  void write_bits(int64_t i, uint32_t bits);
  int64_t read_int(int64_t i) const;
  void write_int(int64_t i, int64_t v);
  // Every element, in order: the "read all inputs, then write" pattern of the executors.
  std::vector<float> read_all() const;
  std::vector<uint32_t> read_all_bits() const;
  void write_all(const std::vector<float>& values);
  void write_all_bits(const std::vector<uint32_t>& bits);
  // PSUM accumulation state: was element i last written by a matmul?
  bool matmul_written(int64_t i) const;
  // A matmul's write: stores v and sets the matmul-written flag.
  void write_from_matmul(int64_t i, float v);
  bool is_initialized(int64_t i) const;
  // Marks element i written (initialized; matmul-written or not), as a write does; for the native
  // path, whose bodies write the bytes themselves.
  void mark_written(int64_t i, bool by_matmul);
  // Elements of an indirect view whose row index was out of range under oob_mode=skip: the
  // instruction must neither read nor write them.
  bool skipped(int64_t i) const { return !skipped_.empty() && skipped_[i]; }
  bool any_skipped() const { return !skipped_.empty(); }

 private:
  friend class Machine;
  void check_init(int64_t i) const;

  Machine* machine_ = nullptr;
  Memory* mem_ = nullptr;
  std::vector<int64_t> offset_;  // byte offset of element i in mem_
  std::vector<uint8_t> skipped_;  // empty, or 1 per element dropped by oob_mode=skip
  std::string what_;             // operand description for messages
  int tensor_ = -1;
  int esize_ = 4;  // dtype_size(dtype), looked up once per operand
};

class Machine {
 public:
  Machine(const ir::Kernel& kernel, std::vector<HostTensor>& args, const InterpretOptions& options);
  // Runs an engine program instead: its regions' queues interleave as the semaphores allow
  // (engine_run.cpp), with its allocation.
  Machine(const codegen::EngineProgram& program, std::vector<HostTensor>& args, const InterpretOptions& options);
  ~Machine();

  // Executes the whole body, then copies outputs and written-back arguments out.
  RunResult run();

  // The operand `what` (e.g. "data1") of the current instruction, resolved to memory. An
  // indirect view reads its index tensor here; an out-of-range row is an error, or with
  // oob_mode=skip an element marked skipped.
  Tile tile(const ir::View& v, const char* what, ir::OobMode oob = ir::OobMode::error);
  // A per-partition scalar operand: an immediate repeated P times, or a [P, 1] column's values.
  std::vector<float> column(const ir::Operand& o, int64_t P, const char* what);

  // 32-bit registers (register_* instructions, loop counters, dynamic offsets).
  int32_t reg(int id) const;
  void set_reg(int id, int64_t value);
  int32_t value(const ir::IntValue& v) const { return v.is_reg() ? reg(v.reg) : static_cast<int32_t>(v.imm); }

  const ir::Kernel& kernel() const { return kernel_; }
  // A static view's elements as a byte-strided walk of its tensor's memory: element
  // (i_0, .., i_k) is at base + sum i_d * stride[d], the partition dim of an on-chip view moving by
  // whole partitions. False for views this does not cover (dynamic, indirect, spilling across
  // partitions), which take the per-element path.
  struct Layout {
    int64_t base = 0;
    std::vector<int64_t> num, stride;
  };
  bool layout_of(const ir::View& v, Layout& out) const;
  // Bytes between the starts of two partitions of an on-chip memory (SBUF or PSUM).
  int64_t partition_capacity(ir::Buffer b) const {
    return b == ir::Buffer::sbuf ? sbuf_partition_bytes_ : psum_partition_bytes_;
  }
  // The memory a live tensor's view lies in (HBM buffer, or its core's SBUF / PSUM).
  Memory* memory_of(const ir::View& v) const { return placement_[v.tensor].mem; }
  const ir::Instruction& current() const { return *current_; }
  void warn(const std::string& message);
  [[noreturn]] void fail(const std::string& rule, const std::string& message) const;
  bool uninitialized_is_error() const { return options_.uninitialized_read_is_error; }
  Backend backend() const { return options_.backend; }

  // Engine accumulator registers (nki-api.md §4.8): one fp32 per partition lane.
  std::array<float, 128> scalar_acc{};
  std::array<float, 128> vector_acc{};

 private:
  Machine(const ir::Kernel& kernel, const codegen::EngineProgram* program, std::vector<HostTensor>& args,
          const InterpretOptions& options);
  struct Placement {
    Memory* mem = nullptr;
    int64_t partition = 0;   // first partition (on-chip)
    int64_t offset = 0;      // byte offset within a partition (on-chip) or the buffer (HBM)
    int64_t partition_bytes = 0;  // bytes per partition of the tensor (on-chip)
    bool live = false;
  };
  void place(int id);
  void release(int id);
  bool linear_offsets(const ir::View& v, std::vector<int64_t>& out) const;
  // Block matches and, per body index, the on-chip tensors placed / released there.
  void compute_liveness();
  // Whether `inst`, where tensor `id`'s life starts, writes every byte of it before anything
  // reads it (see place()).
  bool overwrites_whole(const ir::Instruction& inst, int id) const;
  // Which parameters some instruction may write (the accesses the dependence analysis and race
  // checker use, so a write is never missed): only those are copied in and back out.
  std::vector<bool> params_written() const;
  // Executes body[pc] and returns the next pc (control-flow instructions jump; with an engine
  // program, a region's start runs the whole region and returns its end).
  size_t step(size_t pc);
  // Places the tensors that start living at body[pc], then executes it (registers folded in).
  // `check`, when given, sees the byte ranges the concrete instruction touches before it runs.
  void execute_at(size_t pc, const std::function<void(const std::vector<codegen::Access>&)>& check = {});
  void count_executed();
  size_t run_region(const codegen::Region& region);
  void check_placed(size_t pc, int queue);
  [[noreturn]] void race(const codegen::Access& a, const codegen::Epoch& earlier, bool earlier_wrote, size_t pc,
                         int queue);
  [[noreturn]] void semaphore_deadlock(const codegen::Region& region, const std::array<size_t, codegen::kNumQueues>& head,
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
  [[noreturn]] void deadlock(const std::vector<Core>& cores);
  void execute(const ir::Instruction& inst);
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
  std::vector<Memory> sbuf_, psum_;  // one per core (codegen::MemoryPlan::cores)
  // Bytes between partitions in the simulator's SBUF / PSUM: the used part of a partition
  // (highest allocated address), not the target's capacity.
  int64_t sbuf_partition_bytes_ = 0, psum_partition_bytes_ = 0;
  std::vector<Memory> hbm_;  // one per tensor id (unused for on-chip tensors)
  std::vector<Placement> placement_;
  std::unique_ptr<NativeExecutor> native_;  // Backend::jit
  codegen::MemoryPlan plan_;  // SBUF/PSUM addresses of every on-chip tensor
  std::vector<std::vector<int>> place_at_, release_at_;  // on-chip tensor ids per body index
  std::vector<bool> overwritten_at_place_;  // by tensor: overwrites_whole at the instruction placing it
  std::vector<bool> params_written_;        // params_written(), for a run with data
  std::vector<size_t> match_;        // block instructions: index of the matching else/end/opener
  std::vector<int64_t> loop_stop_;   // per loop instruction: its stop bound, read at entry
  int core_ = 0;                   // the core whose instructions are executing
  std::vector<Executed> executed_log_;
  codegen::AccessTracker races_;  // accesses of the running region, for the race checker
  uint64_t rng_state_ = 0;         // Schedule::random
  std::vector<int32_t> regs_;
  std::vector<uint8_t> reg_set_;
  int64_t executed_ = 0;
  const ir::Instruction* current_ = nullptr;
  int64_t warned_at_ = -1;
};

// Instruction semantics, one overload per op (exec_*.cpp).
#define KNIT_X(type, name) void exec(Machine& m, const ir::type& op);
KNIT_OPS(KNIT_X)
#undef KNIT_X

}  // namespace knit::sim
