// The Knit tile IR.
//
// What the IR means (the one place to read it; docs/architecture.md expands on it):
//
//  Memory. A kernel owns tensors, each in one buffer: `hbm`/`shared_hbm` (device memory, linear,
//  row-major, any rank), `sbuf` (state buffer) or `psum` (partial-sum buffer). Parameters are HBM
//  tensors supplied by the caller; outputs are tensors the kernel returns (shared_hbm).
//  On-chip (sbuf/psum) tensors have dim 0 = partition dim (<= 128); the remaining dims are the
//  per-partition free layout, row-major. A fresh tensor's contents are undefined: executors fill
//  them with NaN (floats) / 4 (ints) and track which bytes were ever written.
//
//  Views. Instructions never name a tensor directly; they read and write views. A view is an
//  access pattern over the tensor's flat storage, exactly NKI's `.ap()` model:
//      element (i0, ..., in) lives at flat index  offset + sum_k i_k * dims[k].step
//  with dims outermost first and the view's shape = the dims' nums. Flat indices count elements
//  of the view's dtype (a view may reinterpret the bytes as another dtype). On-chip, flat index
//  i * dtype_size is byte b of partition b / partition_bytes; the partition dim of an on-chip
//  view is dims[0] and its step must be the per-partition element count (views cannot move data
//  across partitions). Every slice / select / permute / reshape / broadcast lowers to a view.
//
//  Instructions. One IR op per ISA instruction (ops.h), operands as views plus enum attributes,
//  each carrying the source location of the user statement that issued it. Instructions execute
//  in program order; engines compute in fp32 and round on every write (numerics.h); matmul
//  accumulates in fp32 PSUM. Compute operands are matched on (partition count, elements per
//  partition): free dims are flattened row-major, so free shapes may differ.
//
//  Undefined: reading never-written memory (reported), accessing outside a tensor (rejected by
//  the verifier when static, and never performed by an executor).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "knit/ir/error.h"
#include "knit/ir/types.h"

namespace knit::ir {

constexpr int64_t kMaxPartitions = 128;

// One dimension of an access pattern: `num` elements `step` elements apart.
struct ApDim {
  int64_t step = 0;
  int64_t num = 1;
  bool operator==(const ApDim&) const = default;
};
using Pattern = std::vector<ApDim>;

struct TensorDecl {
  std::string name;          // user-facing name (may repeat; the id is the identity)
  Buffer buffer = Buffer::sbuf;
  DType dtype = DType::float32;
  std::vector<int64_t> shape;
  bool is_param = false;
  std::optional<std::array<int64_t, 2>> address;  // (partition, byte offset) pin, on-chip only
  SourceLoc loc;

  int64_t num_elements() const;
  // On-chip: dim 0. HBM: 1 (HBM has no partitions; flat storage).
  int64_t partitions() const;
  // Elements per partition (on-chip) or all elements (HBM).
  int64_t partition_elements() const;
  int64_t size_bytes() const { return num_elements() * dtype_size(dtype); }
  bool operator==(const TensorDecl&) const = default;
};

struct View {
  int tensor = -1;
  DType dtype = DType::float32;
  int64_t offset = 0;
  Pattern dims;

  bool valid() const { return tensor >= 0; }
  std::vector<int64_t> shape() const;
  int64_t num_elements() const;
  bool operator==(const View&) const = default;
};

// An operand that is either absent, an immediate (fp32 compile-time scalar), or a tile view
// (typically [P, 1], broadcast along the free dim).
struct Operand {
  enum class Kind : uint8_t { None, Imm, Tile };
  Kind kind = Kind::None;
  double imm = 0;
  View tile;

  static Operand none() { return {}; }
  static Operand immediate(double v) { return {Kind::Imm, v, {}}; }
  static Operand of(View v) { return {Kind::Tile, 0, std::move(v)}; }
  bool is_none() const { return kind == Kind::None; }
  bool is_imm() const { return kind == Kind::Imm; }
  bool is_tile() const { return kind == Kind::Tile; }
  bool operator==(const Operand&) const = default;
};

using IntList = std::vector<int64_t>;

}  // namespace knit::ir

#include "knit/ir/ops.h"

namespace knit::ir {

struct Kernel {
  std::string name;
  Target target = Target::trn2;
  std::vector<TensorDecl> tensors;  // indexed by tensor id
  std::vector<int> params;          // tensor ids, in call order
  std::vector<int> outputs;         // tensor ids, in return order
  std::vector<Instruction> body;

  const TensorDecl& tensor(int id) const;
  const TensorDecl& tensor_of(const View& v) const { return tensor(v.tensor); }
  bool operator==(const Kernel&) const = default;
};

}  // namespace knit::ir
