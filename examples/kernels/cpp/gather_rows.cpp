// knit-run: --shape 1000x256 --shape 256:int32 --int-range 0:1000 --reference 'x0[x1]'
#include "kernels.h"

namespace knit::examples {

nl::tensor gather_rows(nl::tensor table, nl::tensor ids) {
  const int64_t n = ids.shape(0), dim = table.shape(1), pmax = nl::tile_size::pmax;
  auto out = nl::ndarray({n, dim}, table.dtype(), nl::shared_hbm, "out");
  // Rows start .. start+p-1 of the output. `start` is a register inside the device loop and an
  // int for the ragged tail: the same code serves both.
  auto gather_tile = [&](nl::reg start, int64_t p) {
    auto idx = nl::ndarray({p, 1}, nl::int32, nl::sbuf, "idx");
    isa::dma_copy(idx, ids(nl::ds(start, p)).expand_dim(1));
    // vector_offset: row r of this pattern is table row idx[r] (an indirect DMA); an id outside
    // the table is a run-time error naming it.
    auto rows = nl::ndarray({p, dim}, table.dtype(), nl::sbuf, "rows");
    isa::dma_copy(rows, table.ap({{dim, p}, {1, dim}}, 0, {.vector_offset = idx}));
    isa::dma_copy(out(nl::ds(start, p), nl::all), rows);
  };
  // Full tiles run as one device loop (traced once, whatever n is); the tail is traced as is.
  nl::dynamic_range(n / pmax, [&](nl::reg i) { gather_tile(i * pmax, pmax); });
  if (n % pmax) gather_tile(n / pmax * pmax, n % pmax);
  return out;
}

KNIT_KERNEL(gather_rows)

}  // namespace knit::examples
