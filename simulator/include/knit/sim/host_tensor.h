// A tensor in host memory: what a caller passes to and gets back from a kernel run.
// Bytes are stored in the dtype's own encoding (bf16 as 2 bytes, fp8 as 1 byte, ...).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "knit/ir/numerics.h"

namespace knit::sim {

struct HostTensor {
  ir::DType dtype = ir::DType::float32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
  // An input may instead borrow its bytes from the caller (a NumPy array the Python binding holds
  // for the run), which saves copying every argument once more. A run that writes the argument
  // back stores the new bytes in `bytes`.
  std::span<const uint8_t> borrowed;
  // A kernel output handed over without a copy (InterpretOptions::outputs_without_copy): the
  // simulator's own block of `block_size` bytes, which goes back to its memory pool when the last
  // owner lets go; `bytes` is then empty.
  std::shared_ptr<uint8_t> block;
  size_t block_size = 0;

  // The bytes a run reads: the borrowed span if there is one, else `bytes`.
  std::span<const uint8_t> input_bytes() const { return borrowed.data() ? borrowed : std::span<const uint8_t>(bytes); }
  // An output's bytes: the handed-over block if there is one, else `bytes`.
  std::span<const uint8_t> output_bytes() const {
    return block ? std::span<const uint8_t>(block.get(), block_size) : std::span<const uint8_t>(bytes);
  }

  int64_t num_elements() const;
  int64_t size_bytes() const { return num_elements() * ir::dtype_size(dtype); }

  // An all-zero tensor.
  static HostTensor zeros(ir::DType dtype, std::vector<int64_t> shape);
  // Values rounded to dtype with Knit's rounding model (ir/numerics.h).
  static HostTensor from_floats(ir::DType dtype, std::vector<int64_t> shape, std::span<const float> values);

  float get(int64_t i) const { return ir::decode(dtype, bytes.data() + i * ir::dtype_size(dtype)); }
  void set(int64_t i, float v) { ir::encode(dtype, v, bytes.data() + i * ir::dtype_size(dtype)); }
  std::vector<float> to_floats() const;
};

}  // namespace knit::sim
