// knit::nl — the C++ mirror of nki.language: dtypes, buffers, tile sizes, tensors and views.
// Header-only; every call records into the current frontend::Builder with the caller's source
// location (std::source_location), so errors point at the kernel's own line.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <source_location>
#include <string>
#include <vector>

#include "knit/control.h"
#include "knit/frontend/builder.h"
#include "knit/ir/view.h"

namespace knit::nl {

using ir::DType;
#define KNIT_X(id, text, bytes, kind) inline constexpr DType id = DType::id;
KNIT_DTYPES(KNIT_X)
#undef KNIT_X

inline constexpr ir::Buffer sbuf = ir::Buffer::sbuf;
inline constexpr ir::Buffer psum = ir::Buffer::psum;
inline constexpr ir::Buffer hbm = ir::Buffer::hbm;
inline constexpr ir::Buffer private_hbm = ir::Buffer::hbm;
inline constexpr ir::Buffer shared_hbm = ir::Buffer::shared_hbm;

// nl.tile_size: hardware constants as plain integers (defined in knit/ir/ir.h).
namespace tile_size = ir::tile_size;

// An operator usable as an ALU op (tensor_tensor, tensor_scalar, reductions) and/or an
// activation function, like NKI's nl.* function objects (nl.exp, nl.add, nl.square ...).
struct Op {
  int alu = -1;  // ir::AluOp, or -1
  int act = -1;  // ir::ActFunc, or -1
  const char* name = "";
};

namespace detail {
// The activation function named like ALU operator `alu` (nl::square is both), or -1.
constexpr int act_named_like(std::string_view alu) {
  constexpr std::string_view names[] = {
#define KNIT_X(id, set, kind) #id,
      KNIT_ACT_FUNCS(KNIT_X)
#undef KNIT_X
  };
  for (size_t i = 0; i < std::size(names); ++i)
    if (names[i] == alu) return static_cast<int>(i);
  return -1;
}
}  // namespace detail

// nl::add, nl::exp, ...: every ALU operator, then every activation function without an ALU
// operator of its name.
#define KNIT_X(id, cls, red) inline constexpr Op id{static_cast<int>(ir::AluOp::id), detail::act_named_like(#id), #id};
KNIT_ALU_OPS(KNIT_X)
#undef KNIT_X
#define KNIT_NL_ACT_act(id) inline constexpr Op id{-1, static_cast<int>(ir::ActFunc::id), #id};
#define KNIT_NL_ACT_alu(id)
#define KNIT_X(id, set, kind) KNIT_NL_ACT_##kind(id)
KNIT_ACT_FUNCS(KNIT_X)
#undef KNIT_X
#undef KNIT_NL_ACT_alu
#undef KNIT_NL_ACT_act

inline ir::AluOp alu_op(const Op& op, const SourceLoc& loc) {
  if (op.alu < 0)
    user_error(loc, "alu-op", std::string("nl::") + op.name + " is an activation function, not an ALU operator");
  return static_cast<ir::AluOp>(op.alu);
}
inline ir::ActFunc act_func(const Op& op, const SourceLoc& loc) {
  if (op.act < 0) user_error(loc, "activation-op", std::string("nl::") + op.name + " is not an activation function");
  return static_cast<ir::ActFunc>(op.act);
}

// Subscripts: t(i, nl::ds(k * 128, 128), nl::all, nl::slice(0, 64, 2)). A reg start (or a reg
// subscript) moves the view at run time: its register terms become dynamic offset terms.
struct ds_t {
  reg start;
  int64_t size;
};
inline ds_t ds(reg start, int64_t size) { return {std::move(start), size}; }
struct all_t {};
inline constexpr all_t all{};
struct slice_t {
  std::optional<int64_t> start, stop;
  int64_t step = 1;
};
inline slice_t slice(std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step = 1) {
  return {start, stop, step};
}

// One subscript: its static part and the register terms of its start. The source location is
// captured where the subscript is written.
struct Index {
  ir::Index index;
  std::vector<ir::RegTerm> dynamic;
  SourceLoc loc;
  Index(int64_t i, std::source_location l = std::source_location::current())
      : index(ir::Index::at(i)), loc(loc_of(l)) {}
  Index(int i, std::source_location l = std::source_location::current()) : index(ir::Index::at(i)), loc(loc_of(l)) {}
  Index(const reg& i, std::source_location l = std::source_location::current())
      : index(ir::Index::at(i.constant())), dynamic(i.terms()), loc(loc_of(l)) {}
  Index(const ds_t& d, std::source_location l = std::source_location::current())
      : index(ir::Index::ds(d.start.constant(), d.size)), dynamic(d.start.terms()), loc(loc_of(l)) {}
  Index(all_t, std::source_location l = std::source_location::current()) : index(ir::Index::all()), loc(loc_of(l)) {}
  Index(slice_t s, std::source_location l = std::source_location::current())
      : index(ir::Index::range(s.start, s.stop, s.step)), loc(loc_of(l)) {}
};

struct ApOptions;

// A tensor handle: a view of one tensor of the kernel being traced. Copying is free; every view
// method returns a new handle on the same storage.
class tensor {
 public:
  tensor() = default;
  tensor(int id, ir::View view) : id_(id), view_(std::move(view)) {}

