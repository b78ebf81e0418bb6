#include "zeroed_bytes.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iterator>
#include <mutex>
#include <new>
#include <utility>

namespace knit::sim {

namespace {

// Freed blocks by size and use, at most kPoolBytes in all (the oldest go first). A reset takes
// the block of its size and use freed last: the one most likely still in the CPU's caches (a
// streaming kernel's SBUF and HBM tensors are tens of MiB, and every run gets them anew).
// Sparse blocks (ByteFlags' per-flag bytes, rarely touched) are kept apart, so that a data block
// is never one whose pages were left cold.
constexpr size_t kPoolBytes = size_t{512} << 20;
struct Block {
  size_t size;
  ZeroedBytes::Use use;
  uint8_t* data;
};
struct Pool {
  std::mutex mutex;
  std::deque<Block> blocks;
  size_t bytes = 0;
};
Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: blocks may be released during exit
  return *p;
}

// huge_pages_note: a data block of 2 MiB or more is mapped on its own, 2 MiB-aligned, and asks the
// kernel for transparent huge pages (MADV_HUGEPAGE; with THP in "madvise" mode, the common
// default, nothing else gets them). The simulated SBUF is read a partition row at a time, rows
// 192 KiB apart, so with 4 KiB pages every row of a tile is a new page and a new TLB miss; NumPy
// asks the same for its own large arrays. Fresh mappings read as zero. Sparse blocks stay on 4 KiB
// pages: a huge page would make the first touch of a flag zero 2 MiB.
constexpr size_t kHugePage = size_t{2} << 20;
bool huge_block(size_t n, ZeroedBytes::Use use) { return use == ZeroedBytes::Use::data && n >= kHugePage; }
size_t huge_mapping_size(size_t n) { return (n + kHugePage - 1) / kHugePage * kHugePage; }

uint8_t* map_huge(size_t n) {
  const size_t size = huge_mapping_size(n);
  void* raw = mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  // The slack before the aligned run (none when the mapping came aligned) and after it (never
  // empty: the two add up to kHugePage).
  if (aligned > start) munmap(raw, aligned - start);
  munmap(reinterpret_cast<void*>(aligned + size), start + kHugePage - aligned);
#ifdef MADV_HUGEPAGE
  madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);
#endif
  return reinterpret_cast<uint8_t*>(aligned);
}

// A new block: huge pages for large data blocks, else the C heap; zeroed if asked.
uint8_t* allocate(size_t n, bool zero, ZeroedBytes::Use use) {
  if (huge_block(n, use)) return map_huge(n);  // fresh mappings are zero
  return static_cast<uint8_t*>(zero ? std::calloc(n ? n : 1, 1) : std::malloc(n ? n : 1));
}

void deallocate(uint8_t* data, size_t n, ZeroedBytes::Use use) {
  if (huge_block(n, use)) munmap(data, huge_mapping_size(n));
  else std::free(data);
}

// A block no one uses any more: kept for a later reset() of the same size, or freed.
void recycle(uint8_t* data, size_t n, ZeroedBytes::Use use) {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (n >= (size_t{1} << 20) && n <= kPoolBytes) {
    p.blocks.push_back({n, use, data});
    p.bytes += n;
    while (p.bytes > kPoolBytes) {
      deallocate(p.blocks.front().data, p.blocks.front().size, p.blocks.front().use);
      p.bytes -= p.blocks.front().size;
      p.blocks.pop_front();
    }
  } else {
    deallocate(data, n, use);
  }
}

}  // namespace

void ZeroedBytes::reset(size_t n, bool zero, Use use) {
  release();
  use_ = use;
  {
    Pool& p = pool();
    std::lock_guard<std::mutex> lock(p.mutex);
    for (auto it = p.blocks.rbegin(); it != p.blocks.rend(); ++it)
      if (it->size == n && it->use == use) {
        data_ = it->data;
        p.bytes -= n;
        p.blocks.erase(std::next(it).base());
        break;
      }
  }
  if (data_ && zero) std::memset(data_, 0, n);
  else if (!data_) data_ = allocate(n, zero, use);
  if (!data_) throw std::bad_alloc();
  size_ = n;
}

void ZeroedBytes::borrow(const uint8_t* data, size_t n) {
  release();
  data_ = const_cast<uint8_t*>(data);  // never written: see the declaration
  size_ = n;
  borrowed_ = true;
}

void ZeroedBytes::release() {
  if (borrowed_) {
    data_ = nullptr;
    size_ = 0;
    borrowed_ = false;
    return;
  }
  if (!data_) return;
  recycle(data_, size_, use_);
  data_ = nullptr;
  size_ = 0;
}

std::shared_ptr<uint8_t> ZeroedBytes::share() {
  const size_t n = std::exchange(size_, 0);
  const Use use = use_;
  return std::shared_ptr<uint8_t>(std::exchange(data_, nullptr), [n, use](uint8_t* data) { recycle(data, n, use); });
}

}  // namespace knit::sim
