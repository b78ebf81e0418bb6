#include "zeroed_bytes.h"

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

// A block no one uses any more: kept for a later reset() of the same size, or freed.
void recycle(uint8_t* data, size_t n, ZeroedBytes::Use use) {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (n >= (size_t{1} << 20) && n <= kPoolBytes) {
    p.blocks.push_back({n, use, data});
    p.bytes += n;
    while (p.bytes > kPoolBytes) {
      std::free(p.blocks.front().data);
      p.bytes -= p.blocks.front().size;
      p.blocks.pop_front();
    }
  } else {
    std::free(data);
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
  else if (!data_) data_ = static_cast<uint8_t*>(zero ? std::calloc(n ? n : 1, 1) : std::malloc(n ? n : 1));
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
