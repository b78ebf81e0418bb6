// View algebra: every way a kernel can look at a tensor (indexing, slicing, permuting, reshaping,
// broadcasting, reinterpreting, raw access patterns) produces a View (an access pattern, see
// ir.h). The rules are NKI's (the NKI Access Patterns guide, NkiTensor in nki.language); both
// front ends call these functions, so the rules live here once. Violations are user errors at `loc`.
#pragma once

#include <optional>
#include <span>

#include "knit/ir/ir.h"

namespace knit::ir {

// "[a, b, ...]": a shape or a rank list in messages.
std::string bracketed(const std::vector<int64_t>& values);

// The whole tensor, row-major.
View full_view(const TensorDecl& t, int tensor_id);

// One subscript of t[...]: an integer, or a slice (Python semantics; nl.ds(start, size) is
// the slice start:start+size). Out-of-range bounds are errors (no clamping), as in NKI.
struct Index {
  enum class Kind : uint8_t { Int, Slice, All } kind = Kind::All;
  int64_t value = 0;                   // Int
  std::optional<int64_t> start, stop;  // Slice
  int64_t step = 1;                    // Slice
  static Index at(int64_t i) { return {Kind::Int, i, {}, {}, 1}; }
  static Index range(std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step = 1) {
    return {Kind::Slice, 0, start, stop, step};
  }
  static Index ds(int64_t start, int64_t size) { return range(start, start + size); }
  static Index all() { return {}; }
};

// t[i0, i1, ...] with NKI's rules: missing trailing subscripts mean ':'. On-chip, an int on the
// partition dim keeps it (size 1) and results stay >= 2-D; on HBM an int drops the dim.
View index(const TensorDecl& t, const View& v, std::span<const Index> key, const SourceLoc& loc);

View slice(const TensorDecl& t, const View& v, int dim, int64_t start, int64_t end, int64_t step, const SourceLoc& loc);
View select(const TensorDecl& t, const View& v, int dim, int64_t index, const SourceLoc& loc);
View permute(const TensorDecl& t, const View& v, std::span<const int> order, const SourceLoc& loc);
View broadcast(const TensorDecl& t, const View& v, int dim, int64_t size, const SourceLoc& loc);
View expand_dim(const TensorDecl& t, const View& v, int dim, const SourceLoc& loc);
View squeeze_dim(const TensorDecl& t, const View& v, int dim, const SourceLoc& loc);
// Reshape without moving data; fails when the layout cannot express the new shape.
View reshape(const TensorDecl& t, const View& v, std::span<const int64_t> shape, const SourceLoc& loc);
View reshape_dim(const TensorDecl& t, const View& v, int dim, std::span<const int64_t> shape, const SourceLoc& loc);
View flatten_dims(const TensorDecl& t, const View& v, int start_dim, int end_dim, const SourceLoc& loc);
// Reinterpret the bytes as another dtype; the last dim (contiguous) is rescaled by the size ratio.
View bitcast(const TensorDecl& t, const View& v, DType dtype, const SourceLoc& loc);
// Raw access pattern over the tensor's storage (ignores v's pattern); offset nullopt keeps v's.
View ap(const TensorDecl& t, const View& v, const Pattern& pattern, std::optional<int64_t> offset,
        std::optional<DType> dtype, const SourceLoc& loc);

// Adds a runtime term to the view's offset: the index along `dim` moves by coeff * r[reg]
// (t[nl.ds(i * 128, 128)] with a register i). Dynamic partition offsets of on-chip tensors are
// rejected: instructions address a static partition range.
View add_dynamic(const TensorDecl& t, const View& v, int dim, int reg, int64_t coeff, const SourceLoc& loc);
// Moves a view with runtime terms by `amount` indices along `dim` (the constant part of a
// register index such as t[i - 1]): no bounds check here, the concrete view is checked when the
// instruction runs.
View shift_dynamic(const TensorDecl& t, const View& v, int dim, int64_t amount, const SourceLoc& loc);
// Makes dim `dim` of an HBM view indirect: its i-th index becomes the i-th element of `index`
// (NKI's .ap(vector_offset=index, indirect_dim=dim)).
View make_indirect(const TensorDecl& t, const View& v, int dim, const View& index, const SourceLoc& loc);
// NKI's v.indirect(index, num_elem) on an SBUF/PSUM view `v` of P partitions: a (P, num_elem)
// view whose columns are gathered from / scattered to free offsets read from `index`, an SBUF
// (P, K) tile of uint16, uint32 or int32 (ir.h, View::gather; the per-instruction rules are the
// verifier's, knit/ir/indirect.h). num_elem defaults to the index's element count.
View make_column_indirect(const TensorDecl& t, const View& v, const TensorDecl& index_t, const View& index,
                          std::optional<int64_t> num_elem, const SourceLoc& loc);

// Structural checks of a view against its tensor: in bounds, and on-chip a legal partition
// pattern that stays inside each partition. `what` names the operand in messages.
void check_view(const TensorDecl& t, const View& v, const std::string& what, const SourceLoc& loc);

// Elements per partition of a view used as an instruction operand (on-chip: product of the
// free dims; HBM: all elements), and its partition count (on-chip: dims[0].num; HBM: 1).
int64_t view_partitions(const TensorDecl& t, const View& v);
int64_t view_free_size(const TensorDecl& t, const View& v);

// How a view of an on-chip tensor lies in the tensor's partitions (its static part: register
// terms and indirection are ignored). It starts at partition `first_partition`, byte
// `start_byte` of that partition; dims[0] is its partition dim when it steps by a whole
// partition (or has one element); the other dims cover bytes [lo, hi) of each partition, gaps of
// a strided view included. `inside()` is false when they would leave the partition.
struct PartitionLayout {
  int64_t partition_bytes = 0;
  int64_t first_partition = 0, start_byte = 0;
  bool partition_dim = false;
  int64_t lo = 0, hi = 0;
  bool inside() const { return lo >= 0 && hi <= partition_bytes; }
};
PartitionLayout partition_layout(const TensorDecl& t, const View& v);

}  // namespace knit::ir
