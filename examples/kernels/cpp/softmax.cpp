// knit-run: --shape 300x1024 --reference 'np.exp(x0 - x0.max(1, keepdims=True)) / np.exp(x0 - x0.max(1, keepdims=True)).sum(1, keepdims=True)'
#include <algorithm>

#include "kernels.h"

namespace knit::examples {

nl::tensor softmax(nl::tensor x) {
  auto out = nl::ndarray(x.shape(), x.dtype(), nl::shared_hbm, "out");
  const int64_t rows = x.shape(0), cols = x.shape(1);
  for (int64_t r = 0; r < rows; r += nl::tile_size::pmax) {
    const int64_t p = std::min(nl::tile_size::pmax, rows - r);
    auto tile = nl::ndarray({p, cols}, x.dtype(), nl::sbuf, "x_tile");
    isa::dma_copy(tile, x(nl::ds(r, p), nl::all));
    // neg_max = -max(x) per row, the bias that keeps exp in range.
    auto neg_max = nl::ndarray({p, 1}, nl::float32, nl::sbuf, "neg_max");
    isa::tensor_reduce(neg_max, nl::maximum, tile, {1}, {.negate = true});
    // e = exp(x - max), row sums accumulated by the Scalar Engine in the same pass.
    auto e = nl::ndarray({p, cols}, nl::float32, nl::sbuf, "exp");
    auto sum = nl::ndarray({p, 1}, nl::float32, nl::sbuf, "sum");
    isa::activation_reduce(e, nl::exp, tile, nl::add, sum, {.bias = neg_max});
    auto inv = nl::ndarray({p, 1}, nl::float32, nl::sbuf, "inv_sum");
    isa::reciprocal(inv, sum);
    auto y = nl::ndarray({p, cols}, x.dtype(), nl::sbuf, "y");
    isa::tensor_scalar(y, e, nl::multiply, inv);
    isa::dma_copy(out(nl::ds(r, p), nl::all), y);
  }
  return out;
}

KNIT_KERNEL(softmax)

}  // namespace knit::examples
