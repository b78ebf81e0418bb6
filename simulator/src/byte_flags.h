// Per-byte flags of a simulated memory ("ever written", "last written by a matmul"), kept in two
// levels so that whole-tile writes and checks touch one byte per kBlock instead of one per byte.
//
// A block of kBlock flags whose values are all equal is just that value in blocks_ (0 or 1);
// only a block with mixed values (kMixed) keeps its flags in bytes_. bytes_ of a uniform block
// is stale and never read, so it needs no clearing: a fresh ByteFlags clears n / kBlock bytes,
// not n. The interpreter's element-at-a-time writes turn a block mixed on their first write and
// uniform again when a write ends at the block's end with every flag equal.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "zeroed_bytes.h"

namespace knit::sim {

class ByteFlags {
 public:
  static constexpr int64_t kBlock = 64;

  // n flags, all 0; n = 0: nothing is tracked.
  void reset(size_t n) {
    size_ = n;
    blocks_.reset((n + kBlock - 1) / kBlock);
    bytes_.reset(n, /*zero=*/false);
  }
  size_t size() const { return size_; }

  uint8_t get(int64_t at) const {
    const uint8_t s = blocks_[static_cast<size_t>(at / kBlock)];
    return s == kMixed ? bytes_[static_cast<size_t>(at)] : s;
  }

  // Whether flags [at, at + len) all equal value (0 or 1).
  bool all(int64_t at, int64_t len, uint8_t value) const {
    const int64_t end = at + len;
    while (at < end) {
      const int64_t b = at / kBlock, hi = std::min(end, (b + 1) * kBlock);
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

  // Sets flags [at, at + len) to value (0 or 1).
  void set(int64_t at, int64_t len, uint8_t value) {
    const int64_t end = at + len, n = static_cast<int64_t>(size_);
    while (at < end) {
      const int64_t b = at / kBlock, start = b * kBlock, stop = std::min(start + kBlock, n);
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
        if (hi == stop && all_bytes(start, stop, value)) s = value;
      }
      at = hi;
    }
  }

 private:
  static constexpr uint8_t kMixed = 2;

  bool all_bytes(int64_t start, int64_t stop, uint8_t value) const {
    return !std::memchr(bytes_.data() + start, value ^ 1, static_cast<size_t>(stop - start));
  }

  ZeroedBytes blocks_;  // per block: 0, 1 or kMixed
  ZeroedBytes bytes_;   // per flag, meaningful only in kMixed blocks
  size_t size_ = 0;
};

}  // namespace knit::sim
