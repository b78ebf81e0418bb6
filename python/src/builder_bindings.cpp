// Bindings the Python front end traces through: the one C++ Builder, the view algebra of
// ir/view.h, and a generic instruction constructor driven by each op's `fields` list (so adding
// an instruction to ir/ops.h makes it constructible from Python with no binding code).
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "knit/codegen/capacity_error.h"
#include "knit/codegen/lower.h"
#include "knit/frontend/builder.h"
#include "knit/ir/liveness.h"
#include "knit/ir/text.h"
#include "knit/ir/verifier.h"
#include "knit/ir/view.h"
#include "knit/sim/interpreter.h"
#include "knit/sim/timing.h"
#include "knit/sim/trace.h"

namespace py = pybind11;

namespace knit::python {

namespace {

// A progress line on stderr for simulations that take more than a second (KNIT_PROGRESS=0
// turns it off): a bar when the kernel has no device loops (its length is known), else a count.
std::function<void(int64_t)> progress_bar(const ir::Kernel& k) {
  const char* env = std::getenv("KNIT_PROGRESS");
  if (env && std::string(env) == "0") return {};
  bool loops = false;
  for (const ir::Instruction& inst : k.body)
    loops = loops || inst.opcode() == ir::Opcode::loop || inst.opcode() == ir::Opcode::while_;
  const int64_t total = loops ? 0 : static_cast<int64_t>(k.body.size());
  const auto start = std::chrono::steady_clock::now();
  auto last = std::make_shared<double>(0.0);
  // Captures the name, not the kernel: the callback is copied with the run's options, and a
  // copy of a large kernel cost more than the whole timing-only run it reports on.
  return [total, start, last, name = k.name](int64_t done) {
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (t < 1.0 || t - *last < 0.25) return;
    *last = t;
    std::string line = "\rknit: simulating " + name + " ";
    if (total > 0) {
      const int filled = static_cast<int>(30.0 * static_cast<double>(done) / static_cast<double>(total));
      line += "[" + std::string(std::min(filled, 30), '#') + std::string(30 - std::min(filled, 30), '.') + "] ";
    }
    line += std::to_string(done) + (total > 0 ? "/" + std::to_string(total) : "") + " instructions, " +
            std::to_string(static_cast<int>(t)) + " s";
    py::gil_scoped_acquire gil;
    py::module_::import("sys").attr("stderr").attr("write")(line);
    py::module_::import("sys").attr("stderr").attr("flush")();
  };
}

sim::Backend backend_from(const std::string& name) {
  if (name == "jit") return sim::Backend::jit;
  if (name == "reference") return sim::Backend::reference;
  if (name == "jit-strict") return sim::Backend::jit_strict;
  if (name == "jit-fallback") return sim::Backend::jit_fallback;
  throw py::value_error("backend must be \"jit\", \"jit-strict\", \"jit-fallback\" or \"reference\", not \"" + name +
                        "\" (KNIT_BACKEND)");
}

// KNIT_UNINITIALIZED's values (docs/simulator.md, "Never-written memory"); "" is the default.
sim::Uninitialized uninitialized_from(const std::string& name) {
  if (name.empty() || name == "report") return sim::Uninitialized::report;
  if (name == "warn") return sim::Uninitialized::warn;
  if (name == "error") return sim::Uninitialized::error;
  if (name == "off") return sim::Uninitialized::off;
  throw py::value_error(
      "KNIT_UNINITIALIZED must be \"error\", \"warn\" or \"off\" (or unset: report poison "
      "where it is used), not \"" +
      name + "\"");
}

// The SBUF / PSUM placements of a program's tensors with their live ranges (Compiled.memory_map).
py::list memory_map(const codegen::EngineProgram& p) {
  py::list out;
  for (const codegen::Placement& placed :
       codegen::placements(p.kernel, p.plan, ir::live_ranges(p.kernel, ir::match_blocks(p.kernel))))
    out.append(placement_dict(placed));
  return out;
}

// run_program without the GIL, with the progress line.
sim::RunResult run_with_progress(const codegen::EngineProgram& p, std::vector<sim::HostTensor>& hosts,
                                 sim::InterpretOptions options) {
  options.on_progress = progress_bar(p.kernel);
  const auto start = std::chrono::steady_clock::now();
  sim::RunResult r;
  {
    py::gil_scoped_release release;
    r = sim::run_program(p, hosts, options);
  }
  if (options.on_progress && std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >= 1.0)
    py::module_::import("sys").attr("stderr").attr("write")("\n");  // end the progress line
  return r;
}

// The timeline as a NumPy structured array (one copy, no Python object per instruction: a
// profile of 25,000 instructions built its tuples in longer than the timing took). Its
// .tolist() gives (core, ir, queue, start_ns, end_ns, issue_ns, stall_ns, stalled_on, waited_row,
// dma_bytes) tuples.
struct TimelineRow {
  int32_t core, ir, queue, stalled_on, waited_row;
  int64_t dma_bytes;
  double start_ns, end_ns, issue_ns, stall_ns;
};
static_assert(sizeof(TimelineRow) == 64);

py::object timeline_array(const std::vector<sim::TimedInstruction>& rows) {
  using Row = TimelineRow;
  py::dict spec;
  spec["names"] = py::make_tuple("core", "ir", "queue", "start_ns", "end_ns", "issue_ns", "stall_ns", "stalled_on",
                                 "waited_row", "dma_bytes");
  spec["formats"] = py::make_tuple("<i4", "<i4", "<i4", "<f8", "<f8", "<f8", "<f8", "<i4", "<i4", "<i8");
  spec["offsets"] = py::make_tuple(offsetof(Row, core), offsetof(Row, ir), offsetof(Row, queue),
                                   offsetof(Row, start_ns), offsetof(Row, end_ns), offsetof(Row, issue_ns),
                                   offsetof(Row, stall_ns), offsetof(Row, stalled_on), offsetof(Row, waited_row),
                                   offsetof(Row, dma_bytes));
  spec["itemsize"] = sizeof(Row);
  py::module_ np = py::module_::import("numpy");
  // Filled as bytes, then viewed with the fields (a dtype whose fields are not in offset order
  // cannot be exported as a buffer itself). Zeroed and filled field by field, so the padding
  // before dma_bytes is zero too: equal timelines are equal bytes.
  py::object bytes = np.attr("zeros")(rows.size() * sizeof(Row), "uint8");
  auto* out = static_cast<Row*>(py::buffer(bytes).request(/*writable=*/true).ptr);
  for (size_t i = 0; i < rows.size(); ++i) {
    const sim::TimedInstruction& x = rows[i];
    Row& r = out[i];
    r.core = x.core;
    r.ir = static_cast<int32_t>(x.ir);
    r.queue = static_cast<int32_t>(x.queue);
    r.stalled_on = x.stalled_on;
    r.waited_row = x.waited_row;
    r.dma_bytes = x.dma_bytes;
    r.start_ns = x.start_ns;
    r.end_ns = x.end_ns;
    r.issue_ns = x.issue_ns;
    r.stall_ns = x.stall_ns;
  }
  return bytes.attr("view")(np.attr("dtype")(spec));
}

// The rows of a timeline_array back as the timing model's records (for the trace writer).
std::vector<sim::TimedInstruction> timeline_rows(const codegen::EngineProgram& p, const py::object& timeline) {
  const py::buffer_info raw = py::buffer(timeline.attr("view")("uint8")).request();
  if (raw.size % static_cast<py::ssize_t>(sizeof(TimelineRow)) != 0) throw py::value_error("not a timeline array");
  std::vector<TimelineRow> rows(static_cast<size_t>(raw.size) / sizeof(TimelineRow));
  std::memcpy(rows.data(), raw.ptr, rows.size() * sizeof(TimelineRow));
  std::vector<sim::TimedInstruction> out(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const TimelineRow& r = rows[i];
    if (r.ir < 0 || static_cast<size_t>(r.ir) >= p.kernel.body.size() || r.queue < 0 ||
        r.queue >= codegen::kNumQueues || r.stalled_on < -1 || r.stalled_on >= codegen::kNumQueues ||
        r.waited_row < -1 || static_cast<int64_t>(r.waited_row) >= static_cast<int64_t>(i))
      throw py::value_error("timeline row " + std::to_string(i) + " does not belong to this program");
    out[i] = {r.core,
              static_cast<uint32_t>(r.ir),
              static_cast<codegen::Queue>(r.queue),
              r.start_ns,
              r.end_ns,
              r.issue_ns,
              r.stall_ns,
              static_cast<int8_t>(r.stalled_on),
              r.waited_row,
              r.dma_bytes};
  }
  return out;
}

// A collective's operands as a dict of bytes (the Python side pickles them between processes).
py::dict operands_to_python(const sim::RankOperands& r) {
  auto as_bytes = [](const auto& v) {
    return py::bytes(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(v[0]));
  };
  py::dict d;
  d["src"] = as_bytes(r.src);
  d["src1"] = as_bytes(r.src1);
  d["src_poison"] = as_bytes(r.src_poison);
  d["src1_poison"] = as_bytes(r.src1_poison);
  d["metadata"] = as_bytes(r.metadata);
  d["call"] = r.call;
  d["where"] = r.where;
  return d;
}

sim::RankOperands operands_from_python(const py::handle& h) {
  auto d = py::reinterpret_borrow<py::dict>(h);
  auto take = [&](const char* key, auto& v) {
    const std::string raw = d[key].cast<std::string>();
    v.resize(raw.size() / sizeof(v[0]));
    std::memcpy(v.data(), raw.data(), v.size() * sizeof(v[0]));
  };
  sim::RankOperands r;
  take("src", r.src);
  take("src1", r.src1);
  take("src_poison", r.src_poison);
  take("src1_poison", r.src1_poison);
  take("metadata", r.metadata);
  return r;
}

// A CollectiveTransport that calls a Python function (the run releases the GIL; the call takes it).
sim::CollectiveTransport python_transport(const py::object& fn) {
  return [fn](const std::vector<int64_t>& members, const sim::RankOperands& mine) {
    py::gil_scoped_acquire gil;
    py::list got = fn(members, operands_to_python(mine));
    std::vector<sim::RankOperands> out;
    for (const py::handle& h : got) out.push_back(operands_from_python(h));
    return out;
  };
}

// Timing of an engine program as plain Python data (knit/profile.py builds the Profile on it).
py::dict time_program(const codegen::EngineProgram& p, const py::list& args, bool timing_only, bool keep_timeline,
                      const std::string& backend, int lnc) {
  HostArgs host_args(args, timing_only);
  std::vector<sim::HostTensor>& hosts = host_args.tensors;
  sim::InterpretOptions options;
  options.backend = backend_from(backend);
  options.record_execution = true;
  options.timing_only = timing_only;
  options.schedule = sim::Schedule::program_order;
  sim::RunResult run = run_with_progress(p, hosts, options);
  sim::TimingReport t;
  {
    py::gil_scoped_release release;
    t = sim::simulate_timing(p, run.executed, keep_timeline, lnc);
  }
  const sim::MachineConfig& config = sim::machine_config(p.kernel.target);
  py::dict d;
  py::list queues;
  for (int q = 0; q < codegen::kNumQueues; ++q) queues.append(codegen::queue_name(static_cast<codegen::Queue>(q)));
  d["queues"] = queues;
  d["total_ns"] = t.total_ns;
  d["launch_ns"] = config.launch_ns;
  d["busy_ns"] = t.busy_ns;
  d["instructions"] = t.instructions;
  d["stall_ns"] = t.stall_ns;
  d["barriers"] = t.barriers;
  d["dma_bytes"] = t.dma_bytes;
  d["hbm_read_bytes"] = t.hbm_read_bytes;
  d["hbm_write_bytes"] = t.hbm_write_bytes;
  d["dma_active_ns"] = t.dma_active_ns;
  d["flops"] = t.flops;
  d["pe_array_ns"] = t.pe_array_ns;
  d["peak_bf16_tflops"] = config.peak_bf16_tflops;
  d["hbm_bytes_per_ns"] = config.hbm_bytes_per_ns;
  d["core_name"] = config.core_name;
  d["timeline"] = timeline_array(t.timeline);
  py::list collectives;
  for (const sim::TimedCollective& c : t.collectives) {
    py::dict row;
    row["rank"] = c.rank;
    row["ir"] = c.ir;
    row["arrive_ns"] = c.arrive_ns;
    row["start_ns"] = c.start_ns;
    row["end_ns"] = c.end_ns;
    row["steps"] = c.steps;
    row["step_bytes"] = c.step_bytes;
    row["path"] = c.path;
    row["kind"] = std::string(ir::to_string(std::get<ir::Collective>(p.kernel.body[c.ir].op).kind));
    collectives.append(row);
  }
  d["collectives"] = collectives;
  d["core_end_ns"] = t.core_end_ns;
  d["outputs"] = timing_only ? py::list() : host_tensors_to(run.outputs);
  d["args_after"] = timing_only ? py::list() : written_args_to(hosts, run.args_written);
  d["warnings"] = run.warnings;
  return d;
}

}  // namespace

namespace {

SourceLoc to_loc(const py::object& o) {
  if (o.is_none()) return {};
  auto t = o.cast<py::tuple>();
  return SourceLoc{t[0].cast<std::string>(), t[1].cast<int>(), t.size() > 2 ? t[2].cast<int>() : 0};
}

template <class E>
E enum_from(const py::handle& h, const char* what) {
  const std::string name = py::str(h);
  auto v = ir::parse_enum<E>(name);
  if (!v) throw py::value_error(std::string("unknown ") + what + " '" + name + "'");
  return *v;
}

ir::Pattern pattern_from(const py::handle& h) {
  ir::Pattern p;
  for (const auto& d : h) {
    auto pair = py::reinterpret_borrow<py::sequence>(d);
    if (pair.size() != 2) throw py::value_error("an access pattern is a list of [step, num] pairs");
    p.push_back({pair[0].cast<int64_t>(), pair[1].cast<int64_t>()});
  }
  return p;
}

// Converts a Python value to the C++ type of an instruction field.
struct FieldSetter {
  const py::handle& value;
  const char* field;

