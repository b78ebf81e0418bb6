// Spilling: when the PSUM tiles live at some point do not fit in PSUM's 8 banks, a live tile that
// is not needed there is copied out to SBUF and back in before its next use; when the SBUF tensors
// live at some point do not fit in SBUF, one is copied out to HBM by DMA and back. The Neuron
// compiler spills an over-subscribed PSUM or SBUF the same way (docs/codegen.md, "Spilling").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "knit/ir/ir.h"
#include "knit/ir/liveness.h"

namespace knit::codegen {

// The kernel with spill copies inserted until allocation (allocate.h) finds room for every
// on-chip tensor. Each spill of a PSUM tensor T adds an SBUF tensor S (spill_of = T), a
// `tensor_copy` S <- T right after T's last use before the over-full point, a fresh PSUM tensor T'
// (T's name and declaration line) written by a `tensor_copy` T' <- S right before T's next use,
// and renames T to T' from there on. A spill of an SBUF tensor is the same with a private HBM
// tensor S and `dma_copy` both ways. Victim: among the tiles of the buffer live where a tile does
// not fit, not used there, not pinned, used only outside blocks (loops, branches), already written
// whole (by static writes that together cover it), not needed again by the instruction that next
// uses the failing tile, and (PSUM) whose next use is not a matmul that accumulates into it (an
// open accumulation group, whose matmul-written flags a copy would clear), the one whose next use
// is farthest. When SBUF is full and a PSUM spill S is live there, S moves to HBM (through SBUF
// staging tiles) before any SBUF tensor is spilled. When no tile qualifies, the kernel's capacity
// error stands, saying why. A kernel that fits is returned unchanged. `final_live`, when given,
// receives the returned kernel's live ranges (so the caller need not compute them again).
ir::Kernel spill_to_fit(ir::Kernel kernel, std::vector<ir::LiveRange>* final_live = nullptr);
// The same without a copy when nothing needs spilling (nullopt: `kernel` fits as it is); a
// capacity error leaves `kernel` untouched.
std::optional<ir::Kernel> spilled_to_fit(const ir::Kernel& kernel, std::vector<ir::LiveRange>* final_live);

// One `psum-spill` or `sbuf-spill` warning per spill in a kernel spill_to_fit returned, naming
// the spilled tensor, its declaration line and the lines where it is copied out and back in.
std::vector<std::string> spill_warnings(const ir::Kernel& kernel);

}  // namespace knit::codegen
