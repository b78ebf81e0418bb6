#include "knit/sim/host_tensor.h"

#include <functional>
#include <numeric>

#include "knit/ir/error.h"

namespace knit::sim {

int64_t HostTensor::num_elements() const {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

HostTensor HostTensor::zeros(ir::DType dtype, std::vector<int64_t> shape) {
  HostTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.bytes.assign(static_cast<size_t>(t.size_bytes()), 0);
  return t;
}

HostTensor HostTensor::from_floats(ir::DType dtype, std::vector<int64_t> shape, std::span<const float> values) {
  HostTensor t = zeros(dtype, std::move(shape));
  if (static_cast<int64_t>(values.size()) != t.num_elements())
    user_error({}, "host-tensor",
               "HostTensor::from_floats got " + std::to_string(values.size()) + " values for a shape of " +
                   std::to_string(t.num_elements()) + " elements");
  for (int64_t i = 0; i < t.num_elements(); ++i) t.set(i, values[i]);
  return t;
}

std::vector<float> HostTensor::to_floats() const {
  std::vector<float> v(static_cast<size_t>(num_elements()));
  for (int64_t i = 0; i < num_elements(); ++i) v[i] = get(i);
  return v;
}

}  // namespace knit::sim
