// knit._core: the C++ core seen from Python. The Python front end (python/knit) builds on it;
// today it exposes the IR text form, the verifier, the numerics and the reference interpreter.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "knit/ir/numerics.h"
#include "knit/ir/text.h"
#include "knit/ir/verifier.h"
#include "knit/sim/interpreter.h"

namespace py = pybind11;
using namespace knit;

namespace {

ir::DType dtype_named(const std::string& name) {
  auto d = ir::parse_enum<ir::DType>(name);
  if (!d) throw py::value_error("unknown Knit dtype '" + name + "'");
  return *d;
}

// Rounds float32 values to `dtype` and returns the stored bytes as uint8 (Knit's rounding model).
py::array_t<uint8_t> encode_array(py::array_t<float, py::array::c_style | py::array::forcecast> values,
                                  const std::string& dtype) {
  const ir::DType t = dtype_named(dtype);
  const int size = ir::dtype_size(t);
  py::array_t<uint8_t> out(values.size() * size);
  auto in = values.unchecked<1>();
  auto o = out.mutable_unchecked<1>();
  for (py::ssize_t i = 0; i < values.size(); ++i) ir::encode(t, in(i), o.mutable_data(i * size));
  return out;
}

// Decodes raw bytes of `dtype` to float32.
py::array_t<float> decode_array(py::array_t<uint8_t, py::array::c_style> bytes, const std::string& dtype) {
  const ir::DType t = dtype_named(dtype);
  const int size = ir::dtype_size(t);
  if (bytes.size() % size) throw py::value_error("byte count is not a multiple of the dtype size");
  py::array_t<float> out(bytes.size() / size);
  auto in = bytes.unchecked<1>();
  auto o = out.mutable_unchecked<1>();
  for (py::ssize_t i = 0; i < out.size(); ++i) o(i) = ir::decode(t, in.data(i * size));
  return out;
}

// Runs IR text on the reference interpreter. args: list of (dtype name, shape, raw bytes).
py::list run_ir(const std::string& text, const py::list& args) {
  const ir::Kernel k = ir::parse(text);
  std::vector<sim::HostTensor> hosts;
  for (const auto& a : args) {
    auto tup = a.cast<py::tuple>();
    sim::HostTensor h;
    h.dtype = dtype_named(tup[0].cast<std::string>());
    h.shape = tup[1].cast<std::vector<int64_t>>();
    const std::string raw = tup[2].cast<py::bytes>();
    h.bytes.assign(raw.begin(), raw.end());
    if (static_cast<int64_t>(h.bytes.size()) != h.size_bytes()) throw py::value_error("argument byte size mismatch");
    hosts.push_back(std::move(h));
  }
  sim::RunResult r = sim::interpret(k, hosts);
  py::list outs;
  for (const auto& o : r.outputs)
    outs.append(py::make_tuple(std::string(ir::to_string(o.dtype)), o.shape,
                               py::bytes(reinterpret_cast<const char*>(o.bytes.data()), o.bytes.size())));
  return outs;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "Knit C++ core: tile IR, verifier, numerics and the reference interpreter";
  py::register_exception<knit::Error>(m, "KnitError", PyExc_RuntimeError);
  m.def("encode", &encode_array, py::arg("values"), py::arg("dtype"),
        "Round float32 values to dtype (Knit's rounding model) and return the stored bytes");
  m.def("decode", &decode_array, py::arg("bytes"), py::arg("dtype"), "Decode raw dtype bytes to float32");
  m.def("roundtrip_ir", [](const std::string& text) { return ir::print(ir::parse(text)); },
        "Parse IR text and print it back");
  m.def("verify_ir", [](const std::string& text) { ir::verify(ir::parse(text)); }, "Parse and verify IR text");
  m.def("run_ir", &run_ir, py::arg("text"), py::arg("args"),
        "Run IR text on the reference interpreter; args and results are (dtype, shape, bytes) tuples");
}
