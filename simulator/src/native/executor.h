// The native (JIT) execution path of the simulator: each data instruction whose operands are
// static byte-strided views runs as a body specialized for its shape and compiled with LLVM ORC
// (native/bodies.cpp, knit/jit/specializer.h); everything it computes is bit-identical to the
// reference executors (exec_*.cpp).
//
// What it does not run (counted in RunResult::interpreted): instances whose errors must name the
// element (a read of never-written memory: the reference raises or warns with the index), the
// random-number instructions on every backend (each draw advances a lane's generator state;
// plan_random.cpp), and the few layouts no body walks (plan.h, namespace why: more than 4 walk
// dims, dims that do not nest, ...), which are an error unless the backend is jit_fallback (then
// the reference runs them). Every other opcode that moves tensor data has a body
// (ir::moves_tensor_data; plan.h declares one planner per op). Instructions with an NC-v4
// .indirect() operand always run on the reference executors, by design
// (RunResult::indirect_compute_instructions), on every backend. The per-element
// reference path is the definition; this one is an exact fast path of it.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "../zeroed_bytes.h"
#include "knit/ir/ir.h"

namespace knit::codegen {
class Specializer;
struct SpecializeRequest;
}  // namespace knit::codegen

namespace knit::sim::native {
struct MatmulShape;
}

namespace knit::sim {

class Machine;
struct Memory;

class NativeExecutor {
 public:
  explicit NativeExecutor(Machine& m);
  struct Plan;  // the static part of running one instruction natively (plan.h)
  // Decides whether the kernel is worth compiling: when its static element work reaches the
  // threshold, prepare() now; otherwise instructions run on the reference executors until the
  // work done at run time reaches it (then prepare()). The threshold is the work at which
  // compiling pays (native/tiering.h: the bodies the kernel needs that are neither compiled in
  // this process nor in the disk cache, less the work earlier runs of the same shapes left to
  // the reference executors), or KNIT_JIT_THRESHOLD elements when set (0 = always), or 0 under
  // jit_strict. Building a body costs milliseconds, which a small kernel (a unit test's) run
  // once never earns back.
  void start();
  // Compiles the bodies of every instruction of the kernel whose shape is known before running
  // (all static views), in one module; dynamic instances compile on first use.
  void prepare();
  // Runs `inst` natively and returns true, or returns false (nothing touched) for the reference
  // executor to run it. Unless the backend is Backend::jit_fallback, an instruction it cannot run (see
  // RunResult::fallbacks) is a runtime error instead.
  bool run(const ir::Instruction& inst);

  int64_t native = 0;            // instructions executed natively
  int64_t interpreted = 0;       // instructions left to the reference executors
  int64_t indirect_compute = 0;  // of those, instructions with an .indirect() operand (always there)
  int64_t forwarded = 0;         // RunResult::forwarded_copies: copies skipped, less those run after all
  int64_t work_estimate = 0;     // RunResult::static_work
  int64_t break_even = 0;        // RunResult::break_even_work: the threshold start() compared it with
  // RunResult::fallbacks: each source line whose instruction the native path could not run, why.
  std::vector<std::string> fallbacks;