  void operator()(ir::View& v) const { v = value.cast<ir::View>(); }
  void operator()(std::optional<ir::View>& v) const {
    if (value.is_none()) v.reset();
    else v = value.cast<ir::View>();
  }
  void operator()(ir::Operand& o) const {
    if (value.is_none()) o = ir::Operand::none();
    else if (py::isinstance<ir::View>(value)) o = ir::Operand::of(value.cast<ir::View>());
    else o = ir::Operand::immediate(value.cast<double>());
  }
  void operator()(bool& b) const { b = value.cast<bool>(); }
  void operator()(double& d) const { d = value.cast<double>(); }
  void operator()(int64_t& i) const { i = value.cast<int64_t>(); }
  void operator()(ir::IntList& l) const { l = value.cast<std::vector<int64_t>>(); }
  void operator()(ir::Pattern& p) const { p = pattern_from(value); }
  void operator()(ir::ViewList& l) const {
    l.clear();
    for (const auto& item : value) l.push_back(item.cast<ir::View>());
  }
  void operator()(std::vector<double>& l) const { l = value.cast<std::vector<double>>(); }
  // Registers cross the binding as ("reg", id); integers as Python ints.
  static std::optional<int> register_id(const py::handle& h) {
    if (!py::isinstance<py::tuple>(h)) return std::nullopt;
    auto t = h.cast<py::tuple>();
    if (t.size() != 2 || t[0].cast<std::string>() != "reg") return std::nullopt;
    return t[1].cast<int>();
  }
  void operator()(ir::Reg& r) const {
    auto id = register_id(value);
    if (!id) throw py::type_error(std::string(field) + " must be a register");
    r.id = *id;
  }
  void operator()(ir::IntValue& v) const {
    if (auto id = register_id(value)) v = ir::IntValue::of_reg(*id);
    else v = ir::IntValue::of(value.cast<int64_t>());
  }
  template <class E>
    requires std::is_enum_v<E>
  void operator()(E& e) const {
    e = enum_from<E>(value, field);
  }
};

// builder.append("tensor_tensor", {"dst": v, "data1": ..., "op": "add"}, loc, name)
size_t append(frontend::Builder& b, const std::string& opname, const py::dict& fields, const py::object& loc,
              const std::string& name) {
  auto opcode = ir::parse_opcode(opname);
  if (!opcode) throw py::value_error("unknown instruction '" + opname + "'");
  ir::Instruction inst;
  inst.op = ir::default_op(*opcode);
  inst.loc = to_loc(loc);
  inst.name = name;
  size_t used = 0;
  std::visit(
      [&](auto& op) {
        if constexpr (!std::is_same_v<std::decay_t<decltype(op)>, std::monostate>) {
          op.fields([&](const char* field, auto& slot) {
            if (!fields.contains(field)) return;
            ++used;
            FieldSetter{fields[field], field}(slot);
          });
        }
      },
      inst.op);
  if (used != fields.size()) throw py::value_error(opname + " got an operand it does not have");
  b.append(std::move(inst));
  return b.kernel().body.size() - 1;
}

// (dtype name, shape) of the tensors `ids` of a kernel.
std::vector<std::pair<std::string, std::vector<int64_t>>> tensor_specs(const ir::Kernel& k,
                                                                       const std::vector<int>& ids) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> specs;
  for (int id : ids) specs.emplace_back(std::string(ir::to_string(k.tensor(id).dtype)), k.tensor(id).shape);
  return specs;
}

std::vector<ir::Index> key_from(const py::list& key) {
  std::vector<ir::Index> out;
  for (const auto& item : key) {
    auto t = item.cast<py::tuple>();
    const std::string kind = t[0].cast<std::string>();
    if (kind == "int") {
      out.push_back(ir::Index::at(t[1].cast<int64_t>()));
    } else if (kind == "slice") {
      auto opt = [](const py::handle& h) {
        return h.is_none() ? std::nullopt : std::optional<int64_t>(h.cast<int64_t>());
      };
      out.push_back(ir::Index::range(opt(t[1]), opt(t[2]), t[3].is_none() ? 1 : t[3].cast<int64_t>()));
    } else {
      out.push_back(ir::Index::all());
    }
  }
  return out;
}

}  // namespace