  int id() const { return id_; }
  const ir::View& view() const { return view_; }
  std::vector<int64_t> shape() const { return view_.shape(); }
  int64_t shape(int dim, std::source_location l = std::source_location::current()) const {
    const int d = dim < 0 ? dim + ndim() : dim;
    if (d < 0 || d >= ndim())
      user_error(loc_of(l), "shape-dim",
                 "shape(" + std::to_string(dim) + ") of a " + std::to_string(ndim()) + "-D tensor; dimensions are 0.." +
                     std::to_string(ndim() - 1) + " (or -1..-" + std::to_string(ndim()) + " from the end)");
    return view_.shape()[static_cast<size_t>(d)];
  }
  int ndim() const { return static_cast<int>(view_.dims.size()); }
  int64_t size() const { return view_.num_elements(); }
  DType dtype() const { return view_.dtype; }
  ir::Buffer buffer() const { return decl().buffer; }
  const std::string& name() const { return decl().name; }

  // Subscripts convert to Index at the call site, so each knows the kernel line it came from.
  tensor operator()(Index a) const { return subscript({a}); }
  tensor operator()(Index a, Index b) const { return subscript({a, b}); }
  tensor operator()(Index a, Index b, Index c) const { return subscript({a, b, c}); }
  tensor operator()(Index a, Index b, Index c, Index d) const { return subscript({a, b, c, d}); }
  tensor operator()(Index a, Index b, Index c, Index d, Index e) const { return subscript({a, b, c, d, e}); }
  tensor slice(int dim, int64_t start, int64_t end, int64_t step = 1,
               std::source_location l = std::source_location::current()) const {
    return with(ir::slice(decl(), view_, dim, start, end, step, loc_of(l)));
  }
  // Drops dim `dim` at `index`; a reg index moves the view at run time.
  tensor select(int dim, const reg& index, std::source_location l = std::source_location::current()) const {
    const SourceLoc loc = loc_of(l);
    return with(ir::select(decl(), moved(view_, dim, index.terms(), loc), dim, index.constant(), loc));
  }
  tensor permute(std::vector<int> order, std::source_location l = std::source_location::current()) const {
    return with(ir::permute(decl(), view_, order, loc_of(l)));
  }
  tensor broadcast(int dim, int64_t size, std::source_location l = std::source_location::current()) const {
    return with(ir::broadcast(decl(), view_, dim, size, loc_of(l)));
  }
  tensor expand_dim(int dim, std::source_location l = std::source_location::current()) const {
    return with(ir::expand_dim(decl(), view_, dim, loc_of(l)));
  }
  tensor squeeze_dim(int dim, std::source_location l = std::source_location::current()) const {
    return with(ir::squeeze_dim(decl(), view_, dim, loc_of(l)));
  }
  tensor reshape(std::vector<int64_t> shape, std::source_location l = std::source_location::current()) const {
    return with(ir::reshape(decl(), view_, shape, loc_of(l)));
  }
  tensor reshape_dim(int dim, std::vector<int64_t> shape,
                     std::source_location l = std::source_location::current()) const {
    return with(ir::reshape_dim(decl(), view_, dim, shape, loc_of(l)));
  }
  tensor flatten_dims(int start_dim, int end_dim, std::source_location l = std::source_location::current()) const {
    return with(ir::flatten_dims(decl(), view_, start_dim, end_dim, loc_of(l)));
  }
  tensor view_as(DType dtype, std::source_location l = std::source_location::current()) const {
    return with(ir::bitcast(decl(), view_, dtype, loc_of(l)));
  }
  // Raw access pattern over the tensor's storage: t.ap({{512, 128}, {1, 64}}, offset).
  tensor ap(std::vector<ir::ApDim> pattern, std::optional<int64_t> offset = std::nullopt,
            std::optional<DType> dtype = std::nullopt, std::source_location l = std::source_location::current()) const {
    return with(ir::ap(decl(), view_, pattern, offset, dtype, loc_of(l)));
  }
  // The same with NKI's runtime offsets (ApOptions, below):
  //   table.ap({{f, n}, {1, f}}, 0, {.vector_offset = idx})        gathers rows idx[0], idx[1], ...
  //   a.ap({{f, 4}, {1, f}}, 0, {.scalar_offset = isa::scalar_load(s)})   rows s .. s+3
  tensor ap(std::vector<ir::ApDim> pattern, std::optional<int64_t> offset, const ApOptions& options,
            std::source_location l = std::source_location::current()) const;
  // NC-v4 compute indirection (NKI's t.indirect(index, num_elem)): a (P, num_elem) view of this
  // SBUF/PSUM tensor whose column i of partition p is its column at free offset
  // index[g*G + i % G, i / G] (g = p / G; G = 16, or 32 on the Tensor Engine); a gather as an
  // input, a scatter as dst (docs/language.md, "Indirection").
  tensor indirect(const tensor& index, std::optional<int64_t> num_elem = std::nullopt,
                  std::source_location l = std::source_location::current()) const {
    return with(ir::make_column_indirect(decl(), view_, index.decl(), index.view_, num_elem, loc_of(l)));
  }
  bool is_indirect() const { return view_.index_view() != nullptr; }

