// Program structure shared by every consumer of a kernel body: which block instructions match,
// and over which body indices each tensor is live. The reference interpreter places tensors with
// it and codegen allocates SBUF/PSUM with it, so both agree on lifetimes.
#pragma once

#include <vector>

#include "knit/ir/ir.h"

namespace knit::ir {

// For a verified kernel: loop/while -> its end; if -> its else (if any) else its end; else -> the
// end; end -> the loop/while/if that opened the block. Other instructions map to 0.
std::vector<size_t> match_blocks(const Kernel& k);

// [first, last] body indices at which a tensor is live; first = -1 if the body never uses it.
// A tensor used inside a block is live for the whole block: a loop body reuses its tensors
// across iterations (one static allocation, as on hardware), and a branch that is skipped must
// not leave a tensor unplaced. Except when the block holds every use and the first use
// overwrites the tensor whole (overwrites_whole): no value crosses iterations, so its range stays
// [first use, last use] and its bytes serve other tensors in the rest of the body.
struct LiveRange {
  int64_t first = -1, last = -1;
  bool used() const { return first >= 0; }
  bool overlaps(const LiveRange& o) const { return used() && o.used() && first <= o.last && o.first <= last; }
};
std::vector<LiveRange> live_ranges(const Kernel& k, const std::vector<size_t>& matches);

// The instruction stores every element of tensor `id` through its dst (whole, static, direct, no
// accumulation state: op_traits' writes_whole_dst, or a matmul with accumulate=off) and uses the
// tensor nowhere else.
bool overwrites_whole(const Kernel& k, const Instruction& inst, int id);

// The instructions from body[first] on, in straight-line code (up to the next block instruction),
// store every element of tensor `id` before any instruction uses it otherwise: each store an
// overwrites_whole-style write of part of it (a writes_whole_dst op's static, direct dst in the
// tensor's dtype), the first other use after the last missing element is written. Weaker than
// overwrites_whole, which the allocation relies on; the simulator uses it only to skip a fresh
// tensor's NaN fill (a tile written in pieces, say two column halves, before it is read).
bool written_whole_before_read(const Kernel& k, size_t first, int id);

// The core (grid instance) each tensor belongs to: in a kernel whose instances synchronize
// (core_barrier / sendrecv) they run as separate NeuronCores, each with its own SBUF and PSUM,
// and a tensor belongs to the instance whose instructions first use it. 0 for every tensor of a
// kernel that does not synchronize (its instances run one after another on one core).
std::vector<int> tensor_cores(const Kernel& k);

}  // namespace knit::ir
