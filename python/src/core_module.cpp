// knit._core: the C++ core seen from Python. The Python front end (python/knit) builds on it;
// today it exposes the IR text form, the verifier, the numerics and the reference interpreter.
#include <cstring>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "knit/codegen/capacity_error.h"
#include "knit/ir/numerics.h"
#include "knit/ir/text.h"
#include "knit/ir/verifier.h"
#include "knit/sim/interpreter.h"
#include "knit/sim/native.h"

namespace py = pybind11;
using namespace knit;

namespace {

ir::DType dtype_named(const std::string& name) {
  auto d = ir::parse_enum<ir::DType>(name);
  if (!d) throw py::value_error("unknown Knit dtype '" + name + "'");
  return *d;
}

// The array functions take any buffer-protocol object and return bytes: Debian's pybind11 (2.10)
// reads NumPy 1.x's descriptor layout, so py::array results are wrong under NumPy 2; the buffer
// protocol and bytes are layout independent. Python wraps results with numpy.frombuffer.

// Rounds float32 values to `dtype` (Knit's rounding model) and returns the stored bytes.
py::bytes encode_array(py::buffer values, const std::string& dtype) {
  const ir::DType t = dtype_named(dtype);
  const py::buffer_info in = values.request();
  if (in.itemsize != 4 || in.format != py::format_descriptor<float>::format())
    throw py::value_error("encode expects a contiguous float32 buffer");
  const auto* v = static_cast<const float*>(in.ptr);
  std::string out(static_cast<size_t>(in.size * ir::dtype_size(t)), '\0');
  for (py::ssize_t i = 0; i < in.size; ++i)
    ir::encode(t, v[i], reinterpret_cast<uint8_t*>(out.data()) + i * ir::dtype_size(t));
  return py::bytes(out);
}

// Decodes the raw bytes of `dtype` elements to float32 and returns them as bytes.
py::bytes decode_array(py::buffer bytes, const std::string& dtype) {
  const ir::DType t = dtype_named(dtype);
  const int size = ir::dtype_size(t);
  const py::buffer_info in = bytes.request();
  const py::ssize_t nbytes = in.size * in.itemsize;
  if (nbytes % size) throw py::value_error("byte count is not a multiple of the dtype size");
  const auto* raw = static_cast<const uint8_t*>(in.ptr);
  std::string out(static_cast<size_t>(nbytes / size * 4), '\0');
  for (py::ssize_t i = 0; i < nbytes / size; ++i) {
    const float v = ir::decode(t, raw + i * size);
    std::memcpy(out.data() + i * 4, &v, 4);
  }
  return py::bytes(out);
}

}  // namespace

namespace knit::python {

HostArgs::HostArgs(const py::list& args, bool shapes_only) {
  buffers_.reserve(args.size());
  for (const auto& a : args) {
    auto tup = a.cast<py::tuple>();
    sim::HostTensor h;
    h.dtype = dtype_named(tup[0].cast<std::string>());
    h.shape = tup[1].cast<std::vector<int64_t>>();
    // bytes, or any C-contiguous buffer (a NumPy array), whatever its element type.
    Py_buffer view;
    if (PyObject_GetBuffer(tup[2].ptr(), &view, PyBUF_C_CONTIGUOUS) != 0) throw py::error_already_set();
    buffers_.push_back(view);
    h.borrowed = {static_cast<const uint8_t*>(view.buf), static_cast<size_t>(view.len)};
    if (!(shapes_only && view.len == 0) && view.len != h.size_bytes())
      throw py::value_error("argument byte size mismatch");
    tensors.push_back(std::move(h));
  }
}

HostArgs::~HostArgs() {
  for (Py_buffer& b : buffers_) PyBuffer_Release(&b);
}

namespace {

// Bytes owned on the C++ side, exposed to Python through the buffer protocol (writable), so a
// NumPy array can wrap them without copying: a HostTensor's vector, or the simulator's own block
// of an output handed over without a copy (sim::InterpretOptions::outputs_without_copy).
struct OwnedBytes {
  std::vector<uint8_t> bytes;
  std::shared_ptr<uint8_t> block;
  size_t block_size = 0;
  uint8_t* data() { return block ? block.get() : bytes.data(); }
  size_t size() const { return block ? block_size : bytes.size(); }
};

py::tuple host_tuple(sim::HostTensor& t) {
  return py::make_tuple(std::string(ir::to_string(t.dtype)), t.shape,
                        py::cast(OwnedBytes{std::move(t.bytes), std::move(t.block), t.block_size}));
}

}  // namespace

void bind_owned_bytes(py::module_& m) {
  py::class_<OwnedBytes>(m, "OwnedBytes", py::buffer_protocol())
      .def_buffer([](OwnedBytes& b) {
        return py::buffer_info(b.data(), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(b.size())}, {py::ssize_t{1}});
      })
      .def("__len__", [](const OwnedBytes& b) { return b.size(); })
      // Equal to any buffer with the same bytes (bytes, another OwnedBytes), like bytes itself.
      .def("__eq__",
           [](OwnedBytes& b, const py::object& other) {
             if (!PyObject_CheckBuffer(other.ptr())) return false;
             const py::buffer_info o = py::reinterpret_borrow<py::buffer>(other).request();
             const auto n = static_cast<size_t>(o.size * o.itemsize);
             return n == b.size() && std::memcmp(o.ptr, b.data(), n) == 0;
           })
      .def("tobytes", [](OwnedBytes& b) { return py::bytes(reinterpret_cast<const char*>(b.data()), b.size()); });
}

