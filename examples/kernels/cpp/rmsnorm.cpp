// knit-run: --shape 300x1024 --shape 1024 --reference 'x0 / np.sqrt((x0 * x0).mean(1, keepdims=True) + 1e-6) * x1'
#include <algorithm>

#include "kernels.h"

namespace knit::examples {

nl::tensor rmsnorm(nl::tensor x, nl::tensor w) {
  auto out = nl::ndarray(x.shape(), x.dtype(), nl::shared_hbm, "out");
  const int64_t rows = x.shape(0), cols = x.shape(1);
  const double eps = 1e-6;
  // The weight row, broadcast to all 128 partitions by the DMA (a stride-0 partition pattern).
  auto w_tile = nl::ndarray({nl::tile_size::pmax, cols}, w.dtype(), nl::sbuf, "w_tile");
  isa::dma_copy(w_tile, w.reshape({1, cols}).broadcast(0, nl::tile_size::pmax));
  for (int64_t r = 0; r < rows; r += nl::tile_size::pmax) {
    const int64_t p = std::min(nl::tile_size::pmax, rows - r);
    auto tile = nl::ndarray({p, cols}, x.dtype(), nl::sbuf, "x_tile");
    isa::dma_copy(tile, x(nl::ds(r, p), nl::all));
    // Sum of squares per row (Scalar Engine square with a fused add-reduction).
    auto squares = nl::ndarray({p, cols}, nl::float32, nl::sbuf, "squares");
    auto sum_sq = nl::ndarray({p, 1}, nl::float32, nl::sbuf, "sum_sq");
    isa::activation_reduce(squares, nl::square, tile, nl::add, sum_sq);
    // inv_rms = rsqrt(sum_sq / cols + eps)
    auto mean_sq = nl::ndarray({p, 1}, nl::float32, nl::sbuf, "mean_sq");
    isa::tensor_scalar(mean_sq, sum_sq, nl::multiply, 1.0 / static_cast<double>(cols),
                       {.op1 = nl::add, .operand1 = eps});
    auto inv_rms = nl::ndarray({p, 1}, nl::float32, nl::sbuf, "inv_rms");
    isa::activation(inv_rms, nl::rsqrt, mean_sq);
    // y = (x * inv_rms) * w
    auto normed = nl::ndarray({p, cols}, nl::float32, nl::sbuf, "normed");
    isa::tensor_scalar(normed, tile, nl::multiply, inv_rms);
    auto y = nl::ndarray({p, cols}, x.dtype(), nl::sbuf, "y");
    isa::tensor_tensor(y, normed, w_tile(nl::ds(0, p), nl::all), nl::multiply);
    isa::dma_copy(out(nl::ds(r, p), nl::all), y);
  }
  return out;
}

KNIT_KERNEL(rmsnorm)

}  // namespace knit::examples
