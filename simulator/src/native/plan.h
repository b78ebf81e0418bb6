// The planning half of the native path (internal to simulator/src/native): an instruction's
// operands as byte-strided walks of their memories, the shape bytes a body is specialized on, and
// the reasons an instruction is left to the reference executors. NativeExecutor::plan (plan.cpp)
// hands each instruction to its op's planner, plan_op, in the file of its family (plan_alu.cpp,
// plan_data.cpp, plan_select.cpp, plan_reduce.cpp); executor.cpp runs the plans; rows.cpp runs
// indirect views row by row.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../byte_flags.h"
#include "../machine.h"
#include "executor.h"
#include "knit/ir/ir.h"
#include "knit/ir/op_traits.h"
#include "shapes.h"

namespace knit::sim {

// Why plan() leaves an instruction to the reference executors (listed in RunResult::fallbacks).
namespace why {
inline constexpr const char* no_body = "no native body for this opcode yet";
inline constexpr const char* indirect =
    "an operand is indirect (vector_offset): which rows it touches is read at run time";
inline constexpr const char* spills =
    "an operand has a dim that neither steps by whole partitions nor stays inside one partition";
inline constexpr const char* walk_dims = "its operands need more than 4 strided dims after merging";
inline constexpr const char* no_nest = "its operands' dims do not nest (no common walk of their elements)";
inline constexpr const char* partitions =
    "its operands do not share one partition dim (only a copy moves data between partitions)";
inline constexpr const char* free_dims =
    "an operand is not one [partition, free] block (it is in HBM, or its free dims do not merge into one)";
inline constexpr const char* perf_mode = "its double_row operands' free sizes are odd";
inline constexpr const char* transpose_rank = "its axes do not match its source's dims";
inline constexpr const char* reduced_run = "its reduced dims do not merge into two strided dims";
inline constexpr const char* operand_kind = "its source is neither a tile nor an immediate";
// Through an indirect view, and dma_compute (native/rows.cpp):
inline constexpr const char* both_indirect = "both of its operands are indirect";
inline constexpr const char* indirect_dim = "its indirect dim is not the view's first dim";
inline constexpr const char* indirect_on_chip = "its indirect view is on chip";
inline constexpr const char* same_tensor = "it adds rows of a tensor into rows of the same tensor";
inline constexpr const char* same_tensor_skip =
    "it copies between rows of one tensor and skips out-of-range rows (moved element by element)";
inline constexpr const char* row_per_index = "its other operand's first dim does not have one row per index";
inline constexpr const char* short_index = "its vector_offset has fewer entries than the indirect dim has rows";
inline constexpr const char* partial_sums =
    "it scatter-adds more than two sources into indirect rows of a dst that is not fp32";
inline constexpr const char* late_source = "it scatter-adds a source after the second from its dst's tensor";
inline constexpr const char* shuffle_dtypes = "its src and dst dtypes differ";
inline constexpr const char* gather_dtypes = "its data and dst dtypes differ";
inline constexpr const char* gather_width =
    "its dst's free size is not its valid indices x num_elem_per_idx (the rest would be zeroed)";
inline constexpr const char* unwritten_read = "reads never-written bytes";  // diagnostic: the reference names them
inline constexpr const char* partly_out =
    "an oob_mode=skip row lies partly inside its tensor (skipped element by element)";
}  // namespace why

// One operand of a planned instruction: where it lies and how the body walks it.
struct Operand {
  const ir::View* view = nullptr;
  Machine::Layout layout;
  int64_t n[native::kWalkDims] = {1, 1, 1, 1};
  int64_t step[native::kWalkDims] = {0, 0, 0, 0};
  int esize = 4;
  bool written = false;
  bool partitioned = false;  // layout dim 0 is the partition dim (an on-chip view)
  // A transposed operand's dims in the order the walk takes them (`layout` stays the view's
  // own, for the overlap and initialized-byte checks).
  std::optional<Machine::Layout> walk_order;
  const Machine::Layout& walked() const { return walk_order ? *walk_order : layout; }
};

native::Access access_of(const Operand& o);

// Dims of a layout from `first` on, without extent-1 dims, adjacent dims merged where the
// outer one steps exactly over the inner one. Innermost last.
std::vector<std::pair<int64_t, int64_t>> simplified(const Machine::Layout& l, size_t first);

// A walk dim outside the compiled body's: the executor calls the body once per index, every
// operand's base moved by its step (bytes, in the operands' order).
struct OuterDim {
  int64_t n = 1;
  std::vector<int64_t> step;
};

// A common walk for operands that go through their elements in lockstep (same count, each in its
// own row-major order): the coarsest dims that refine every operand's dims, innermost last.
// Fills n/step of walk dims [lead, kWalkDims) right-aligned; returns why not (null: done) if the
// dims do not nest or need more walk dims than there are. With `outer`, dims beyond the body's
// go there instead (innermost first), for an instruction whose elements are independent.
const char* common_walk(std::vector<Operand*>& ops, size_t first, int lead, std::vector<OuterDim>* outer = nullptr);

// The bytes [lo, hi) an operand's elements reach, element sizes included: in its memory, or for
// an on-chip operand inside each of its partitions (from the partition's start).
std::pair<int64_t, int64_t> byte_range(const Operand& o);

// Whether two operands' layouts may share a byte.
bool may_overlap(const Operand& x, const Operand& y);

// Copies the operand's bytes in `mem` into `buffer` (an input an output overlaps, read before
// anything is written, as the reference reads every input first); returns where the operand's
// base lies in the copy. Every byte keeps its offset from the base: byte b of `mem` (one the
// operand reaches) is at the result + (b - o.layout.base).
uint8_t* snapshot(ZeroedBytes& buffer, const Operand& o, const Memory& mem);

// Whether every byte of the operand in `flags` (0/1 per byte) is `value`; setting them.
bool all_flags_are(const ByteFlags& flags, const Operand& o, uint8_t value);
void set_flags(ByteFlags& flags, const Operand& o, uint8_t value);

// The flags of a defined write of the operand's bytes: written, by a matmul or not, no poison.
void mark_written(Memory& mem, const Operand& o, bool by_matmul);

// Whether the operand reads a byte of `mem` never written or holding poison (docs/simulator.md,
// "Never-written memory"): the reference executor reads it, to raise or to propagate the poison.
inline bool holds_poison(const Memory& mem, const Operand& o) {
  return mem.poison.size() != 0 && !all_flags_are(mem.poison, o, 0);
}
inline bool reads_unwritten(const Memory& mem, const Operand& o) {
  return (mem.tracks_init() && !all_flags_are(mem.init, o, 1)) || holds_poison(mem, o);
}

template <class Shape>
std::string bytes_of(const Shape& s) {
  return std::string(reinterpret_cast<const char*>(&s), sizeof s);
}

// The instruction as an activation (activation_reduce is one), if it is either.
std::optional<ir::Activation> activation_of(const ir::Instruction& inst);

// dma_compute's chain of fp32 tensor_tensor stages (native/rows.cpp).
std::vector<ir::Instruction> dma_compute_stages(const ir::Instruction& inst, const ir::DmaCompute& op);

// Whether operand o (data[] order: dst, then inputs) of stage s in a chain of stages reads the dst
// an earlier stage wrote, rather than memory the instruction found: dma_compute_stages' shape.
// Such an operand is not checked for never-written bytes before the chain runs.
inline bool chained_input(size_t stage, size_t operand) { return stage > 0 && operand == 1; }

struct NativeExecutor::Plan {
  const ir::Instruction* inst = nullptr;
  const char* body = nullptr;
  std::string shape;
  std::vector<Operand> ops;  // the body's data[] order; written ones first
  int64_t partitions = 1;
  int64_t scratch_floats = 0;
  std::vector<OuterDim> outer;  // dims the executor walks around the body (element-wise maps only)
};

// Builds one instruction's plan: the operand machinery every op's planner shares.
class Planner {
 public:
  Planner(Machine& m, const ir::Instruction& inst, NativeExecutor::Plan& out);
  // A MapShape with no row fold and no second ALU stage.
  static native::MapShape map_shape();
  bool on_chip(const ir::View& v) const;
  // Adds an operand (in data[] order); returns why its layout is not a strided walk (null: it is).
  const char* add(const ir::View& v, bool written);
  // The element-wise map body over dst and inputs a, b (either may be null). `a_axes` (a
  // transpose): walk a with its dims permuted, dim k being a's dim a_axes[k]; its elements then
  // pair with dst's in row-major order, across partitions. `affine` (iota, affine_select,
  // range_select): a pseudo-operand whose "layout" is the affine index's per-partition and
  // pattern steps; walked with the others, its steps become the shape's affine_step.
  const char* map(native::MapShape s, const ir::View& dst, const ir::View* a, const ir::View* b,
                  const ir::IntList* a_axes = nullptr, const Operand* affine = nullptr);
  // The affine index of iota / affine_select (exec_select.cpp's free_affine_values): partition p
  // steps by channel_multiplier, free element j by the pattern dims j decomposes into.
  static Operand affine_index(const ir::View& dst, const ir::Pattern& pattern, int64_t channel_multiplier);
  // The row body (bn_stats / bn_aggr / max8 / find_index8 / the search kinds): each operand walks
  // its own free dims (up to three after merging); find_index8's `vals` reads its first 8 free
  // elements. `data_written`: data is a second output (topk's idx_dst), its input then in `vals`.
  const char* row(native::RowKind kind, const ir::View& dst, const ir::View& data, const ir::View* vals = nullptr,
                  bool data_written = false);
  // The source of the gather kind, after map() planned dst and the walked operands: added as the
  // last operand but not walked, each index addressing its partition's free elements (one strided
  // run), so only its partition step and free element step go into `s` (map()'s shape).
  const char* gather_source(native::MapShape& s, const ir::View& source);

  Machine& m;
  NativeExecutor::Plan& out;
};

// One planner per instruction (in the file of its family). Declared for every op; only those that
// move tensor data (ir::moves_tensor_data) are called, and each of those must be defined.
#define KNIT_X(type, name) const char* plan_op(Planner& p, const ir::type& op);
KNIT_OPS(KNIT_X)
#undef KNIT_X

}  // namespace knit::sim
