// knit._cppc: the in-process C++ kernel compiler (frontend/cpp) seen from Python. A separate
// extension from knit._core so that only `knit.cpp` users load Clang's libraries. Kernels cross
// to knit._core as IR text (with their source locations), parsed there.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <tuple>

#include "knit/frontend/cpp_compiler.h"
#include "knit/frontend/cpp_lint.h"
#include "knit/ir/text.h"

namespace py = pybind11;
using knit::frontend::CppKernelFile;

PYBIND11_MODULE(_cppc, m) {
  m.doc() = "Knit's in-process C++ kernel compiler (Clang + ORC)";
  py::class_<CppKernelFile>(m, "CppKernelFile")
      .def_static(
          "load",
          [](const std::string& path, const std::vector<std::string>& extra_args) {
            py::gil_scoped_release release;
            return CppKernelFile::load(path, extra_args);
          },
          py::arg("path"), py::arg("extra_args") = std::vector<std::string>{},
          "Compile (or load from the disk cache) a C++ kernel file")
      .def_property_readonly("kernels",
                             [](const CppKernelFile& f) {
                               std::vector<std::tuple<std::string, size_t, int, std::vector<std::string>>> out;
                               for (const auto& k : f.kernels()) out.emplace_back(k.name, k.arity, k.line, k.params);
                               return out;
                             })
      .def_property_readonly("from_cache", &CppKernelFile::from_cache)
      .def_property_readonly("cache_key", &CppKernelFile::cache_key)
      .def_property_readonly("warnings", &CppKernelFile::warnings)
      .def(
          "trace",
          [](const CppKernelFile& f, const std::string& name, const py::list& args, const std::string& target) {
            std::vector<knit::frontend::CppTensorSpec> specs;
            for (const auto& a : args) {
              auto t = a.cast<py::tuple>();
              auto dtype = knit::ir::parse_enum<knit::ir::DType>(t[0].cast<std::string>());
              if (!dtype) throw py::value_error("unknown Knit dtype " + t[0].cast<std::string>());
              specs.push_back({*dtype, t[1].cast<std::vector<int64_t>>(), t[2].cast<std::string>()});
            }
            auto parsed = knit::ir::parse_enum<knit::ir::Target>(target);
            if (!parsed) throw py::value_error("unknown target " + target);
            return knit::ir::print(f.trace(name, specs, *parsed));
          },
          py::arg("name"), py::arg("args"), py::arg("target"),
          "Trace a kernel for (dtype, shape, name) arguments; returns the IR text");
  m.def("precompile_header", &knit::frontend::precompile_header,
        "Build the precompiled <knit/knit.h> into the build's folder (run by the build); its path, or ''");
  m.def("include_dirs", &knit::frontend::knit_include_dirs,
        "The -I folders of Knit's headers every kernel compile uses (installed copy, else the source tree)");
  m.def(
      "lint",
      [](const std::string& path, const std::vector<std::string>& extra_args) {
        py::list out;
        for (const auto& f : knit::frontend::lint_file(path, extra_args))
          out.append(py::make_tuple(f.severity, f.rule, f.message, f.begin.file, f.begin.line, f.begin.column,
                                    f.end_line, f.end_column));
        return out;
      },
      py::arg("path"), py::arg("extra_args") = std::vector<std::string>{},
      "Static checks of a C++ kernel file: (severity, rule, message, file, line, column, end_line, end_column)");
}
