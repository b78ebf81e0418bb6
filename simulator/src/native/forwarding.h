// Copies the native path leaves to their reader (forward_note in executor.h): which dma_copy
// instructions qualify, statically, and the reader's operand swapped for the copy's source.
#pragma once

#include <cstddef>
#include <unordered_map>

#include "knit/ir/ir.h"

namespace knit::sim {

// Body index of each dma_copy that may forward its source -> body index of its one reader. The
// copy loads a kernel argument (HBM) into an on-chip tile, unpinned, same dtype, rows in range;
// the tile appears in exactly two views of the whole kernel: the copy's dst and one walked input
// (data, data1, data2, src; not a scalar column or bias) of a later element-wise instruction
// (tensor_tensor, tensor_scalar, activation, tensor_copy; no indirect view) that reads exactly
// that view; every instruction between the two moves tensor data (no block,
// register or synchronization instruction: the reader follows the copy, with the same registers).
std::unordered_map<size_t, size_t> forwarded_copies(const ir::Kernel& k);

// Replaces every view of `reader` equal to `from` by `to`; false when there is none.
bool substitute_view(ir::Instruction& reader, const ir::View& from, const ir::View& to);

}  // namespace knit::sim
