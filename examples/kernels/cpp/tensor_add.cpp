// knit-run: --shape 300x512 --shape 300x512 --reference 'x0 + x1'
#include <algorithm>

#include "kernels.h"

namespace knit::examples {

nl::tensor tensor_add(nl::tensor a, nl::tensor b) {
  auto out = nl::ndarray(a.shape(), a.dtype(), nl::shared_hbm, "out");
  const int64_t rows = a.shape(0), cols = a.shape(1);
  for (int64_t r = 0; r < rows; r += nl::tile_size::pmax) {
    const int64_t p = std::min(nl::tile_size::pmax, rows - r);
    auto a_tile = nl::ndarray({p, cols}, a.dtype(), nl::sbuf, "a_tile");
    auto b_tile = nl::ndarray({p, cols}, b.dtype(), nl::sbuf, "b_tile");
    auto sum = nl::ndarray({p, cols}, a.dtype(), nl::sbuf, "sum");
    isa::dma_copy(a_tile, a(nl::ds(r, p), nl::all));
    isa::dma_copy(b_tile, b(nl::ds(r, p), nl::all));
    isa::tensor_tensor(sum, a_tile, b_tile, nl::add);
    isa::dma_copy(out(nl::ds(r, p), nl::all), sum);
  }
  return out;
}

KNIT_KERNEL(tensor_add)

}  // namespace knit::examples
