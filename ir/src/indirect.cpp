#include "knit/ir/indirect.h"

#include <algorithm>

#include "knit/ir/view.h"

namespace knit::ir {
namespace {

constexpr Engine none = Engine::unknown, vector = Engine::vector, scalar = Engine::scalar, gpsimd = Engine::gpsimd;

// nki-0.6-additions.md §5.2. Extra rules beyond operand and engine (matmul dtypes and
// tile_position, nc_matmul_mx's data/scale pairs, ScalarE's PSUM scatter, tensor_scalar's integer
// form) are in verify_indirect.cpp.
constexpr IndirectOperands kIndirectTable[] = {
    {Opcode::nc_matmul, {"dst", "stationary", "moving"}, {none, none, none}},
    {Opcode::nc_matmul_mx, {"dst", "stationary", "moving", "stationary_scale", "moving_scale"}, {none, none, none}},
    {Opcode::tensor_tensor, {"dst", "data1"}, {vector, gpsimd, none}},
    {Opcode::tensor_scalar, {"dst", "data"}, {vector, scalar, gpsimd}},
    {Opcode::tensor_reduce, {"dst", "data"}, {none, none, none}},
    {Opcode::tensor_copy, {"dst", "src"}, {vector, scalar, none}},
    {Opcode::tensor_copy_predicated, {"dst", "predicate"}, {none, none, none}},
    {Opcode::tensor_scalar_reduce, {"dst", "data"}, {none, none, none}},
    {Opcode::activation, {"dst", "data"}, {none, none, none}},
    {Opcode::activation_reduce, {"dst", "data"}, {none, none, none}},
    {Opcode::exponential, {"dst", "src"}, {none, none, none}},
    {Opcode::tensor_scalar_cumulative, {"dst", "src"}, {none, none, none}},
    {Opcode::activate2, {"dst", "data"}, {none, none, none}},
};

}  // namespace

bool has_column_indirection(const Instruction& inst) {
  bool any = false;
  for_each_view(inst, [&](const char*, const View& v) { any = any || v.indexes_columns(); });
  return any;
}

int indirect_group(Opcode op) { return op == Opcode::nc_matmul || op == Opcode::nc_matmul_mx ? 32 : 16; }

int64_t gather_size(const Pattern& gather) {
  int64_t n = 1;
  for (const ApDim& d : gather) n *= d.num;
  return n;
}

int64_t gather_offset(const Pattern& gather, int64_t o) {
  int64_t flat = 0;
  for (size_t k = gather.size(); k-- > 0;) {
    flat += (o % gather[k].num) * gather[k].step;
    o /= gather[k].num;
  }
  return flat;
}

bool IndirectOperands::accepts(std::string_view operand) const {
  return std::find(operands.begin(), operands.end(), operand) != operands.end() && !operand.empty();
}

const IndirectOperands* indirect_operands(Opcode op) {
  for (const IndirectOperands& row : kIndirectTable)
    if (row.op == op) return &row;
  return nullptr;
}

std::string indirect_capable_list() {
  std::string out;
  for (const IndirectOperands& row : kIndirectTable)
    out += (out.empty() ? "" : ", ") + std::string(opcode_name(row.op));
  return out;
}

int64_t index_rows_per_partition(Opcode op, std::string_view operand) {
  const bool scale = operand == "stationary_scale" || operand == "moving_scale";
  return op == Opcode::nc_matmul_mx && scale ? kMxScaleRows : 1;
}

void check_column_index(const TensorDecl& t, const View& v, const TensorDecl& index_t, const View& index,
                        const std::string& what, const SourceLoc& loc, int64_t rows_per_partition) {
  auto fail = [&](const std::string& message) { user_error(loc, "indirect", what + ": " + message); };
  if (!is_on_chip(t.buffer))
    fail(".indirect() gathers columns of an SBUF or PSUM tensor; '" + t.name + "' is in " +
         std::string(to_string(t.buffer)) + " (for rows of an HBM tensor use .ap(vector_offset=...) or vector_select)");
  if (index_t.buffer != Buffer::sbuf)
    fail("the index tile '" + index_t.name + "' must be in SBUF, not " + std::string(to_string(index_t.buffer)));
  if (std::find(kIndirectIndexDtypes.begin(), kIndirectIndexDtypes.end(), index.dtype) == kIndirectIndexDtypes.end())
    fail("the index tile has dtype " + std::string(to_string(index.dtype)) + "; use uint16, uint32 or int32");
  if (!index.is_static()) fail("the index tile's view must itself be static (no register offset, not indirect)");
  const int64_t P = view_partitions(t, v), index_p = view_partitions(index_t, index);
  const bool either = rows_per_partition == 0;
  if (either ? index_p != P && index_p != kMxScaleRows * P : index_p != rows_per_partition * P)
    fail("the index tile has " + std::to_string(index_p) + " partitions but the indirected view has " +
         std::to_string(P) + "; they must match" +
         (either || rows_per_partition == kMxScaleRows ? " (an nc_matmul_mx scale instead takes its data's index, " +
                                                             std::to_string(kMxScaleRows) + " times its partitions)"
                                                       : std::string()));
}

}  // namespace knit::ir