 private:
  const ir::TensorDecl& decl() const { return frontend::Builder::current({}).tensor(id_); }
  tensor with(ir::View v) const { return tensor(id_, std::move(v)); }
  // v with register terms added to the index along `dim`.
  ir::View moved(ir::View v, int dim, const std::vector<ir::RegTerm>& terms, const SourceLoc& loc) const {
    for (const ir::RegTerm& t : terms) v = ir::add_dynamic(decl(), v, dim, t.reg, t.coeff, loc);
    return v;
  }
  // Register terms apply before indexing, while subscript k still names view dim k.
  tensor subscript(std::initializer_list<Index> subs) const {
    std::vector<ir::Index> key;
    ir::View v = view_;
    int dim = 0;
    for (const Index& s : subs) {
      key.push_back(s.index);
      v = moved(std::move(v), dim++, s.dynamic, s.loc);
    }
    return with(ir::index(decl(), v, key, subs.begin()->loc));
  }
  int id_ = -1;
  ir::View view_;
};

// The runtime parts of tensor::ap (NKI's .ap(scalar_offset=, vector_offset=, indirect_dim=)).
struct ApOptions {
  std::optional<reg> scalar_offset;     // moves the start along pattern dim indirect_dim (a tensor
                                        // value: isa::scalar_load(t))
  std::optional<tensor> vector_offset;  // int32/uint32 SBUF indices: dim indirect_dim's i-th index
                                        // becomes vector_offset's i-th element (DMA gather/scatter)
  int indirect_dim = 0;
  std::optional<DType> dtype;
};

inline tensor tensor::ap(std::vector<ir::ApDim> pattern, std::optional<int64_t> offset, const ApOptions& o,
                         std::source_location l) const {
  const SourceLoc loc = loc_of(l);
  const int dim = o.indirect_dim;
  if (o.scalar_offset) {
    if (dim < 0 || dim >= static_cast<int>(pattern.size()))
      user_error(loc, "view-ap",
                 "indirect_dim " + std::to_string(dim) + " is not a dim of the " + std::to_string(pattern.size()) +
                     "-D pattern");
    // The known part of the offset goes into the static offset, so ir::ap bounds-checks it.
    if (o.scalar_offset->constant() != 0)
      offset = offset.value_or(view_.offset) + o.scalar_offset->constant() * pattern[dim].step;
  }
  ir::View v = ir::ap(decl(), view_, pattern, offset, o.dtype, loc);
  if (o.scalar_offset) v = moved(std::move(v), dim, o.scalar_offset->terms(), loc);
  if (o.vector_offset) v = ir::make_indirect(decl(), v, dim, o.vector_offset->view(), loc);
  return with(std::move(v));
}

// nl.ndarray(shape, dtype, buffer=sbuf, name='', address=None): an uninitialized tensor.
inline tensor ndarray(std::vector<int64_t> shape, DType dtype, ir::Buffer buffer = sbuf, std::string name = "",
                      std::optional<std::array<int64_t, 2>> address = std::nullopt,
                      std::source_location l = std::source_location::current()) {
  frontend::Builder& b = frontend::Builder::current(loc_of(l));
  if (name.empty()) name = std::string("t").append(std::to_string(b.kernel().tensors.size()));
  const int id = b.add_tensor(std::move(name), buffer, dtype, std::move(shape), address, loc_of(l));
  return tensor(id, ir::full_view(b.tensor(id), id));
}

}  // namespace knit::nl