py::dict placement_dict(const codegen::Placement& p) {
  py::dict d;
  d["id"] = p.tensor;
  d["name"] = p.name;
  d["buffer"] = std::string(ir::to_string(p.buffer));
  d["core"] = p.at.core;
  d["partition"] = p.at.partition;
  d["partitions"] = p.at.partitions;
  d["offset"] = p.at.offset;
  d["bytes"] = p.at.bytes;
  d["first"] = p.live.first;
  d["last"] = p.live.last;
  d["file"] = p.loc.file;
  d["line"] = p.loc.line;
  return d;
}

void bind_builder(py::module_& m) {
  py::class_<ir::View>(m, "View")
      .def_readonly("tensor", &ir::View::tensor)
      .def_property_readonly("dtype", [](const ir::View& v) { return std::string(ir::to_string(v.dtype)); })
      .def_readonly("offset", &ir::View::offset)
      .def_property_readonly("shape", &ir::View::shape)
      .def_property_readonly("pattern",
                             [](const ir::View& v) {
                               std::vector<std::array<int64_t, 2>> p;
                               for (const auto& d : v.dims) p.push_back({d.step, d.num});
                               return p;
                             })
      .def_property_readonly("dynamic",
                             [](const ir::View& v) {
                               std::vector<std::pair<int, int64_t>> terms;
                               for (const auto& t : v.dynamic) terms.emplace_back(t.reg, t.coeff);
                               return terms;
                             })
      .def_property_readonly("is_indirect", [](const ir::View& v) { return v.index_view() != nullptr; })
      .def("__eq__", [](const ir::View& a, const ir::View& b) { return a == b; });

  py::class_<ir::Kernel>(m, "Kernel")
      .def_readonly("name", &ir::Kernel::name)
      .def_property_readonly("text", [](const ir::Kernel& k) { return ir::print(k); })
      .def_property_readonly("num_instructions", [](const ir::Kernel& k) { return k.body.size(); })
      .def(
          "param_specs", [](const ir::Kernel& k) { return tensor_specs(k, k.params); },
          "(dtype, shape) of each parameter")
      .def(
          "output_specs", [](const ir::Kernel& k) { return tensor_specs(k, k.outputs); },
          "(dtype, shape) of each output (the kernel's results, then device_print tensors)")
      .def(
          "run",
          [](const ir::Kernel& k, const py::list& args, const std::string& uninitialized) {
            HostArgs host_args(args);
            std::vector<sim::HostTensor>& hosts = host_args.tensors;
            sim::InterpretOptions options;
            options.uninitialized = uninitialized_from(uninitialized);
            options.outputs_without_copy = true;  // the returned arrays wrap the run's own memory
            sim::RunResult r;
            {
              py::gil_scoped_release release;
              r = sim::interpret(k, hosts, options);
            }
            return py::make_tuple(host_tensors_to(r.outputs), written_args_to(hosts, r.args_written), r.warnings);
          },
          py::arg("args"), py::arg("uninitialized") = "",
          "Run on the reference interpreter (uninitialized: a KNIT_UNINITIALIZED value). Returns (outputs, args after "
          "the run, warnings), tensors as "
          "(dtype, shape, bytes)")
      .def(
          "lower",
          [](const ir::Kernel& k, const std::optional<std::string>& target) {
            codegen::LowerOptions options;
            if (target) options.target = enum_from<ir::Target>(py::str(*target), "target");
            py::gil_scoped_release release;
            return codegen::lower(k, options);
          },
          py::arg("target") = py::none(), "Run the codegen pipeline; returns the EngineProgram")
      .def(
          "lower_consuming",
          [](ir::Kernel& k) {
            py::gil_scoped_release release;
            return codegen::lower(std::move(k), {});
          },
          "lower() that takes the kernel over instead of copying it (half the peak memory): this kernel "
          "is left empty; the program's .kernel is it, spills included");

  py::class_<codegen::EngineProgram>(m, "EngineProgram")
      .def_property_readonly("asm", &codegen::EngineProgram::disassemble)
      .def_property_readonly(
          "target", [](const codegen::EngineProgram& p) { return std::string(ir::to_string(p.kernel.target)); })
      .def_property_readonly("text", [](const codegen::EngineProgram& p) { return ir::print(p.kernel); })
      .def_property_readonly(
          "source_files",
          [](const codegen::EngineProgram& p) {
            std::set<std::string> files;
            for (const ir::TensorDecl& t : p.kernel.tensors)
              if (t.loc.known()) files.insert(t.loc.file);
            for (const ir::Instruction& inst : p.kernel.body)
              if (inst.loc.known()) files.insert(inst.loc.file);
            return std::vector<std::string>(files.begin(), files.end());
          },
          "The files the kernel's tensors and instructions come from, sorted")
      .def_property_readonly(
          "source",
          [](const codegen::EngineProgram& p) {
            py::list source;
            for (const ir::Instruction& inst : p.kernel.body)
              source.append(py::make_tuple(std::string(inst.opcode_name()), inst.loc.file, inst.loc.line));
            return source;
          },
          "Per body instruction: (opcode, file, line); timelines name instructions by their index here")
      .def_property_readonly(
          "kernel", [](const codegen::EngineProgram& p) -> const ir::Kernel& { return p.kernel; },
          py::return_value_policy::reference_internal,
          "The kernel the program was lowered from (spills included): a read-only reference that keeps "
          "the program alive")
      .def("stats",
           [](const codegen::EngineProgram& p) {
             const codegen::ProgramStats s = p.stats();
             py::dict instructions;
             for (int q = 0; q < codegen::kNumQueues; ++q)
               instructions[codegen::queue_name(static_cast<codegen::Queue>(q))] = s.instructions[q];
             instructions["sync"] = s.barriers;
             py::dict d;
             d["instructions"] = instructions;
             d["semaphore_waits"] = s.waits;
             d["dependences"] = s.dependences;
             d["dma_bytes"] = s.dma_bytes;
             d["sbuf_high_water"] = s.sbuf_high_water;
             d["psum_high_water"] = s.psum_high_water;
             d["summary"] = s.summary();
             return d;
           })
      .def("memory_map", &memory_map,
           "Per on-chip tensor the allocation placed: a dict of id, name, buffer, core, partition, partitions, "
           "offset and bytes (per partition), first and last (the body indices of its live range), file, line")
      .def("to_text", &codegen::EngineProgram::to_text,
           "The program as text: the kernel's IR, then allocations, regions, queues and waits; from_text parses it")
      .def_static(
          "from_text", [](const std::string& text) { return codegen::EngineProgram::from_text(text); }, py::arg("text"),
          "Parse (and check) an engine program's text form (str or UTF-8 bytes)")
      .def(
          "chrome_trace",
          [](const codegen::EngineProgram& p, const py::object& timeline) {
            return sim::chrome_trace_json(p.kernel, timeline_rows(p, timeline));
          },
          py::arg("timeline"), "Chrome / Perfetto trace JSON of a timeline (the `timeline` of time())")
      .def("time", &time_program, py::arg("args"), py::arg("timing_only"), py::arg("keep_timeline") = true,
           py::arg("backend") = "jit", py::arg("lnc") = 0,
           "Run (or, timing_only, just walk) the engine program and time it (lnc: physical cores per rank of a "
           "multi-rank kernel, 0 for the target's default); returns a dict")
      .def(
          "run",
          [](const codegen::EngineProgram& p, const py::list& args, const std::string& uninitialized,
             const std::string& schedule, uint64_t seed, bool check_races, const std::string& backend,
             int64_t world_rank, int64_t world_ranks, const py::object& transport) {
            HostArgs host_args(args);
            std::vector<sim::HostTensor>& hosts = host_args.tensors;
            sim::InterpretOptions options;
            options.backend = backend_from(backend);
            options.uninitialized = uninitialized_from(uninitialized);
            options.outputs_without_copy = true;  // the returned arrays wrap the run's own memory
            if (schedule == "program_order") options.schedule = sim::Schedule::program_order;
            else if (schedule == "random") options.schedule = sim::Schedule::random;
            else if (schedule == "round_robin") options.schedule = sim::Schedule::round_robin;
            else
              throw py::value_error("schedule must be \"program_order\", \"round_robin\" or \"random\", not \"" +
                                    schedule + "\"");
            options.seed = seed;
            options.check_races = check_races;
            if (world_rank >= 0) {
              options.world_rank = world_rank;
              options.world_ranks = world_ranks;
              options.transport = python_transport(transport);
            }
            sim::RunResult r = run_with_progress(p, hosts, options);
            py::dict counts;
            counts["backend"] = backend;
            counts["native"] = r.native_instructions;
            counts["interpreted"] = r.interpreted_instructions;
            counts["fallbacks"] = r.fallbacks;
            if (options.backend != sim::Backend::reference) {  // the compile decision (docs/jit.md)
              counts["work"] = r.static_work;
              counts["break_even"] = r.break_even_work;
              // instructions with an .indirect() operand, left to the reference executors by design
              counts["indirect_compute"] = r.indirect_compute_instructions;
              // dma_copy instructions whose reader read their source in place (docs/jit.md)
              counts["forwarded"] = r.forwarded_copies;
            }
            return py::make_tuple(host_tensors_to(r.outputs), written_args_to(hosts, r.args_written), r.warnings,
                                  counts);
          },
          py::arg("args"), py::arg("uninitialized") = "", py::arg("schedule") = "round_robin", py::arg("seed") = 0,
          py::arg("check_races") = true, py::arg("backend") = "jit", py::arg("world_rank") = -1,
          py::arg("world_ranks") = 0, py::arg("transport") = py::none(),
          "Run the engine program on the functional simulator (queues interleaved by `schedule`: "
          "program_order | round_robin | random with `seed`). With world_rank >= 0 the kernel is that rank "
          "of world_ranks; transport(members, mine) -> [operands per member] exchanges collective operands "
          "(each a dict of bytes: src, src1, src_poison, src1_poison, metadata)");

  py::class_<frontend::Builder>(m, "Builder")
      .def(py::init([](const std::string& name, const std::string& target) {
        return std::make_unique<frontend::Builder>(name, enum_from<ir::Target>(py::str(target), "target"));
      }))
      .def("add_param",
           [](frontend::Builder& b, const std::string& name, const std::string& dtype, std::vector<int64_t> shape,
              const py::object& loc) {
             return b.add_param(name, enum_from<ir::DType>(py::str(dtype), "dtype"), std::move(shape), to_loc(loc));
           })
      .def("add_tensor",
           [](frontend::Builder& b, const std::string& name, const std::string& buffer, const std::string& dtype,
              std::vector<int64_t> shape, std::optional<std::array<int64_t, 2>> address, const py::object& loc) {
             return b.add_tensor(name, enum_from<ir::Buffer>(py::str(buffer), "buffer"),
                                 enum_from<ir::DType>(py::str(dtype), "dtype"), std::move(shape), address, to_loc(loc));
           })
      .def("tensor_info",
           [](const frontend::Builder& b, int id) {
             const ir::TensorDecl& t = b.tensor(id);
             return py::make_tuple(t.name, std::string(ir::to_string(t.buffer)), std::string(ir::to_string(t.dtype)),
                                   t.shape);
           })
      .def("full_view", [](const frontend::Builder& b, int id) { return ir::full_view(b.tensor(id), id); })
      .def("append", &append, py::arg("op"), py::arg("fields"), py::arg("loc"), py::arg("name") = "")
      .def(
          "add_order",
          [](frontend::Builder& b, size_t consumer, size_t producer, const py::object& loc) {
            b.add_order(consumer, producer, to_loc(loc));
          },
          py::arg("consumer"), py::arg("producer"), py::arg("loc"),
          "Scheduling edge: body instruction `consumer` runs after the earlier `producer`")
      .def_property_readonly("num_instructions", [](const frontend::Builder& b) { return b.kernel().body.size(); })
      .def(
          "instruction_names",
          [](const frontend::Builder& b) {
            std::vector<std::string> names;
            for (const ir::Instruction& inst : b.kernel().body) names.push_back(inst.name);
            return names;
          },
          "The name= label of every body instruction so far (\"\" when none)")
      .def("set_outputs", &frontend::Builder::set_outputs, py::arg("tensor_ids"), py::arg("share_private_hbm") = false)
      .def("new_register", &frontend::Builder::new_register)
      .def("begin_rolled", &frontend::Builder::begin_rolled, py::arg("start"), py::arg("stop"), py::arg("step"),
           "Opens a rolled host loop (builder.h); returns its symbol (a register id of view terms)")
      .def("end_rolled", &frontend::Builder::end_rolled, "Expands the innermost rolled loop into its iterations")
      .def("uses_tensor_since", &frontend::Builder::uses_tensor_since, py::arg("first"), py::arg("tensor"),
           "Whether a body instruction at index `first` or later names the tensor in a view")
      .def("finish", &frontend::Builder::finish)
      .def("text", [](const frontend::Builder& b) { return ir::print(b.kernel()); });

  m.attr("ROLLED_ESCAPE_RULE") = frontend::kRolledEscapeRule;
  m.attr("ROLLED_SYMBOL_BASE") = frontend::kRolledSymbolBase;

  // View algebra: each takes the builder (for the tensor declaration), the view, its arguments
  // and the user's source location.
  auto decl = [](const frontend::Builder& b, const ir::View& v) -> const ir::TensorDecl& { return b.tensor(v.tensor); };
  m.def("view_index", [=](const frontend::Builder& b, const ir::View& v, const py::list& key, const py::object& loc) {
    const auto k = key_from(key);
    return ir::index(decl(b, v), v, k, to_loc(loc));
  });
  m.def("view_slice",
        [=](const frontend::Builder& b, const ir::View& v, int dim, int64_t start, int64_t end, int64_t step,
            const py::object& loc) { return ir::slice(decl(b, v), v, dim, start, end, step, to_loc(loc)); });
  m.def("view_select", [=](const frontend::Builder& b, const ir::View& v, int dim, int64_t index,
                           const py::object& loc) { return ir::select(decl(b, v), v, dim, index, to_loc(loc)); });
  m.def("view_permute", [=](const frontend::Builder& b, const ir::View& v, std::vector<int> order,
                            const py::object& loc) { return ir::permute(decl(b, v), v, order, to_loc(loc)); });
  m.def("view_broadcast", [=](const frontend::Builder& b, const ir::View& v, int dim, int64_t size,
                              const py::object& loc) { return ir::broadcast(decl(b, v), v, dim, size, to_loc(loc)); });
  m.def("view_expand_dim", [=](const frontend::Builder& b, const ir::View& v, int dim, const py::object& loc) {
    return ir::expand_dim(decl(b, v), v, dim, to_loc(loc));
  });
  m.def("view_squeeze_dim", [=](const frontend::Builder& b, const ir::View& v, int dim, const py::object& loc) {
    return ir::squeeze_dim(decl(b, v), v, dim, to_loc(loc));
  });
  m.def("view_reshape", [=](const frontend::Builder& b, const ir::View& v, std::vector<int64_t> shape,
                            const py::object& loc) { return ir::reshape(decl(b, v), v, shape, to_loc(loc)); });
  m.def("view_reshape_dim",
        [=](const frontend::Builder& b, const ir::View& v, int dim, std::vector<int64_t> shape, const py::object& loc) {
          return ir::reshape_dim(decl(b, v), v, dim, shape, to_loc(loc));
        });
  m.def("view_flatten_dims",
        [=](const frontend::Builder& b, const ir::View& v, int start, int end, const py::object& loc) {
          return ir::flatten_dims(decl(b, v), v, start, end, to_loc(loc));
        });
  m.def("view_bitcast",
        [=](const frontend::Builder& b, const ir::View& v, const std::string& dtype, const py::object& loc) {
          return ir::bitcast(decl(b, v), v, enum_from<ir::DType>(py::str(dtype), "dtype"), to_loc(loc));
        });
  m.def("view_add_dynamic",
        [=](const frontend::Builder& b, const ir::View& v, int dim, int reg, int64_t coeff, const py::object& loc) {
          return ir::add_dynamic(decl(b, v), v, dim, reg, coeff, to_loc(loc));
        });
  m.def("view_add_flat_dynamic",
        [=](const frontend::Builder& b, const ir::View& v, int reg, int64_t coeff, const py::object& loc) {
          // A rolled loop's symbol as a flat offset term (G1 index expressions): HBM views only,
          // where a flat offset is just an address (on-chip it could cross partitions).
          if (!ir::is_hbm(decl(b, v).buffer) || frontend::Builder::rolled_serial(reg) < 0)
            internal_error("view_add_flat_dynamic: a rolled loop's symbol on an HBM view only");
          ir::View r = v;
          r.dynamic.push_back({reg, coeff});
          return r;
        });
  m.def("view_shift_dynamic",
        [=](const frontend::Builder& b, const ir::View& v, int dim, int64_t amount, const py::object& loc) {
          return ir::shift_dynamic(decl(b, v), v, dim, amount, to_loc(loc));
        });
  m.def("view_indirect",
        [=](const frontend::Builder& b, const ir::View& v, int dim, const ir::View& index, const py::object& loc) {
          return ir::make_indirect(decl(b, v), v, dim, index, to_loc(loc));
        });
  m.def("view_column_indirect", [=](const frontend::Builder& b, const ir::View& v, const ir::View& index,
                                    std::optional<int64_t> num_elem, const py::object& loc) {
    return ir::make_column_indirect(decl(b, v), v, decl(b, index), index, num_elem, to_loc(loc));
  });
  m.def("view_ap", [=](const frontend::Builder& b, const ir::View& v, const py::object& pattern,
                       std::optional<int64_t> offset, std::optional<std::string> dtype, const py::object& loc) {
    std::optional<ir::DType> d;
    if (dtype) d = enum_from<ir::DType>(py::str(*dtype), "dtype");
    return ir::ap(decl(b, v), v, pattern_from(pattern), offset, d, to_loc(loc));
  });
}

}  // namespace knit::python
