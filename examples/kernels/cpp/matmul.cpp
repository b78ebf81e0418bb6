// knit-run: --shape 256x256:bfloat16 --shape 256x512:bfloat16 --reference 'x0.T @ x1'
#include "kernels.h"

namespace knit::examples {

nl::tensor matmul(nl::tensor lhsT, nl::tensor rhs) {
  const int64_t K = lhsT.shape(0), M = lhsT.shape(1), N = rhs.shape(1);
  const int64_t TK = nl::tile_size::pmax, TM = nl::tile_size::gemm_stationary_fmax,
                TN = nl::tile_size::gemm_moving_fmax;
  auto out = nl::ndarray({M, N}, rhs.dtype(), nl::shared_hbm, "out");
  for (int64_t m = 0; m < M; m += TM) {
    for (int64_t n = 0; n < N; n += TN) {
      // A fresh PSUM tile per output block: its first matmul overwrites, later ones accumulate.
      auto acc = nl::ndarray({TM, TN}, nl::float32, nl::psum, "acc");
      for (int64_t k = 0; k < K; k += TK) {
        auto lhs_tile = nl::ndarray({TK, TM}, lhsT.dtype(), nl::sbuf, "lhsT_tile");
        auto rhs_tile = nl::ndarray({TK, TN}, rhs.dtype(), nl::sbuf, "rhs_tile");
        isa::dma_copy(lhs_tile, lhsT(nl::ds(k, TK), nl::ds(m, TM)));
        isa::dma_copy(rhs_tile, rhs(nl::ds(k, TK), nl::ds(n, TN)));
        isa::nc_matmul(acc, lhs_tile, rhs_tile);
      }
      auto result = nl::ndarray({TM, TN}, rhs.dtype(), nl::sbuf, "result");
      isa::tensor_copy(result, acc);  // PSUM -> SBUF, rounding fp32 to the output dtype
      isa::dma_copy(out(nl::ds(m, TM), nl::ds(n, TN)), result);
    }
  }
  return out;
}

KNIT_KERNEL(matmul)

}  // namespace knit::examples
