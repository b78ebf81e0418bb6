// knit-run: --shape 256x384 --reference 'x0.T'
#include "kernels.h"

namespace knit::examples {

nl::tensor transpose(nl::tensor x) {
  const int64_t M = x.shape(0), N = x.shape(1), T = nl::tile_size::pmax;
  auto out = nl::ndarray({N, M}, x.dtype(), nl::shared_hbm, "out");
  for (int64_t i = 0; i < M; i += T) {
    for (int64_t j = 0; j < N; j += T) {
      auto tile = nl::ndarray({T, T}, x.dtype(), nl::sbuf, "in_tile");
      isa::dma_copy(tile, x(nl::ds(i, T), nl::ds(j, T)));
      auto flipped = nl::ndarray({T, T}, x.dtype(), nl::psum, "flipped");
      isa::nc_transpose(flipped, tile);  // SBUF -> PSUM on the Tensor Engine
      auto result = nl::ndarray({T, T}, x.dtype(), nl::sbuf, "out_tile");
      isa::tensor_copy(result, flipped);
      isa::dma_copy(out(nl::ds(j, T), nl::ds(i, T)), result);
    }
  }
  return out;
}

KNIT_KERNEL(transpose)

}  // namespace knit::examples
