// A byte array, zero-filled unless asked otherwise, whose storage is pooled between runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

namespace knit::sim {

// A zero-filled byte array. Freed blocks go to a small process-wide pool and come back cleared
// by memset: far cheaper than fresh pages, whose first touch faults (runs of the same kernel
// allocate the same sizes again and again). Large data blocks sit on huge pages (zeroed_bytes.cpp).
class ZeroedBytes {
 public:
  // What the block holds, for the pool: data (read and written whole), or sparse (mostly never
  // touched, like ByteFlags' per-flag bytes), pooled apart (zeroed_bytes.cpp).
  enum class Use : uint8_t { data, sparse };
  ZeroedBytes() = default;
  ZeroedBytes(const ZeroedBytes&) = delete;
  ZeroedBytes& operator=(const ZeroedBytes&) = delete;
  ZeroedBytes(ZeroedBytes&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)),
        size_(std::exchange(o.size_, 0)),
        borrowed_(std::exchange(o.borrowed_, false)),
        use_(o.use_) {}
  ZeroedBytes& operator=(ZeroedBytes&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      borrowed_ = std::exchange(o.borrowed_, false);
      use_ = o.use_;
    }
    return *this;
  }
  ~ZeroedBytes() { release(); }
  // n bytes, zeroed unless `zero` is false (the caller overwrites them all).
  void reset(size_t n, bool zero = true, Use use = Use::data);
  // The caller's n bytes, read in place and never written nor freed here: an argument no
  // instruction writes (Machine checks that statically), so it need not be copied.
  void borrow(const uint8_t* data, size_t n);
  // Hands the bytes over to shared owners (a kernel output returned without a copy): the block
  // goes back to the pool when the last owner lets go. Empty afterwards; not for borrowed bytes.
  std::shared_ptr<uint8_t> share();
  bool borrowed() const { return borrowed_; }
  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  uint8_t& operator[](size_t i) { return data_[i]; }
  uint8_t operator[](size_t i) const { return data_[i]; }
  size_t size() const { return size_; }

 private:
  void release();
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool borrowed_ = false;
  Use use_ = Use::data;
};

}  // namespace knit::sim
