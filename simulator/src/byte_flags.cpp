#include "byte_flags.h"

namespace knit::sim {

bool ByteFlags::all_range(int64_t at, int64_t len, uint8_t value) const {
  const int64_t end = at + len;
  const uint64_t uniform = value * 0x0101010101010101ull;  // eight summaries all equal to value
  while (at < end) {
    const int64_t b = at >> kShift, hi = std::min(end, (b + 1) * kBlock);
    // Whole blocks eight summaries at a time (a tile row of 8 KiB is 128 blocks).
    if (at == b * kBlock && end - at >= 8 * kBlock) {
      uint64_t eight;
      std::memcpy(&eight, blocks_.data() + b, sizeof eight);
      if (eight == uniform) {
        at += 8 * kBlock;
        continue;
      }
    }
    const uint8_t s = blocks_[static_cast<size_t>(b)];
    if (s == kMixed) {
      if (std::memchr(bytes_.data() + at, value ^ 1, static_cast<size_t>(hi - at))) return false;
    } else if (s != value) {
      return false;
    }
    at = hi;
  }
  return true;
}

void ByteFlags::set_range(int64_t at, int64_t len, uint8_t value) {
  const int64_t end = at + len, n = static_cast<int64_t>(size_);
  while (at < end) {
    const int64_t b = at >> kShift, start = b * kBlock, stop = std::min(start + kBlock, n);
    const int64_t hi = std::min(end, stop);
    if (at == start && hi == stop) {
      // A run of whole blocks (the last block of the memory may be short): summaries only.
      const int64_t last = end == n ? (n + kBlock - 1) / kBlock : end / kBlock;
      std::memset(blocks_.data() + b, value, static_cast<size_t>(last - b));
      at = std::min(end, last * kBlock);
      continue;
    }
    uint8_t& s = blocks_[static_cast<size_t>(b)];
    if (s != value) {
      if (s != kMixed) {  // materialize the block's uniform value before changing part of it
        std::memset(bytes_.data() + start, s, static_cast<size_t>(stop - start));
        s = kMixed;
      }
      std::memset(bytes_.data() + at, value, static_cast<size_t>(hi - at));
      // Element-at-a-time writes that complete a block make it uniform again.
      if (hi == stop && !std::memchr(bytes_.data() + start, value ^ 1, static_cast<size_t>(stop - start))) s = value;
    }
    at = hi;
  }
}

int64_t ByteFlags::first_set() const {
  const int64_t n = static_cast<int64_t>(size_);
  for (int64_t b = 0; b * kBlock < n; ++b) {
    const uint8_t s = blocks_[static_cast<size_t>(b)];
    if (s == 1) return b * kBlock;
    if (s != kMixed) continue;
    const int64_t start = b * kBlock, stop = std::min(start + kBlock, n);
    for (int64_t i = start; i < stop; ++i)
      if (bytes_[static_cast<size_t>(i)]) return i;
  }
  return -1;
}

}  // namespace knit::sim
