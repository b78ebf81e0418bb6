// Shared pieces of the knit._core bindings.
#pragma once

#include <pybind11/pybind11.h>

#include <vector>

#include "knit/sim/host_tensor.h"

namespace knit::python {

// Host tensors cross the boundary as (dtype name, shape, bytes) tuples: layout independent of
// the NumPy version (see core_module.cpp).
// (dtype, shape, bytes) tuples -> host tensors; with shapes_only, bytes may be empty (timing-only runs).
std::vector<sim::HostTensor> host_tensors_from(const pybind11::list& args, bool shapes_only = false);
pybind11::list host_tensors_to(const std::vector<sim::HostTensor>& tensors);
// The arguments after a run, None for those no instruction writes (they cannot have changed).
pybind11::list written_args_to(const std::vector<sim::HostTensor>& args, const std::vector<bool>& written);

void bind_builder(pybind11::module_& m);

}  // namespace knit::python