py::list written_args_to(std::vector<sim::HostTensor>& args, const std::vector<bool>& written) {
  py::list out;
  for (size_t a = 0; a < args.size(); ++a)
    if (a < written.size() && written[a]) out.append(host_tuple(args[a]));
    else out.append(py::none());
  return out;
}

py::list host_tensors_to(std::vector<sim::HostTensor>& tensors) {
  py::list outs;
  for (sim::HostTensor& o : tensors) outs.append(host_tuple(o));
  return outs;
}

}  // namespace knit::python

namespace {

// A _core.KnitError for `e` with kind ("user" | "runtime" | "internal"), rule, message (without
// location) and the kernel file/line.
py::object knit_exception(const py::exception<knit::Error>& type, const knit::Error& e) {
  static const char* kinds[] = {"user", "runtime", "internal"};
  py::object exc = py::reinterpret_borrow<py::object>(type.ptr())(e.what());
  exc.attr("kind") = kinds[static_cast<int>(e.kind())];
  exc.attr("rule") = e.rule();
  exc.attr("message") = e.message();
  exc.attr("file") = e.loc().file;
  exc.attr("line") = e.loc().line;
  exc.attr("column") = e.loc().column;
  return exc;
}

// Runs IR text on the reference interpreter. args: list of (dtype name, shape, raw bytes).
py::list run_ir(const std::string& text, const py::list& args) {
  const ir::Kernel k = ir::parse(text);
  python::HostArgs hosts(args);
  sim::RunResult r = sim::interpret(k, hosts.tensors);
  return python::host_tensors_to(r.outputs);
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "Knit C++ core: tile IR, verifier, numerics and the reference interpreter";
  // knit::Error -> _core.KnitError carrying kind ("user" | "runtime" | "internal"), rule,
  // message (without location) and the kernel file/line; the Python facade re-raises it as the
  // matching public exception.
  static py::exception<knit::Error> knit_error(m, "KnitError", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const codegen::CapacityError& e) {
      // The allocation up to the failure, for knit.MemoryMap (errors.public_error).
      py::object exc = knit_exception(knit_error, e);
      py::list placed;
      for (const codegen::Placement& p : e.placed) placed.append(knit::python::placement_dict(p));
      exc.attr("placements") = placed;
      exc.attr("failing") = knit::python::placement_dict(e.failing);
      exc.attr("alive") = e.alive;
      exc.attr("capacity") = e.capacity;
      PyErr_SetObject(knit_error.ptr(), exc.ptr());
    } catch (const knit::Error& e) {
      PyErr_SetObject(knit_error.ptr(), knit_exception(knit_error, e).ptr());
    }
  });
  m.def("encode", &encode_array, py::arg("values"), py::arg("dtype"),
        "Round a float32 buffer to dtype (Knit's rounding model); returns the stored bytes");
  m.def("decode", &decode_array, py::arg("bytes"), py::arg("dtype"),
        "Decode the raw bytes of dtype elements; returns float32 bytes");
  m.def(
      "native_cache_stats",
      [] {
        const sim::NativeCacheStats s = sim::native_cache_stats();
        py::dict d;
        d["modules_compiled"] = s.modules_compiled;
        d["modules_from_cache"] = s.modules_from_cache;
        d["entries_rejected"] = s.entries_rejected;
        d["directory"] = s.directory;
        return d;
      },
      "What the native path compiled in this process and where its disk cache is");
  m.def(
      "roundtrip_ir", [](const std::string& text) { return ir::print(ir::parse(text)); },
      "Parse IR text and print it back");
  m.def(
      "parse_ir", [](const std::string& text) { return ir::parse(text); }, py::arg("text"),
      "Parse IR text (as printed, source locations included) into a Kernel");
  m.def("verify_ir", [](const std::string& text) { ir::verify(ir::parse(text)); }, "Parse and verify IR text");
  m.def("run_ir", &run_ir, py::arg("text"), py::arg("args"),
        "Run IR text on the reference interpreter; args and results are (dtype, shape, bytes) tuples");
  knit::python::bind_owned_bytes(m);
  knit::python::bind_builder(m);
  knit::python::bind_tables(m);
  knit::python::bind_disk_cache(m);
}
