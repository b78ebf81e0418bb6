// Compute indirection: NKI's `.indirect(index, num_elem)` views on NeuronCore-v4 (trn3) and newer
// (ir.h, View::gather; docs/language.md, "Indirection"). The facts every layer shares live here:
// which operands of which instructions accept such a view, the partition-group size, how a
// column finds its offset, and how an offset maps into the indirected view's free dims.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "knit/ir/ir.h"

namespace knit::ir {

// Whether some operand of `inst` is an .indirect() view.
bool has_column_indirection(const Instruction& inst);

// Index dtypes an .indirect() view accepts. DESIGN CHOICE: the NKI docs name none (their tutorial
// uses uint16); unsigned 16/32-bit and int32 (a negative offset is out of range at run time).
inline constexpr std::array<DType, 3> kIndirectIndexDtypes = {DType::uint16, DType::uint32, DType::int32};

// Partition-group size G: each group of G partitions reads its offsets from its own G index
// rows. 32 on the Tensor Engine (the matmuls), 16 on the Vector, Scalar and GpSimd engines.
int indirect_group(Opcode op);

// Where column i of partition p reads its offset: element (row, col) of the (P, K) index tile,
// rows g*G .. g*G+G-1 serving group g = p / G, column-major ("snake") within the group
// (DESIGN CHOICE: the per-group rule of the tutorial, nki-0.6-additions.md §5.1).
struct IndexCell {
  int64_t row = 0, col = 0;
};
constexpr IndexCell indirect_cell(int64_t p, int64_t i, int64_t G) { return {p / G * G + i % G, i / G}; }

// Free offsets a gather pattern covers, and where offset `o` (an element index into its flattened
// free dims, row-major) lies, in elements from its partition's first element.
int64_t gather_size(const Pattern& gather);
int64_t gather_offset(const Pattern& gather, int64_t o);

// The operands of one instruction that may be .indirect() views (nki-0.6-additions.md §5.2), and
// the engines it may then run on (Engine::unknown fills unused slots; an op without an engine=
// operand lists none). Adding an instruction that accepts them is one row in indirect.cpp.
struct IndirectOperands {
  Opcode op;
  std::array<std::string_view, 5> operands;
  std::array<Engine, 3> engines;
  bool accepts(std::string_view operand) const;
};
// Its row, or null when `op` accepts no .indirect() view.
const IndirectOperands* indirect_operands(Opcode op);
// "dst, data1" style list of the instructions that accept them, for messages.
std::string indirect_capable_list();

// How many index rows serve one partition of an .indirect() view: 1, except for nc_matmul_mx's
// scale operands, which read the index of their data (nki-0.6-additions.md §5.2: the pair shares
// one index), one scale partition per kMxScaleRows data partitions.
inline constexpr int64_t kMxScaleRows = 8;
int64_t index_rows_per_partition(Opcode op, std::string_view operand);

// The index rules of an .indirect() view `v` of tensor `t` (shared by make_column_indirect and
// the verifier): on-chip data, an SBUF index of an accepted dtype, static, with v's partitions
// times `rows_per_partition` (0: either 1 or kMxScaleRows, when the instruction is not known yet).
void check_column_index(const TensorDecl& t, const View& v, const TensorDecl& index_t, const View& index,
                        const std::string& what, const SourceLoc& loc, int64_t rows_per_partition);

}  // namespace knit::ir
