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
//  Registers and control flow. A kernel may use 32-bit integer registers r0, r1, ... (NKI's
//  VirtualRegister / NkiScalar): register_* instructions move values between registers,
//  immediates and 1-element tensors. Structured blocks `loop` / `while` / `if` ... [`else`] ...
//  `end` run their body on the device a runtime number of times; a block's body is traced once.
//  A view may carry dynamic offset terms (flat offset += coeff * r[reg], coeff in view elements),
//  so `t[nl.ds(i * 128, 128)]` inside a loop is one instruction whose address moves; and a DMA
//  view may be indirect (NKI's `.ap(vector_offset=idx, indirect_dim=d)`): the index along dim d
//  is replaced by the d-th element of an integer index view, for gathers and scatters. On NC-v4 a
//  compute operand may be an `.indirect()` view: each column of each partition is read from (or
//  written to) a free-dim offset taken from an index tile (View::gather). Views with any of
//  these are bounds-checked when executed, against the concrete register/index values.
//
//  Undefined: reading never-written memory (reported), accessing outside a tensor (rejected by
//  the verifier when static, at run time when dynamic, and never performed by an executor).
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

// The tile limits NKI exposes as nl.tile_size, the same on every generation. The one copy:
// nl::tile_size (C++), nl.tile_size (Python, through knit._core) and the verifier read it.
namespace tile_size {
inline constexpr int64_t pmax = kMaxPartitions;
inline constexpr int64_t psum_fmax = 512;
inline constexpr int64_t psum_bank_fmax = 512;
inline constexpr int64_t psum_bank_fmax_bytes = 2048;
inline constexpr int64_t psum_num_banks = 8;
inline constexpr int64_t gemm_stationary_fmax = 128;
inline constexpr int64_t gemm_moving_fmax = 512;
inline constexpr int64_t bn_stats_fmax = 512;
}  // namespace tile_size

// One dimension of an access pattern: `num` elements `step` elements apart.
struct ApDim {
  int64_t step = 0;
  int64_t num = 1;
  bool operator==(const ApDim&) const = default;
};
using Pattern = std::vector<ApDim>;

struct TensorDecl {
  std::string name;  // user-facing name (may repeat; the id is the identity)
  Buffer buffer = Buffer::sbuf;
  DType dtype = DType::float32;
  std::vector<int64_t> shape;
  bool is_param = false;
  std::optional<std::array<int64_t, 2>> address;  // (partition, byte offset) pin, on-chip only
  SourceLoc loc;
  // Set on the SBUF (or HBM) tensor codegen's spilling made (codegen/spill.h): the tensor whose
  // value it holds while that tensor's bytes serve others.
  std::optional<int> spill_of;

  int64_t num_elements() const;
  // On-chip: dim 0. HBM: 1 (HBM has no partitions; flat storage).
  int64_t partitions() const;
  // Elements per partition (on-chip) or all elements (HBM).
  int64_t partition_elements() const;
  int64_t size_bytes() const { return num_elements() * dtype_size(dtype); }
  bool operator==(const TensorDecl&) const = default;
};

// One runtime term of a view's offset: coeff * (value of register `reg`), in view elements.
struct RegTerm {
  int reg = 0;
  int64_t coeff = 1;
  bool operator==(const RegTerm&) const = default;
};

struct View {
  int tensor = -1;
  DType dtype = DType::float32;
  int64_t offset = 0;
  Pattern dims;
  std::vector<RegTerm> dynamic;  // runtime offset terms (empty: a static view)
  // Indirect access, of one of two kinds; indirect[0] is the integer index view (a vector holds
  // it because View cannot contain a View).
  //  * Rows (DMA, `.ap(vector_offset=...)`): indirect_dim >= 0; dims[indirect_dim]'s i-th index
  //    is the i-th element of the index view.
  //  * Columns (compute, NC-v4 `.indirect(index, num_elem)`): indirect_dim == -1 and `gather` is
  //    non-empty. The view is dims = [partition dim, {1, num_elem}]; `gather` holds the free dims
  //    of the view that was indirected. Column i of partition p is the element of that view at
  //    free offset index[g*G + i % G, i / G] (g = p / G, G = indirect_group(opcode)): an element
  //    index into its flattened free dims, mapped through `gather` (indirect.h).
  int indirect_dim = -1;
  std::vector<View> indirect;
  Pattern gather;

  bool valid() const { return tensor >= 0; }
  bool is_static() const { return dynamic.empty() && indirect.empty(); }
  const View* index_view() const { return indirect.empty() ? nullptr : &indirect[0]; }
  bool indexes_rows() const { return !indirect.empty() && indirect_dim >= 0; }
  bool indexes_columns() const { return !indirect.empty() && indirect_dim < 0; }
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
using ViewList = std::vector<View>;

// A register operand (r<id>); id -1 = absent.
struct Reg {
  int id = -1;
  bool valid() const { return id >= 0; }
  bool operator==(const Reg&) const = default;
};

// A 32-bit integer operand: an immediate or a register's value (loop bounds, register moves).
struct IntValue {
  int reg = -1;  // >= 0: the register's value; else `imm`
  int64_t imm = 0;
  static IntValue of(int64_t v) { return {-1, v}; }
  static IntValue of_reg(int r) { return {r, 0}; }
  bool is_reg() const { return reg >= 0; }
  bool operator==(const IntValue&) const = default;
};

}  // namespace knit::ir

#include "knit/ir/ops.h"

namespace knit::ir {

struct Kernel {
  // Out of line (ir.cpp): each copies or destroys the body's std::variant of every instruction
  // kind, code a C++ kernel file would otherwise compile for itself (see frontend::append_op).
  Kernel();
  Kernel(const Kernel&);
  Kernel(Kernel&&) noexcept;
  Kernel& operator=(const Kernel&);
  Kernel& operator=(Kernel&&) noexcept;
  ~Kernel();

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
