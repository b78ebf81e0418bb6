// The C++ tables the Python front ends read instead of keeping copies: the instruction list with
// each op's fields and NKI defaults and its op-table row, the ALU operators, the activation
// functions, and the hardware limits (nl.tile_size and the per-target memory sizes).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "knit/codegen/allocate.h"
#include "knit/ir/op_traits.h"
#include "knit/ir/verifier.h"

namespace py = pybind11;
using namespace knit;

namespace {

// A field's default value as Python sees it: None for an operand the call must give (a view) or
// may leave out (an optional view, an empty operand), enum names as strings.
struct DefaultToPython {
  py::object operator()(const ir::View&) const { return py::none(); }
  py::object operator()(const std::optional<ir::View>&) const { return py::none(); }
  py::object operator()(const ir::ViewList&) const { return py::list(); }
  py::object operator()(const ir::Operand& o) const { return o.is_imm() ? py::float_(o.imm) : py::object(py::none()); }
  py::object operator()(bool b) const { return py::bool_(b); }
  py::object operator()(double d) const { return py::float_(d); }
  py::object operator()(int64_t i) const { return py::int_(i); }
  py::object operator()(const ir::IntList& l) const { return py::cast(l); }
  py::object operator()(const std::vector<double>& l) const { return py::cast(l); }
  py::object operator()(const ir::Pattern&) const { return py::list(); }  // defaults are empty
  py::object operator()(const ir::Reg&) const { return py::none(); }
  py::object operator()(const ir::IntValue& v) const { return v.is_reg() ? py::object(py::none()) : py::int_(v.imm); }
  template <class E>
    requires std::is_enum_v<E>
  py::object operator()(E e) const {
    return py::str(std::string(ir::to_string(e)));
  }
};

const char* role_name(ir::OpRole r) {
  switch (r) {
    case ir::OpRole::compute: return "compute";
    case ir::OpRole::dma: return "dma";
    case ir::OpRole::block: return "block";
    case ir::OpRole::scalar: return "scalar";
    case ir::OpRole::core_sync: return "core_sync";
  }
  return "?";
}

// One dict per opcode, in KNIT_OPS order: name, role, engine, writes_whole_dst and fields, a list
// of (name, default) pairs in NKI's dst-first argument order.
py::list op_table() {
  py::list ops;
  for (size_t i = 0; i < ir::kNumOpcodes; ++i) {
    const auto opcode = static_cast<ir::Opcode>(i);
    const ir::OpTraits& t = ir::op_traits(opcode);
    py::dict row;
    row["name"] = std::string(ir::opcode_name(opcode));
    row["role"] = role_name(t.role);
    row["engine"] = std::string(ir::to_string(ir::Engine(t.engine)));
    row["writes_whole_dst"] = bool(t.writes_whole_dst);
    py::list fields;
    ir::Instruction inst;
    inst.op = ir::default_op(opcode);
    ir::for_each_field(inst, [&](const char* name, const auto& value) {
      fields.append(py::make_tuple(name, DefaultToPython{}(value)));
    });
    row["fields"] = fields;
    ops.append(row);
  }
  return ops;
}

py::list alu_ops() {
  py::list ops;
  for (int i = 0; i < ir::kNumAluOps; ++i) {
    const auto op = static_cast<ir::AluOp>(i);
    py::dict row;
    row["name"] = std::string(ir::to_string(op));
    row["reduction"] = ir::alu_is_reduction(op);
    row["bitvec"] = ir::alu_class(op) == ir::AluClass::Bitvec || ir::alu_class(op) == ir::AluClass::BitvecUnary;
    row["unary"] = ir::alu_class(op) == ir::AluClass::Unary || ir::alu_class(op) == ir::AluClass::BitvecUnary;
    ops.append(row);
  }
  return ops;
}

py::dict tile_size() {
  namespace ts = ir::tile_size;
  py::dict d;
  d["pmax"] = ts::pmax;
  d["psum_fmax"] = ts::psum_fmax;
  d["psum_bank_fmax"] = ts::psum_bank_fmax;
  d["psum_bank_fmax_bytes"] = ts::psum_bank_fmax_bytes;
  d["psum_num_banks"] = ts::psum_num_banks;
  d["gemm_stationary_fmax"] = ts::gemm_stationary_fmax;
  d["gemm_moving_fmax"] = ts::gemm_moving_fmax;
  d["bn_stats_fmax"] = ts::bn_stats_fmax;
  return d;
}

py::dict target_info(const std::string& name) {
  const auto target = ir::parse_enum<ir::Target>(name);
  if (!target) throw py::value_error("unknown target '" + name + "'; use trn1, trn2 or trn3");
  const ir::TargetInfo info = ir::target_info(*target);
  py::dict d;
  d["sbuf_partition_bytes"] = info.sbuf_partition_bytes;
  d["psum_partition_bytes"] = info.psum_partition_bytes;
  d["psum_bank_bytes"] = info.psum_bank_bytes;
  d["matmul_max_n"] = info.matmul_max_n;
  d["sbuf_align"] = codegen::kSbufAlign;
  return d;
}

}  // namespace

namespace knit::python {

void bind_tables(py::module_& m) {
  m.def("op_table", &op_table,
        "Every IR instruction: name, role, engine, writes_whole_dst, (field, NKI default) pairs");
  m.def("alu_ops", &alu_ops, "Every ALU operator: name, whether it is a legal reduction, bitvec, unary");
  m.def(
      "act_funcs",
      [] {
        std::vector<std::string> names;
        for (int i = 0; i < ir::kNumActFuncs; ++i) names.emplace_back(ir::to_string(static_cast<ir::ActFunc>(i)));
        return names;
      },
      "Every activation function's name");
  m.def("tile_size", &tile_size, "nl.tile_size: the hardware tile limits every generation shares");
  m.def("target_info", &target_info, py::arg("target"),
        "Per-partition SBUF/PSUM bytes, PSUM bank bytes, matmul N limit");
}

}  // namespace knit::python
