// Copies the native path leaves to their reader (forward_note in executor.h): which dma_copy
// instructions qualify, statically, and the reader's operand swapped for the copy's source.
#pragma once

#include <cstddef>
#include <unordered_map>
#include <vector>

#include "knit/ir/ir.h"

namespace knit::sim {

// Body index of each dma_copy that may forward its source -> body indices of its readers. The
// copy loads a kernel argument (HBM) into an on-chip tile, unpinned, same dtype and dims, rows
// in range; each other instruction naming the tile names it once, as a walked input (data,
// data1, data2, src; not a scalar column or bias) that is exactly the copy's dst view, of a
// tensor_tensor, tensor_scalar(_reduce), activation(_reduce), tensor_copy or tensor_reduce with
// no indirect view;
// every instruction from the copy to the last reader moves tensor data (no block, register or
// synchronization instruction: the readers follow the copy, with the same registers).
std::unordered_map<size_t, std::vector<size_t>> forwarded_copies(const ir::Kernel& k);

// Replaces every view of `reader` equal to `from` by `to`; false when there is none.
bool substitute_view(ir::Instruction& reader, const ir::View& from, const ir::View& to);

}  // namespace knit::sim
