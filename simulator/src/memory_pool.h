// The simulator's memories and where each tensor lies in them: one buffer per HBM tensor, and per
// core an SBUF and a PSUM of 128 partitions, each holding only the part of a partition that the
// allocation uses (the bytes below its highest address), so a run touches and clears little memory.
// Addresses come from codegen's allocation, the one the engine program uses; an on-chip tensor is
// placed at its first use (its life starts there) and released after its last.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "byte_flags.h"
#include "knit/codegen/allocate.h"
#include "knit/ir/ir.h"
#include "zeroed_bytes.h"

namespace knit::sim {

struct Memory {
  ZeroedBytes bytes;
  ByteFlags init;        // 1 where the byte was ever written; empty: every byte was (arguments)
  ByteFlags mm_written;  // PSUM only (empty elsewhere): 1 where the last write was a matmul's
  // 1 where the byte was written with a value computed from never-written memory (poison,
  // docs/simulator.md "Never-written memory"); empty until the first such write. A byte is
  // defined when it was written (init) and is not poisoned.
  ByteFlags poison;
  // A fresh HBM tensor's NaN / 4 fill (lazy_fill_note in machine.cpp), owed until something may
  // read a never-written byte: the dtype of its pattern, or nullopt when nothing is owed.
  std::optional<ir::DType> fill_owed;
  // Writes the owed fill into the bytes never written so far (one pass over the flags' summary,
  // and the unwritten bytes): a reader that may see them calls it first.
  void settle_fill();
  // zero_bytes false: the caller fills every byte itself (a fresh HBM tensor's NaN fill).
  void resize(size_t n, bool track_matmul = false, bool zero_bytes = true) {
    bytes.reset(n, zero_bytes);
    init.reset(n);
    mm_written.reset(track_matmul ? n : 0);
    poison.reset(0);
  }
  // An argument's memory: `n` bytes the caller fills, all initialized (no bitmap to keep).
  void resize_initialized(size_t n) {
    bytes.reset(n, /*zero=*/false);
    init.reset(0);
    mm_written.reset(0);
    poison.reset(0);
  }
  // An argument no instruction writes: its caller's bytes, in place, all initialized.
  void borrow_initialized(std::span<const uint8_t> in) {
    bytes.borrow(in.data(), in.size());
    init.reset(0);
    mm_written.reset(0);
    poison.reset(0);
  }
  bool tracks_init() const { return init.size() != 0; }
  bool tracks_matmul() const { return mm_written.size() != 0; }
  // Whether some byte in [at, at + len) was never written or holds poison.
  bool undefined(int64_t at, int64_t len) const {
    return (tracks_init() && !init.all(at, len, 1)) || (poison.size() != 0 && !poison.all(at, len, 0));
  }
  // Marks [at, at + len) as holding poison (sizing the flags on the first poisoned write).
  void set_poison(int64_t at, int64_t len) {
    if (poison.size() == 0) poison.reset(bytes.size());
    poison.set(at, len, 1);
  }
  // A write of a defined value clears its bytes' poison.
  void clear_poison(int64_t at, int64_t len) {
    if (poison.size() != 0) poison.set(at, len, 0);
  }
};

class MemoryPool {
 public:
  struct Placement {
    Memory* mem = nullptr;
    int64_t partition = 0;        // first partition (on-chip)
    int64_t offset = 0;           // byte offset within a partition (on-chip) or the buffer (HBM)
    int64_t partition_bytes = 0;  // bytes per partition of the tensor (on-chip)
    bool live = false;
  };
  // A static view's elements as a byte-strided walk of its tensor's memory: element
  // (i_0, .., i_k) is at base + sum i_d * stride[d], the partition dim of an on-chip view moving by
  // whole partitions.
  struct Layout {
    int64_t base = 0;
    std::vector<int64_t> num, stride;
  };

  // `on_chip_bytes` false: SBUF and PSUM get no bytes (a timing-only run of an engine program,
  // which places no tensor).
  MemoryPool(const ir::Kernel& kernel, const codegen::MemoryPlan& plan, bool on_chip_bytes);

  // An HBM tensor's buffer, live from now on for the whole kernel; the caller sizes and fills it.
  Memory& place_hbm(int id);
  Memory& hbm(int id) { return hbm_[static_cast<size_t>(id)]; }
  const Memory& hbm(int id) const { return hbm_[static_cast<size_t>(id)]; }
  // Starts an on-chip tensor's life at its allocated address. `overwritten`: the instruction that
  // places it writes every byte before anything reads it, so the fresh-memory fill is skipped.
  void place(int id, bool overwritten);
  void release(int id) { placement_[static_cast<size_t>(id)].live = false; }
  const Placement& placement(int id) const { return placement_[static_cast<size_t>(id)]; }
  // The memory a live tensor's view lies in (HBM buffer, or its core's SBUF / PSUM).
  Memory* memory_of(const ir::View& v) const { return placement_[static_cast<size_t>(v.tensor)].mem; }
  // Bytes between the starts of two partitions of an on-chip memory (SBUF or PSUM).
  int64_t partition_capacity(ir::Buffer b) const {
    return b == ir::Buffer::sbuf ? sbuf_partition_bytes_ : psum_partition_bytes_;
  }
  // A static view's layout; false for views this does not cover (dynamic, indirect, spilling
  // across partitions), which take the per-element path. Needs no live placement.
  bool layout_of(const ir::View& v, Layout& out) const;
  // The layout's byte offsets in element order, or false where layout_of is.
  bool linear_offsets(const ir::View& v, std::vector<int64_t>& out) const;

 private:
  const ir::Kernel& kernel_;
  const codegen::MemoryPlan& plan_;
  std::vector<Memory> sbuf_, psum_;  // one per core (codegen::MemoryPlan::cores)
  int64_t sbuf_partition_bytes_ = 64, psum_partition_bytes_ = 64;
  std::vector<Memory> hbm_;  // one per tensor id (unused for on-chip tensors)
  std::vector<Placement> placement_;
};

}  // namespace knit::sim
