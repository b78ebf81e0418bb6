// What an instruction's semantics see of the machine: the reference executors (exec_*.cpp) take an
// ExecState, never the Machine. It gives an instruction's operands as Tiles (P partitions x F
// elements, partition-major, with reads that decode to fp32 and check the initialized bitmap, and
// writes that round to the view's dtype), per-partition scalar columns, the 32-bit registers, the
// engine accumulators and the error and warning channel. Placement, liveness, queues, races,
// cores and the native path stay behind it in Machine (machine.h).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "knit/ir/ir.h"
#include "random.h"

namespace knit::sim {

struct Memory;  // memory_pool.h
class ExecState;

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
  // "<what> element [p, f] of tensor '<name>'", for messages about element i.
  std::string describe(int64_t i) const;
  // Marks element i written (initialized; matmul-written or not), as a write does; for the native
  // path, whose bodies write the bytes themselves.
  void mark_written(int64_t i, bool by_matmul);
  // Elements of an indirect view whose row index was out of range under oob_mode=skip: the
  // instruction must neither read nor write them.
  bool skipped(int64_t i) const { return !skipped_.empty() && skipped_[i]; }
  bool any_skipped() const { return !skipped_.empty(); }

 private:
  friend class Machine;
  // Reports a read of element i that is not defined (never written, or poison) to the machine.
  void check_init(int64_t i) const;

  ExecState* state_ = nullptr;
  Memory* mem_ = nullptr;
  std::vector<int64_t> offset_;   // byte offset of element i in mem_
  std::vector<uint8_t> skipped_;  // empty, or 1 per element dropped by oob_mode=skip
  std::string what_;              // operand description for messages
  int tensor_ = -1;
  int esize_ = 4;  // dtype_size(dtype), looked up once per operand
};

class ExecState {
 public:
  virtual ~ExecState() = default;

  // The operand `what` (e.g. "data1") of the current instruction, resolved to memory. An
  // indirect view reads its index tensor here; an out-of-range row is an error, or with
  // oob_mode=skip an element marked skipped.
  virtual Tile tile(const ir::View& v, const char* what, ir::OobMode oob = ir::OobMode::error) = 0;
  // A per-partition scalar operand: an immediate repeated P times, or a [P, 1] column's values.
  std::vector<float> column(const ir::Operand& o, int64_t P, const char* what);

  // 32-bit registers (register_* instructions, loop counters, dynamic offsets); reading one never
  // set is an error.
  int32_t reg(int id) const;
  void set_reg(int id, int64_t value);
  int32_t value(const ir::IntValue& v) const { return v.is_reg() ? reg(v.reg) : static_cast<int32_t>(v.imm); }

  // Engine accumulator registers (nki-api.md §4.8): one fp32 per partition lane.
  std::array<float, 128> scalar_acc{};
  std::array<float, 128> vector_acc{};
  // The executing core's random-number generators (random.h): made at seed 0 on first use, so
  // every run of a kernel starts from the same states.
  CoreGenerators& generators();

  virtual const ir::Kernel& kernel() const = 0;
  virtual const ir::Instruction& current() const = 0;
  virtual void warn(const std::string& message) = 0;
  [[noreturn]] virtual void fail(const std::string& rule, const std::string& message) const = 0;
  // The current instruction reads element i of t, which is not defined: never written at all
  // (never_written) or poison. Strict mode (Uninitialized::error) raises uninitialized-read;
  // otherwise the machine records the read, so that what the instruction computes from it is
  // poison, or reports it where it is used (a register, an index). `accumulating`: a matmul adds
  // into never-written PSUM, which strict mode only warns about (as NKI's simulator).
  virtual void undefined_read(const Tile& t, int64_t i, bool never_written, bool accumulating = false) = 0;

 protected:
  // The core whose instructions are executing (multi-core kernels); 0 otherwise.
  virtual int core() const { return 0; }
  void reset_registers(int count) {
    regs_.assign(static_cast<size_t>(count), 0);
    reg_set_.assign(static_cast<size_t>(count), 0);
  }

 private:
  std::vector<int32_t> regs_;
  std::vector<uint8_t> reg_set_;
  std::map<int, CoreGenerators> generators_;  // by core
};

// Instruction semantics, one overload per op (exec_*.cpp). Declared for every op; a missing one
// does not link.
#define KNIT_X(type, name) void exec(ExecState& m, const ir::type& op);
KNIT_OPS(KNIT_X)
#undef KNIT_X

}  // namespace knit::sim
