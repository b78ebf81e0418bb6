#include "memory_pool.h"

#include <algorithm>

#include "knit/ir/numerics.h"
#include "knit/ir/view.h"

namespace knit::sim {

using namespace knit::ir;

void Memory::settle_fill() {
  if (!fill_owed) return;
  const DType t = *fill_owed;
  fill_owed.reset();
  const int64_t es = dtype_size(t);
  uint8_t fresh[8];
  fill_uninitialized(t, fresh, 1);
  init.for_each_zero_run([&](int64_t at, int64_t len) {
    if (at % es == 0 && len % es == 0) return fill_uninitialized(t, bytes.data() + at, len / es);
    for (int64_t i = at; i < at + len; ++i) bytes[static_cast<size_t>(i)] = fresh[i % es];
  });
}

MemoryPool::MemoryPool(const Kernel& kernel, const codegen::MemoryPlan& plan, bool on_chip_bytes)
    : kernel_(kernel), plan_(plan) {
  const size_t n = kernel.tensors.size();
  hbm_.resize(n);
  placement_.resize(n);
  for (size_t id = 0; id < n; ++id)
    if (const auto& a = plan.tensors[id]) {
      int64_t& used = kernel.tensors[id].buffer == Buffer::sbuf ? sbuf_partition_bytes_ : psum_partition_bytes_;
      used = std::max(used, (a->offset + a->bytes + 63) / 64 * 64);
    }
  sbuf_.resize(static_cast<size_t>(plan.cores));
  psum_.resize(static_cast<size_t>(plan.cores));
  if (!on_chip_bytes) return;
  // On-chip bytes are read only after a write or place()'s NaN fill, except a pinned tensor's,
  // which sees whatever its bytes hold: they start zeroed when the kernel pins one (the same
  // bytes every run), and are left as the memory pool hands them over otherwise.
  const bool pins = std::any_of(kernel.tensors.begin(), kernel.tensors.end(),
                                [](const TensorDecl& t) { return is_on_chip(t.buffer) && t.address; });
  for (size_t c = 0; c < sbuf_.size(); ++c) {
    sbuf_[c].resize(static_cast<size_t>(kMaxPartitions * sbuf_partition_bytes_), false, pins);
    psum_[c].resize(static_cast<size_t>(kMaxPartitions * psum_partition_bytes_), /*track_matmul=*/true, pins);
  }
}

Memory& MemoryPool::place_hbm(int id) {
  Memory& mem = hbm_[static_cast<size_t>(id)];
  placement_[static_cast<size_t>(id)] = {&mem, 0, 0, kernel_.tensor(id).size_bytes(), true};
  return mem;
}

void MemoryPool::place(int id, bool overwritten) {
  const TensorDecl& t = kernel_.tensor(id);
  if (!plan_.tensors[id]) internal_error("tensor '" + t.name + "' has no allocation");
  const codegen::Allocation& a = *plan_.tensors[id];
  Memory& mem = (t.buffer == Buffer::sbuf ? sbuf_ : psum_)[a.core];
  const int64_t capacity = partition_capacity(t.buffer);
  const int64_t bytes = a.bytes, parts = a.partitions;
  Placement pl{&mem, a.partition, a.offset, bytes, true};
  placement_[static_cast<size_t>(id)] = pl;
  // A pinned tensor sees whatever its bytes hold (aliasing through address= is the kernel's
  // explicit choice; never-written bytes are still caught by the bitmap). An automatically
  // placed tensor starts fresh: NaN / 4, never written, no matmul accumulation state, so stale
  // data of a dead tensor at the same address can never pass as initialized.
  if (t.address) {  // a new accumulation group all the same
    for (int64_t p = 0; p < parts && mem.tracks_matmul(); ++p)
      mem.mm_written.set((pl.partition + p) * capacity + pl.offset, bytes, 0);
    return;
  }
  // When the placing instruction overwrites the whole tensor before anything reads it, the NaN
  // fill and the cleared flags would be overwritten unseen: skip them (the largest per-run cost
  // of streaming kernels; same bytes and flags after that instruction either way).
  for (int64_t p = 0; p < parts; ++p) {
    const int64_t base = (pl.partition + p) * capacity + pl.offset;
    if (!overwritten) {
      fill_uninitialized(t.dtype, mem.bytes.data() + base, t.partition_elements());
      mem.init.set(base, bytes, 0);
    }
    if (mem.tracks_matmul()) mem.mm_written.set(base, bytes, 0);
  }
}

// A static view (verified in bounds, each on-chip partition's elements inside that partition)
// maps its indices to memory offsets linearly; the addresses come from the allocation plan, so
// this needs no live placement (the native path builds its shapes before running).
bool MemoryPool::layout_of(const View& v, Layout& out) const {
  if (!v.is_static()) return false;
  const TensorDecl& t = kernel_.tensor(v.tensor);
  const int64_t es = dtype_size(v.dtype);
  out.num.resize(v.dims.size());
  out.stride.resize(v.dims.size());
  out.base = v.offset * es;
  size_t first_free = 0;
  if (is_on_chip(t.buffer)) {
    const PartitionLayout l = partition_layout(t, v);
    if (!l.partition_dim || !l.inside() || !plan_.tensors[v.tensor]) return false;
    const codegen::Allocation& a = *plan_.tensors[v.tensor];
    const int64_t capacity = partition_capacity(t.buffer);
    out.num[0] = v.dims[0].num;
    out.stride[0] = capacity;
    first_free = 1;
    out.base = (a.partition + l.first_partition) * capacity + a.offset + l.start_byte;
  }
  for (size_t k = first_free; k < v.dims.size(); ++k) {
    out.num[k] = v.dims[k].num;
    out.stride[k] = v.dims[k].step * es;
  }
  return true;
}

// Fills `out` with the layout's offsets (odometer over the indices, innermost fastest, adding
// strides instead of multiplying), or returns false for a layout_of refuses.
bool MemoryPool::linear_offsets(const View& v, std::vector<int64_t>& out) const {
  Layout l;
  if (!layout_of(v, l)) return false;
  std::vector<int64_t> idx(l.num.size(), 0);
  int64_t at = l.base;
  const size_t inner = l.num.empty() ? 0 : l.num.size() - 1;
  for (size_t e = 0; e < out.size();) {
    if (l.num.empty()) {
      out[e++] = at;
      continue;
    }
    const int64_t n = l.num[inner], step = l.stride[inner];
    for (int64_t j = 0; j < n; ++j) out[e++] = at + j * step;
    for (size_t k = inner; k-- > 0;) {
      at += l.stride[k];
      if (++idx[k] < l.num[k]) break;
      at -= l.stride[k] * l.num[k];
      idx[k] = 0;
    }
  }
  return true;
}

}  // namespace knit::sim