 private:
  // Why an instance goes to the reference executors; `diagnostic` when it is so that the
  // reference raises or warns with its exact message (not a limit of the native path).
  struct Refusal {
    const char* reason = nullptr;
    bool diagnostic = false;
  };
  const char* plan(const ir::Instruction& inst, Plan& out);  // why not natively, or null
  // Runs a plan: its checks, the body (unless `move_data` is false: a forwarded copy), and the
  // flags of what it writes.
  Refusal execute(const Plan& plan, bool move_data = true);
  // forward_note: a dma_copy of a kernel argument into a tile whose only readers are later
  // element-wise instructions or reductions (forwarded_copies, forwarding.h) moves no bytes when
  // it runs: it checks and marks the tile written as the copy would, and leaves itself
  // (concrete) in pending_ under each reader's body index. A reader then runs with its view of
  // the tile replaced by the copy's source, reading the argument's rows in place (a tile that
  // only carries a load to its readers is a pass over the data saved: the copy's write of the
  // tile). Nothing else names the tile and the argument is never written (borrowed: Machine's
  // params_written), so no one can tell; where a reader cannot run that way (its plan or checks
  // refuse), the copies pending for it run first (each once) and the reader as usual.
  bool run_forwarding(const ir::Instruction& inst, size_t pc, bool& ran);
  // Runs the copies pending for the reader at `pc` that have not run yet, as plain copies.
  void copy_pending(size_t pc);
  // Pieces of execute(): index checks of the gathers (local_gather's expanded indices into
  // gather_index_), the elements a predicated copy or nonzero_with_count writes (marked written
  // one by one while dst is not all written yet), a matmul's accumulation mode, the
  // per-partition operand columns, and the accumulator updates after a row fold.
  Refusal check_gather_indices(const Plan& p);
  bool select_predicated(const Plan& p, const Memory& dst, std::vector<int64_t>& selected);
  Refusal matmul_accumulation(const Plan& p, const Memory& dst, std::vector<float>& add_flag, bool& per_element);
  void scalar_columns(const ir::Instruction& inst, int64_t P, std::vector<float> (&col)[2]);
  void finish_folds(const ir::Instruction& inst, const std::vector<float>& folds, int64_t P);
  // Tiered compiling (see start): false while the kernel is too small to compile (inst is then
  // counted as interpreted, for the reference executors to run), counting inst's elements as
  // work done.
  bool warm(const ir::Instruction& inst);
  // Runs a body on `shape` (compiling it on first use), split over the worker threads where it
  // pays; bases are data[0..2], columns the per-partition columns (null: none).
  void dispatch(const char* body, const std::string& shape, int64_t scratch_floats,
                const std::array<uint8_t*, 3>& bases, const std::array<std::vector<float>*, 3>& columns);
  void matmul_mx(const ir::NcMatmulMx& op);
  // A matmul's K-sum on `mm` (its dst replaced by a dense [M, N] buffer) natively, then written
  // into `dst` by the reference's write_matmul_result, each element added or stored by its own
  // PSUM state, with its warnings (nc_matmul_mx, and nc_matmul when that state is not uniform).
  void sum_into_psum(native::MatmulShape mm, uint8_t* stationary, uint8_t* moving, const ir::View& dst,
                     ir::Accumulate accumulate);
  bool run_dma_compute(const ir::Instruction& inst, const ir::DmaCompute& op);
  // A direct dma_compute's plans (rows.cpp), pointing into `stages`, which it fills.
  const char* plan_dma_compute(const ir::Instruction& inst, const ir::DmaCompute& op,
                               std::vector<ir::Instruction>& stages, std::vector<Plan>& plans);
  bool run_shuffle(const ir::Instruction& inst, const ir::NcStreamShuffle& op);
  // nc_match_replace8 with dst_idx (native/plan_search.cpp): its two outputs as two row plans.
  bool run_match_replace8(const ir::Instruction& inst, const ir::NcMatchReplace8& op);
  // sequence_bounds' ids, read before its body runs: false when one is bad (the reference raises).
  bool segment_ids_valid(const Plan& p);
  // Runs planned one-row stages over rows (rows.cpp): each operand `picked` at row rows[i], the
  // others at row i, rows marked skipped left alone. copies[o], where given (one stage only), is
  // {a snapshot, the offset in its memory of the snapshot's byte 0}: input o is read from it (an
  // instruction that writes where it reads, as the reference reads its input whole first).
  bool move_rows(const ir::Instruction& inst, const std::vector<Plan>& plans,
                 const std::vector<std::vector<bool>>& picked, const std::vector<int64_t>& rows,
                 const std::vector<bool>& skipped, int64_t row_bytes,
                 const std::vector<std::pair<uint8_t*, int64_t>>& copies = {});
  // run() for an instruction through an indirect view, as `stages` run row by row. `whole_reads`:
  // the instruction reads its input whole before it writes (dma_copy), so its rows may move
  // within one tensor.
  bool run_rows(const ir::Instruction& inst, const ir::View& ind, const std::vector<ir::Instruction>& stages,
                ir::OobMode oob, bool unique, bool whole_reads);
  // The bodies of the kernel's instructions whose views are all static, into `out`; returns how
  // many data instructions have dynamic views (their bodies compile on first use).
  int64_t static_requests(std::vector<codegen::SpecializeRequest>& out);
  void compile(const std::vector<codegen::SpecializeRequest>& requests);
  // The compiled function of `body` on `shape` (compiling it on first use).
  void* compiled(const char* body, const std::string& shape);
  bool refuse(const ir::Instruction& inst, Refusal why);

  Machine& m_;
  codegen::Specializer& jit_;
  bool fixed_threshold_ = false;  // KNIT_JIT_THRESHOLD or jit_strict: no cost model
  int64_t threshold_ = 0;
  int64_t work_ = 0;                                 // elements touched by instructions run so far (until hot)
  bool hot_ = false;                                 // compiling pays: instructions run natively
  std::unordered_map<std::string, void*> compiled_;  // body + shape bytes -> function
  std::vector<float> scratch_;
  std::vector<int32_t> gather_index_;     // local_gather: the element each dst element reads
  std::vector<float> partial_sums_;       // dma_compute's chain of more than two sources
  std::array<ZeroedBytes, 3> snapshots_;  // inputs an output overlaps, by data[] index
  // A skipped copy (concrete), shared by the pending lists of its readers.
  struct SkippedCopy {
    ir::Instruction inst;
    bool copied = false;  // a reader could not read its source: the copy ran after all
  };
  std::unordered_map<size_t, std::vector<size_t>> forward_to_;                     // forwarded_copies: copy -> readers
  std::unordered_map<size_t, std::vector<std::shared_ptr<SkippedCopy>>> pending_;  // reader -> copies
};

// The process-wide specializer holding the embedded body library (created on first use).
codegen::Specializer& native_specializer();

}  // namespace knit::sim
