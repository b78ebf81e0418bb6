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
  static constexpr int64_t kShift = 6, kBlock = int64_t{1} << kShift;

  // n flags, all 0; n = 0: nothing is tracked.
  void reset(size_t n) {
    size_ = n;
    blocks_.reset((n + kBlock - 1) / kBlock);
    bytes_.reset(n, /*zero=*/false, ZeroedBytes::Use::sparse);
  }
  size_t size() const { return size_; }

  uint8_t get(int64_t at) const {
    const uint8_t s = blocks_[static_cast<size_t>(at >> kShift)];
    return s == kMixed ? bytes_[static_cast<size_t>(at)] : s;
  }

  // Whether flags [at, at + len) all equal value (0 or 1).
  bool all(int64_t at, int64_t len, uint8_t value) const {
    if (one_element(at, len)) {
      const uint8_t s = blocks_[static_cast<size_t>(at >> kShift)];
      return s == kMixed ? small_all(at, len, value) : s == value;
    }
    return all_range(at, len, value);
  }

  // Calls f(at, len) for every run of flags equal to 0, in order (runs may be split at block
  // boundaries). Whole blocks of 1s are skipped a summary byte at a time.
  template <class F>
  void for_each_zero_run(F&& f) const {
    const int64_t n = static_cast<int64_t>(size_);
    for (int64_t b = 0; b * kBlock < n; ++b) {
      const int64_t start = b * kBlock, stop = std::min(start + kBlock, n);
      const uint8_t s = blocks_[static_cast<size_t>(b)];
      if (s == 0) f(start, stop - start);
      if (s != kMixed) continue;
      for (int64_t i = start; i < stop; ++i)
        if (bytes_[static_cast<size_t>(i)] == 0) f(i, int64_t{1});
    }
  }

  // The index of the first flag equal to 1, or -1 when none is.
  int64_t first_set() const;

  // Sets flags [at, at + len) to value (0 or 1).
  void set(int64_t at, int64_t len, uint8_t value) {
    if (one_element(at, len)) {
      const uint8_t s = blocks_[static_cast<size_t>(at >> kShift)];
      if (s == value) return;
      if (s == kMixed && (at + len) % kBlock != 0) return small_fill(at, len, value);
    }
    set_range(at, len, value);
  }

 private:
  static constexpr uint8_t kMixed = 2;

  // One element's flags inside one block: the interpreter's case, served without the loop.
  static bool one_element(int64_t at, int64_t len) { return len <= 8 && (at >> kShift) == ((at + len - 1) >> kShift); }

  // The general cases, block by block (byte_flags.cpp).
  bool all_range(int64_t at, int64_t len, uint8_t value) const;
  void set_range(int64_t at, int64_t len, uint8_t value);

  // An element's 1, 2 or 4 flags in one load or store (8 bytes: no Knit dtype, but handled).
  bool small_all(int64_t at, int64_t len, uint8_t value) const {
    const uint8_t* p = bytes_.data() + at;
    const uint32_t ones = value ? 0x01010101u : 0;
    if (len == 4) {
      uint32_t w;
      std::memcpy(&w, p, 4);
      return w == ones;
    }
    if (len == 2) {
      uint16_t w;
      std::memcpy(&w, p, 2);
      return w == static_cast<uint16_t>(ones);
    }
    for (int64_t i = 0; i < len; ++i)
      if (p[i] != value) return false;
    return true;
  }
  void small_fill(int64_t at, int64_t len, uint8_t value) {
    uint8_t* p = bytes_.data() + at;
    const uint32_t ones = value ? 0x01010101u : 0;
    if (len == 4) std::memcpy(p, &ones, 4);
    else if (len == 2) std::memcpy(p, &ones, 2);
    else
      for (int64_t i = 0; i < len; ++i) p[i] = value;
  }

  ZeroedBytes blocks_;  // per block: 0, 1 or kMixed
  ZeroedBytes bytes_;   // per flag, meaningful only in kMixed blocks
  size_t size_ = 0;
};

}  // namespace knit::sim
