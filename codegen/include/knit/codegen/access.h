// Byte ranges an instruction touches, and a tracker that finds conflicting accesses on them.
//
// Both the dependence pass (at compile time) and the race checker (while executing an engine
// program) use these, so "conflict" means the same thing in both. Ranges are conservative:
//  * on-chip memory (one per buffer and core) is addressed by byte offset inside a partition,
//    ignoring which partitions are touched (two tensors side by side in disjoint partitions at
//    the same offsets count as overlapping);
//  * a view's range is the hull of its elements (a strided view covers its gaps);
//  * a view with register terms or indirect indices covers its whole tensor unless its concrete
//    register values are known (the race checker passes concretized views);
//  * the first instruction of a tensor's live range writes its whole allocation (the tensor is
//    placed there, fresh).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "knit/codegen/allocate.h"
#include "knit/codegen/engine_program.h"

namespace knit::codegen {

// Access::memory of a tensor in HBM (each is its own memory).
uint64_t hbm_memory(int tensor);

// Whether an operand of that name (for_each_view) is one the instruction writes.
bool is_output_operand(const char* operand);

struct Access {
  uint64_t memory = 0;     // on-chip: buffer and core; HBM: the tensor
  int64_t lo = 0, hi = 0;  // bytes [lo, hi)
  bool write = false;
  const char* operand = "";
};

// The accesses of one instruction's operands, reads first. `places` lists tensors whose live range starts at
// this instruction (each adds a write of its whole allocation).
std::vector<Access> instruction_accesses(const ir::Kernel& k, const MemoryPlan& plan, const ir::Instruction& inst,
                                         const std::vector<int>& places = {});

// An instruction's position: its queue and index in that queue within the region.
struct Epoch {
  int queue = -1;
  int32_t pos = -1;
  uint32_t ir = 0;
  bool valid() const { return queue >= 0; }
};

// Remembers, for every byte range, its last writer and the latest reader from each queue since
// that write. record() reports each earlier access that conflicts with a new one (write after
// anything, read after write), then records the new one.
class AccessTracker {
 public:
  void clear() { memories_.clear(); }
  template <class F>  // f(const Epoch& earlier, bool earlier_was_write)
  void record(const Access& a, const Epoch& e, F&& f);

 private:
  struct Segment {
    int64_t hi = 0;
    Epoch writer;
    std::array<Epoch, kNumQueues> readers{};
  };
  using Segments = std::map<int64_t, Segment>;  // by lo; disjoint
  Segments::iterator split(Segments& s, int64_t at);
  std::unordered_map<uint64_t, Segments> memories_;
};

template <class F>
void AccessTracker::record(const Access& a, const Epoch& e, F&& f) {
  if (a.hi <= a.lo) return;
  Segments& s = memories_[a.memory];
  // Fill gaps in [lo, hi) with empty segments so that every byte has exactly one segment.
  int64_t at = a.lo;
  split(s, a.lo);
  split(s, a.hi);
  auto it = s.lower_bound(a.lo);
  while (at < a.hi) {
    if (it == s.end() || it->first > at) {
      const int64_t gap_end = it == s.end() ? a.hi : std::min(a.hi, it->first);
      it = s.emplace_hint(it, at, Segment{gap_end, {}, {}});
    }
    Segment& seg = it->second;
    if (seg.writer.valid()) f(seg.writer, true);
    if (a.write) {
      for (const Epoch& r : seg.readers)
        if (r.valid()) f(r, false);
      seg.writer = e;
      seg.readers = {};
    } else {
      seg.readers[e.queue] = e;
    }
    at = seg.hi;
    ++it;
  }
}

}  // namespace knit::codegen
