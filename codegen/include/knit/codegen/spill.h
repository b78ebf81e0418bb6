// PSUM spilling: when the PSUM tiles live at some point do not fit in PSUM's 8 banks, a live tile
// that is not needed there is copied out to SBUF and back in before its next use, as the Neuron
// compiler spills an over-subscribed PSUM (docs/codegen.md, "PSUM spilling").
#pragma once

#include <string>
#include <vector>

#include "knit/ir/ir.h"

namespace knit::codegen {

// The kernel with spill copies inserted until allocation (allocate.h) finds room for every PSUM
// tensor. Each spill of a PSUM tensor T adds an SBUF tensor S (spill_of = T), a `tensor_copy` S <- T
// right after T's last use before the over-full point, a fresh PSUM tensor T' (T's name and
// declaration line) written by a `tensor_copy` T' <- S right before T's next use, and renames T to
// T' from there on. Victim: among the PSUM tiles live where a tile does not fit, not used there,
// not pinned, used only outside blocks (loops, branches), already written whole, and whose next use
// is not a matmul that accumulates into it (an open accumulation group, whose matmul-written flags
// a copy would clear), the one whose next use is farthest. When no tile qualifies, or SBUF has no
// room for the copy, the kernel's capacity error stands, saying why. A kernel that fits is
// returned unchanged.
ir::Kernel spill_psum(ir::Kernel kernel);

// One `psum-spill` warning per spill in a kernel spill_psum returned, naming the PSUM tensor, its
// declaration line and the lines where it is copied out and back in.
std::vector<std::string> spill_warnings(const ir::Kernel& kernel);

}  // namespace knit::codegen
