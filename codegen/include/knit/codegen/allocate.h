// SBUF / PSUM allocation: every on-chip tensor gets a partition range and a byte offset inside
// each of its partitions, for the whole of its live range (ir/liveness.h). Tensors whose live
// ranges do not overlap may share addresses; an address= pin is honoured as written (aliasing
// through a pin is the kernel's explicit choice).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "knit/ir/ir.h"
#include "knit/ir/liveness.h"

namespace knit::codegen {

// Byte alignment of SBUF tensor offsets (nl.tile_size.sbuf_min_align); PSUM tensors start on a
// bank (ir::TargetInfo::psum_bank_bytes).
inline constexpr int64_t kSbufAlign = 64;

struct Allocation {
  int core = 0;           // whose SBUF/PSUM (ir::tensor_cores)
  int64_t partition = 0;  // first partition
  int64_t partitions = 0;
  int64_t offset = 0;   // byte offset inside each partition
  int64_t bytes = 0;    // bytes per partition
  bool pinned = false;  // placed by address=
  bool overlaps(const Allocation& o) const {
    return core == o.core && partition < o.partition + o.partitions && o.partition < partition + partitions &&
           offset < o.offset + o.bytes && o.offset < offset + bytes;
  }
};

struct MemoryPlan {
  int cores = 1;                                   // NeuronCores the kernel runs on (each with its own SBUF and PSUM)
  std::vector<std::optional<Allocation>> tensors;  // by tensor id; set for used on-chip tensors
  int64_t sbuf_high_water = 0;                     // bytes per partition, the largest over the cores
  int64_t psum_high_water = 0;
};

// Next fit in order of live-range start (each tensor goes after the previous one of its buffer,
// wrapping to the lowest free range): SBUF offsets aligned to 64 bytes, PSUM tensors starting on
// a 2 KiB bank. Running out of space is a user error at the tensor's declaration,
// naming the tensors alive there, their bytes and source lines, and the target's capacity.
// `hint` replaces the error's closing advice when set.
MemoryPlan allocate(const ir::Kernel& k, const std::vector<ir::LiveRange>& live, const std::string& hint = "");

// The same placement, but running out of space is reported in `failure` (tensor >= 0: the first
// tensor that did not fit, the size it wanted and the tensors alive in its buffer then) with the
// plan as far as it got, instead of thrown. Spilling (spill.h) uses it to find where to spill.
struct AllocationFailure {
  int tensor = -1;
  Allocation want;
  std::vector<int> alive;
};
// `evict`, when set, is asked for a tensor to take out of the placement each time a tensor does
// not fit (the failing tensor, the tensors alive in its buffer): it returns one of them, which no
// later placement then avoids, or -1 to report the failure. Spilling uses it to find several
// spills in one pass.
using Evict = std::function<int(int failing, const std::vector<int>& alive)>;
MemoryPlan try_allocate(const ir::Kernel& k, const std::vector<ir::LiveRange>& live, AllocationFailure& failure,
                        const Evict& evict = {});

}  // namespace knit::codegen
