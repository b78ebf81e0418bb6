// Shared pieces of the knit._core bindings.
#pragma once

#include <pybind11/pybind11.h>

#include <vector>

#include "knit/sim/host_tensor.h"

namespace knit::codegen {
struct Placement;
}

namespace knit::python {

// Host tensors cross the boundary as (dtype name, shape, buffer) tuples, through the buffer
// protocol only: layout independent of the NumPy version (see core_module.cpp).

// (dtype, shape, buffer) tuples -> host tensors that borrow each buffer's bytes (no copy) until
// this object is destroyed, which must happen with the GIL held. With shapes_only, buffers may
// be empty (timing-only runs).
class HostArgs {
 public:
  explicit HostArgs(const pybind11::list& args, bool shapes_only = false);
  ~HostArgs();
  HostArgs(const HostArgs&) = delete;
  HostArgs& operator=(const HostArgs&) = delete;

  std::vector<sim::HostTensor> tensors;

 private:
  std::vector<Py_buffer> buffers_;
};

// Host tensors -> (dtype, shape, buffer) tuples. Each buffer takes over the tensor's bytes (the
// tensors are left empty), so numpy.frombuffer wraps them without a copy.
pybind11::list host_tensors_to(std::vector<sim::HostTensor>& tensors);
// The arguments after a run, None for those no instruction writes (they cannot have changed).
pybind11::list written_args_to(std::vector<sim::HostTensor>& args, const std::vector<bool>& written);

// A placement as a dict: id, name, buffer, core, partition, partitions, offset, bytes (per
// partition), first, last (its live range's body indices), file, line (knit.MemoryMap's records).
pybind11::dict placement_dict(const codegen::Placement& p);

void bind_owned_bytes(pybind11::module_& m);
void bind_builder(pybind11::module_& m);
void bind_tables(pybind11::module_& m);
void bind_disk_cache(pybind11::module_& m);

}  // namespace knit::python
