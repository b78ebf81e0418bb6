// Verifier rules: compute indirection, NKI's .indirect() views (nki-0.6-additions.md §5). Which
// operands accept one is the table in indirect.cpp; the rules of one view, then those between
// the operands of one instruction (partition alignment, §5.3), are here.
#include <algorithm>
#include <tuple>
#include <vector>

#include "knit/ir/indirect.h"
#include "knit/ir/op_traits.h"
#include "verify_rules.h"

namespace knit::ir {
namespace {

struct Named {
  std::string_view name;
  const View* view;
};

// The instruction's operands (index views left out), by name.
std::vector<Named> operands_of(const Instruction& inst) {
  std::vector<Named> out;
  for_each_view(inst, [&](const char* name, const View& v) {
    if (std::string_view(name) != "vector_offset" && std::string_view(name) != "indirect_index")
      out.push_back({name, &v});
  });
  return out;
}

const View* operand(const std::vector<Named>& ops, std::string_view name) {
  for (const Named& o : ops)
    if (o.name == name) return o.view;
  return nullptr;
}

std::string engines_text(const IndirectOperands& row) {
  std::string out;
  for (Engine e : row.engines)
    if (e != Engine::unknown) out += (out.empty() ? "" : ", ") + std::string(to_string(e));
  return out;
}

std::string operands_text(const IndirectOperands& row) {
  std::string out;
  for (std::string_view o : row.operands)
    if (!o.empty()) out += (out.empty() ? "" : ", ") + std::string(o);
  return out;
}

// One .indirect() operand: target, instruction, operand, engine and index shape.
void check_one(const Checker& c, const Instruction& inst, std::string_view name, const View& v) {
  const std::string what = "operand " + std::string(name);
  if (nc_version(c.target()) < 4)
    c.fail("target", what +
                         " is an .indirect() view, which needs trn3 (NeuronCore-v4) or newer, but the kernel "
                         "targets " +
                         std::string(to_string(c.target())));
  const IndirectOperands* row = indirect_operands(inst.opcode());
  if (!row)
    c.fail("indirect", what +
                           " is an .indirect() view, which this instruction does not accept; the instructions "
                           "that do: " +
                           indirect_capable_list());
  if (!row->accepts(name))
    c.fail("indirect",
           what + " cannot be an .indirect() view; this instruction accepts one only as " + operands_text(*row));
  const Engine e = explicit_engine(inst);
  if (e != Engine::unknown && !engines_text(*row).empty() &&
      std::find(row->engines.begin(), row->engines.end(), e) == row->engines.end())
    c.fail("indirect", "with an .indirect() operand it runs on " + engines_text(*row) + ", not the " +
                           std::string(to_string(e)) + " engine");
  const View& index = *v.index_view();
  check_column_index(c.tensor(v), v, c.tensor(index), index, std::string(inst.opcode_name()) + ": " + what, inst.loc,
                     index_rows_per_partition(inst.opcode(), name));
  // Groups count index rows (data partitions, for an MX scale reading its data's index).
  const int64_t G = indirect_group(inst.opcode()), P = c.partitions(index), K = c.free_size(index), n = c.free_size(v);
  if (n > G * K)
    c.fail("indirect", what + ": num_elem " + std::to_string(n) + " exceeds G*K = " + std::to_string(G * K) +
                           " (this engine reads offsets per group of G = " + std::to_string(G) +
                           " partitions, G per index column, and the index tile has K = " + std::to_string(K) +
                           " columns); pass a smaller num_elem or a wider index tile");
  const int64_t last_group_rows = P - (P - 1) / G * G;  // index rows the last (maybe partial) group owns
  if (std::min(n, G) > last_group_rows)
    c.fail("indirect", what + ": partitions " + std::to_string(P - last_group_rows) + ".." + std::to_string(P - 1) +
                           " form a partial group of " + std::to_string(last_group_rows) +
                           " (groups of G = " + std::to_string(G) + "), whose columns " +
                           std::to_string(last_group_rows) + " and up would read index rows past the tile's " +
                           std::to_string(P) + "; use num_elem <= " + std::to_string(last_group_rows) +
                           " or a multiple of " + std::to_string(G) + " partitions");
  if (name == "dst" && c.in_psum(v) &&
      (e == Engine::scalar || (e == Engine::unknown && Engine(op_traits(inst.opcode()).engine) == Engine::scalar)))
    c.fail("indirect",
           "the Scalar Engine cannot scatter into PSUM: dst is an .indirect() view of a PSUM tensor; "
           "scatter into SBUF (tensor_copy and tensor_scalar may also run on the vector engine)");
}

// A matmul with an .indirect() operand uses the whole PE array (§5.2).
void check_whole_array(const Checker& c, const IntList& tile_position) {
  const bool whole_array = tile_position.empty() ||
                           (tile_position.size() == 2 && tile_position[0] == 0 && tile_position[1] == 0);
  if (!whole_array) c.fail("indirect", "with an .indirect() operand, tile_position must be (0, 0) or unset");
}

// nc_matmul's extra rules (§5.2): 16-bit or fp8 indirect inputs, a plain moving when transposing,
// the whole PE array.
void check_matmul(const Checker& c, const NcMatmul& op) {
  for (const auto& [name, v] : {std::pair{"stationary", &op.stationary}, {"moving", &op.moving}})
    if (v->indexes_columns())
      c.dtype_in(*v, name,
                 {DType::float16, DType::bfloat16, DType::float8_e4m3, DType::float8_e5m2, DType::float8_e4m3fn});
  if (op.is_transpose && op.moving.indexes_columns())
    c.fail("indirect", "moving cannot be an .indirect() view when is_transpose=True");
  check_whole_array(c, op.tile_position);
}

// nc_matmul_mx's extra rules (§5.2): each data operand and its scale are both .indirect() views
// of one index (the same tile and slice: the scale's columns follow its data's) or neither; the
// whole PE array.
void check_matmul_mx(const Checker& c, const NcMatmulMx& op) {
  for (const auto& [name, data, scale] :
       {std::tuple{"stationary", &op.stationary, &op.stationary_scale}, {"moving", &op.moving, &op.moving_scale}}) {
    const std::string pair = std::string(name) + " and " + name + "_scale";
    if (data->indexes_columns() != scale->indexes_columns())
      c.fail("indirect", pair + " must both be .indirect() views (of the same index) or neither; only " +
                             (data->indexes_columns() ? std::string(name) : std::string(name) + "_scale") + " is one");
    if (data->indexes_columns() && !(*data->index_view() == *scale->index_view()))
      c.fail("indirect", pair +
                             " are .indirect() views of different index tiles (or slices of one); pass the "
                             "same index to both, as each scale column must follow its data column");
  }
  check_whole_array(c, op.tile_position);
}

// §5.3, with every tensor's partition known (an address= pin, or partition 0 where Knit's
// allocator puts unpinned tiles). X is the main input: the operand after dst in the table row.
void check_alignment(const Checker& c, const Instruction& inst, const std::vector<Named>& ops) {
  auto start = [&](const View& v) { return c.start_partition(v); };
  auto index_start = [&](const View& v) { return start(*v.index_view()); };
  auto same = [&](int64_t a, const std::string& an, int64_t b, const std::string& bn) {
    if (a != b)
      c.fail("indirect-alignment", an + " starts at partition " + std::to_string(a) + " but " + bn + " at " +
                                       std::to_string(b) + "; they must start on the same partition");
  };
  for (const Named& o : ops)
    if (o.view->indexes_columns() && index_start(*o.view) % 32 != 0)
      c.fail("indirect-alignment", "the index tile of " + std::string(o.name) + " starts at partition " +
                                       std::to_string(index_start(*o.view)) +
                                       "; an .indirect() index must start on a multiple of 32");
  const View* dst = operand(ops, "dst");
  const bool dst_ind = dst && dst->indexes_columns();
  if (inst.opcode() == Opcode::nc_matmul || inst.opcode() == Opcode::nc_matmul_mx) {
    for (const char* name : {"stationary", "moving"})
      if (const View* v = operand(ops, name); v && v->indexes_columns())
        same(start(*v), name, index_start(*v), std::string(name) + "'s index");
    if (const View* st = operand(ops, "stationary"); dst_ind && st)
      same(index_start(*dst), "dst's index", start(*st), "stationary");
    return;
  }
  const IndirectOperands* row = indirect_operands(inst.opcode());
  const View* x = row ? operand(ops, row->operands[1]) : nullptr;
  if (!x) return;
  const std::string xn(row->operands[1]);
  if (x->indexes_columns()) same(start(*x), xn, index_start(*x), xn + "'s index");
  if (dst_ind && !c.in_psum(*x)) same(index_start(*dst), "dst's index", start(*x), xn);
  if (dst_ind && c.in_psum(*x) && x->indexes_columns())
    same(index_start(*dst), "dst's index", index_start(*x), xn + "'s index");
}

}  // namespace

void check_column_indirection(const Checker& c, const Instruction& inst) {
  const std::vector<Named> ops = operands_of(inst);
  bool any = false;
  for (const Named& o : ops)
    if (o.view->indexes_columns()) {
      check_one(c, inst, o.name, *o.view);
      any = true;
    }
  if (!any) return;
  if (const auto* mm = std::get_if<NcMatmul>(&inst.op)) check_matmul(c, *mm);
  if (const auto* mx = std::get_if<NcMatmulMx>(&inst.op)) check_matmul_mx(c, *mx);
  auto word = [](DType t) { return t == DType::int32 || t == DType::uint32; };
  if (const auto* ts = std::get_if<TensorScalar>(&inst.op); ts && (word(ts->dst.dtype) || word(ts->data.dtype)))
    c.fail("indirect", "the int32/uint32 (address arithmetic) form of tensor_scalar takes no .indirect() view");
  check_alignment(c, inst, ops);
}

}  // namespace knit::ir
