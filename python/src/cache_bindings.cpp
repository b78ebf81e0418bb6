// knit._core's view of the disk cache (codegen/jit/disk_cache.h): Python's program cache stores
// its entries through the same code as the JIT's objects.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bindings.h"
#include "knit/jit/disk_cache.h"

namespace py = pybind11;

namespace knit::python {

void bind_disk_cache(py::module_& m) {
  m.def(
      "cache_load",
      [](const std::string& directory, const std::string& suffix, const std::string& key) -> py::object {
        std::optional<std::string> payload;
        {
          py::gil_scoped_release release;
          payload = codegen::DiskCache(directory, suffix).load(key);
        }
        if (!payload) return py::none();
        return py::bytes(*payload);
      },
      py::arg("directory"), py::arg("suffix"), py::arg("key"),
      "The payload of the entry <directory>/<key><suffix>, or None (missing; or unreadable, "
      "corrupt or written for another key: then removed with a warning on stderr)");
  m.def(
      "cache_store",
      [](const std::string& directory, const std::string& suffix, const std::string& key, const py::object& payload) {
        // Views of the caller's bytes objects (immutable, and alive for the call): a payload of
        // hundreds of MB is written without a copy.
        std::vector<py::bytes> held;
        if (py::isinstance<py::bytes>(payload)) held.push_back(payload.cast<py::bytes>());
        else
          for (const py::handle piece : payload) held.push_back(piece.cast<py::bytes>());
        std::vector<std::string_view> pieces;
        for (const py::bytes& piece : held) pieces.push_back(std::string_view(piece));
        py::gil_scoped_release release;
        return codegen::DiskCache(directory, suffix).store(key, pieces);
      },
      py::arg("directory"), py::arg("suffix"), py::arg("key"), py::arg("payload"),
      "Write the entry <directory>/<key><suffix> atomically, its payload the bytes `payload` or the "
      "concatenation of a list of bytes; False if it could not be written");
  m.def(
      "cache_files",
      [](const std::string& root) {
        py::list out;
        for (const codegen::CacheFile& f : codegen::cache_files(root))
          out.append(py::make_tuple(f.path, f.bytes, f.used_ns, f.temporary));
        return out;
      },
      py::arg("root"),
      "Knit's files in the cache directory's folders: (path, bytes, last used in ns, temporary) tuples");
  m.def("cache_size_cap", &codegen::cache_size_cap, "The cache's size cap in bytes (KNIT_CACHE_MAX_MB; 0: no cap)");
}

}  // namespace knit::python
