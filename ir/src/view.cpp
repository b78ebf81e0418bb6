#include "knit/ir/view.h"

#include <algorithm>
#include <sstream>

#include "knit/ir/indirect.h"

namespace knit::ir {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::ostringstream s;
  s << '(';
  for (size_t i = 0; i < shape.size(); ++i) s << (i ? ", " : "") << shape[i];
  s << (shape.size() == 1 ? ",)" : ")");
  return s.str();
}

int normalize_dim(const View& v, int dim, int extra, const SourceLoc& loc, const char* call) {
  const int rank = static_cast<int>(v.dims.size()) + extra;
  const int d = dim < 0 ? dim + rank : dim;
  if (d < 0 || d >= rank)
    user_error(loc, "view-dim",
               std::string(call) + ": dim " + std::to_string(dim) + " is out of range for a view of rank " +
                   std::to_string(rank));
  return d;
}

// On-chip views keep the partition dim first; `call` may not touch it.
void forbid_partition_dim(const TensorDecl& t, int dim, const SourceLoc& loc, const char* call) {
  if (is_on_chip(t.buffer) && dim == 0)
    user_error(loc, "view-partition-dim",
               std::string(call) +
                   " cannot change dim 0 of an on-chip tensor (the partition dim); "
                   "data moves across partitions only through nc_transpose, matmul or dma_copy");
}

// An .indirect() view (View::gather) is only an instruction operand: its column dim has no
// stride, so no other view can be derived from it.
void forbid_column_indirect(const View& v, const SourceLoc& loc, const char* call) {
  if (v.indexes_columns())
    user_error(loc, "indirect",
               std::string(call) +
                   " cannot be applied to an .indirect() view; apply it to the tensor before .indirect(), "
                   "or to the index tile");
}

}  // namespace

std::string bracketed(const std::vector<int64_t>& values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + std::to_string(values[i]);
  return s + "]";
}

View full_view(const TensorDecl& t, int tensor_id) {
  View v;
  v.tensor = tensor_id;
  v.dtype = t.dtype;
  int64_t stride = 1;
  v.dims.resize(t.shape.size());
  for (size_t k = t.shape.size(); k-- > 0;) {
    v.dims[k] = {stride, t.shape[k]};
    stride *= t.shape[k];
  }
  return v;
}

namespace {

// Elements start, start+step, ... before end (Python slice semantics after normalization);
// step may be negative (t[::-1]) but the range must hold at least one element.
View slice_range(const View& v, int d, int64_t start, int64_t end, int64_t step, const SourceLoc& loc) {
  const int64_t size = v.dims[d].num;
  if (step == 0) user_error(loc, "view-slice", "slice step must not be 0");
  const bool ok = step > 0 ? (0 <= start && start < end && end <= size) : (-1 <= end && end < start && start < size);
  if (!ok)
    user_error(loc, "view-out-of-range",
               "slice " + std::to_string(start) + ":" + std::to_string(end) + " of dim " + std::to_string(d) +
                   " is outside its size " + std::to_string(size) + " (view shape " + shape_text(v.shape()) +
                   "); a slice needs at least one element and "
                   "nl.ds(start, size) needs start + size <= " +
                   std::to_string(size));
  View r = v;
  const int64_t count = step > 0 ? (end - start + step - 1) / step : (start - end + (-step) - 1) / (-step);
  r.offset += start * v.dims[d].step;
  r.dims[d] = {v.dims[d].step * step, count};
  return r;
}

}  // namespace

// NKI's tensor.slice(dim, start, end, step): 0 <= start < end <= size and step >= 1.
View slice(const TensorDecl& t, const View& v, int dim, int64_t start, int64_t end, int64_t step,
           const SourceLoc& loc) {
  forbid_column_indirect(v, loc, "slice");
  const int d = normalize_dim(v, dim, 0, loc, "slice");
  if (step < 1) user_error(loc, "view-slice", "slice step must be >= 1, got " + std::to_string(step));
  (void)t;
  return slice_range(v, d, start, end, step, loc);
}

View select(const TensorDecl& t, const View& v, int dim, int64_t index, const SourceLoc& loc) {
  forbid_column_indirect(v, loc, "select");
  const int d = normalize_dim(v, dim, 0, loc, "select");
  forbid_partition_dim(t, d, loc, "select");
  const int64_t size = v.dims[d].num;
  const int64_t i = index < 0 ? index + size : index;
  if (i < 0 || i >= size)
    user_error(loc, "view-out-of-range",
               "index " + std::to_string(index) + " is out of range for dim " + std::to_string(d) + " of size " +
                   std::to_string(size));
  View r = v;
  r.offset += i * v.dims[d].step;
  r.dims.erase(r.dims.begin() + d);
  return r;
}

View index(const TensorDecl& t, const View& v, std::span<const Index> key, const SourceLoc& loc) {
  forbid_column_indirect(v, loc, "subscripting");
  if (key.size() > v.dims.size())
    user_error(loc, "view-index",
               "too many indices (" + std::to_string(key.size()) + ") for a view of shape " + shape_text(v.shape()));
  const bool on_chip = is_on_chip(t.buffer);
  View r = v;
  std::vector<bool> drop(v.dims.size(), false);
  for (size_t k = 0; k < key.size(); ++k) {
    const Index& ix = key[k];
    const int64_t size = v.dims[k].num;
    if (ix.kind == Index::Kind::All) continue;
    if (ix.kind == Index::Kind::Int) {
      const int64_t i = ix.value < 0 ? ix.value + size : ix.value;
      if (i < 0 || i >= size)
        user_error(loc, "view-out-of-range",
                   "index " + std::to_string(ix.value) + " is out of range for dim " + std::to_string(k) + " of size " +
                       std::to_string(size) + " (view shape " + shape_text(v.shape()) + ")");
      r.offset += i * v.dims[k].step;
      r.dims[k].num = 1;
      drop[k] = !(on_chip && k == 0);
      continue;
    }
    const int64_t step = ix.step;
    if (step == 0) user_error(loc, "view-slice", "slice step must not be 0");
    auto norm = [&](int64_t x) { return x < 0 ? x + size : x; };
    const int64_t start = ix.start ? norm(*ix.start) : (step > 0 ? 0 : size - 1);
    const int64_t stop = ix.stop ? norm(*ix.stop) : (step > 0 ? size : -1);
    r = slice_range(r, static_cast<int>(k), start, stop, step, loc);
  }
  // Drop int-indexed dims; keep at least 2 dims on-chip (the last free dim stays, size 1) and at
  // least 1 on HBM.
  const size_t min_rank = on_chip ? 2 : 1;
  size_t kept = std::count(drop.begin(), drop.end(), false);
  for (size_t k = drop.size(); k-- > 0 && kept < min_rank;)
    if (drop[k]) {
      drop[k] = false;
      ++kept;
    }
  View out = r;
  out.dims.clear();
  for (size_t k = 0; k < r.dims.size(); ++k)
    if (!drop[k]) out.dims.push_back(r.dims[k]);
  return out;
}

View permute(const TensorDecl& t, const View& v, std::span<const int> order, const SourceLoc& loc) {
  forbid_column_indirect(v, loc, "permute");
  if (order.size() != v.dims.size())
    user_error(loc, "view-permute",
               "permute needs " + std::to_string(v.dims.size()) + " dims, got " + std::to_string(order.size()));
  std::vector<bool> seen(order.size(), false);
  View r = v;
  for (size_t k = 0; k < order.size(); ++k) {
    const int d = normalize_dim(v, order[k], 0, loc, "permute");
    if (seen[d]) user_error(loc, "view-permute", "permute order repeats dim " + std::to_string(d));
    seen[d] = true;
    r.dims[k] = v.dims[d];
  }
  if (is_on_chip(t.buffer) && !order.empty() && normalize_dim(v, order[0], 0, loc, "permute") != 0)
    forbid_partition_dim(t, 0, loc, "permute");
  return r;
}

View broadcast(const TensorDecl& t, const View& v, int dim, int64_t size, const SourceLoc& loc) {
  forbid_column_indirect(v, loc, "broadcast");
  const int d = normalize_dim(v, dim, 0, loc, "broadcast");
  forbid_partition_dim(t, d, loc, "broadcast");
  if (v.dims[d].num != 1)
    user_error(loc, "view-broadcast",
               "broadcast needs dim " + std::to_string(d) + " of size 1, it has size " + std::to_string(v.dims[d].num));
  if (size < 1) user_error(loc, "view-broadcast", "broadcast size must be >= 1");
  View r = v;
  r.dims[d] = {0, size};
  return r;
}

View expand_dim(const TensorDecl& t, const View& v, int dim, const SourceLoc& loc) {
  forbid_column_indirect(v, loc, "expand_dim");
  const int d = normalize_dim(v, dim, 1, loc, "expand_dim");
  forbid_partition_dim(t, d, loc, "expand_dim");
  View r = v;
  r.dims.insert(r.dims.begin() + d, ApDim{0, 1});
  return r;
}

View squeeze_dim(const TensorDecl& t, const View& v, int dim, const SourceLoc& loc) {
  forbid_column_indirect(v, loc, "squeeze_dim");
  const int d = normalize_dim(v, dim, 0, loc, "squeeze_dim");
  forbid_partition_dim(t, d, loc, "squeeze_dim");
  if (v.dims[d].num != 1)
    user_error(
        loc, "view-squeeze",
        "squeeze_dim needs dim " + std::to_string(d) + " of size 1, it has size " + std::to_string(v.dims[d].num));
  View r = v;
  r.dims.erase(r.dims.begin() + d);
  return r;
}

namespace {

// Re-expresses dims `in` as `shape` without moving data (numpy's no-copy reshape): dims are
// grouped so each group of old dims and new dims has the same element count, and a group of
// old dims must be one contiguous run (step[k] == step[k+1] * num[k+1]).
std::optional<Pattern> reshape_pattern(const Pattern& in, std::span<const int64_t> shape) {
  Pattern old;
  for (const ApDim& d : in)
    if (d.num != 1) old.push_back(d);
  Pattern out(shape.size());
  size_t i = 0, j = 0;
  while (j < shape.size()) {
    if (shape[j] == 1) {
      out[j] = {0, 1};
      ++j;
      continue;
    }
    if (i >= old.size()) return std::nullopt;
    const size_t i0 = i, j0 = j;
    int64_t np = old[i].num, nq = shape[j];
    ++i;
    ++j;
    while (np != nq) {
      if (np < nq) {
        if (i >= old.size()) return std::nullopt;
        np *= old[i++].num;
      } else {
        if (j >= shape.size()) return std::nullopt;
        nq *= shape[j++];
      }
    }
    for (size_t k = i0; k + 1 < i; ++k)
      if (old[k].step != old[k + 1].step * old[k + 1].num) return std::nullopt;
    int64_t step = old[i - 1].step;
    for (size_t k = j; k-- > j0;) {
      if (shape[k] == 1) {
        out[k] = {0, 1};
        continue;
      }
      out[k] = {step, shape[k]};
      step *= shape[k];
    }
  }
  if (i != old.size()) return std::nullopt;
  return out;
}

}  // namespace

View reshape(const TensorDecl& t, const View& v, std::span<const int64_t> shape, const SourceLoc& loc) {
  forbid_column_indirect(v, loc, "reshape");
  std::vector<int64_t> want(shape.begin(), shape.end());
  int64_t known = 1;
  int infer = -1;
  for (size_t k = 0; k < want.size(); ++k) {
    if (want[k] == -1) {
      if (infer >= 0) user_error(loc, "view-reshape", "reshape allows at most one -1");
      infer = static_cast<int>(k);
    } else if (want[k] < 1) {
      user_error(loc, "view-reshape", "reshape sizes must be >= 1 (or one -1)");
    } else {
      known *= want[k];
    }
  }
  if (infer >= 0) want[infer] = known ? v.num_elements() / known : 0;
  int64_t total = 1;
  for (int64_t s : want) total *= s;
  if (total != v.num_elements())
    user_error(loc, "view-reshape",
               "cannot reshape a view of shape " + shape_text(v.shape()) + " (" + std::to_string(v.num_elements()) +
                   " elements) to " + shape_text(want));
  if (is_on_chip(t.buffer) && (want.empty() || want[0] != v.dims[0].num))
    user_error(loc, "view-partition-dim",
               "reshape of an on-chip tensor must keep dim 0 (the partition dim, " + std::to_string(v.dims[0].num) +
                   "); got " + shape_text(want));
  auto pattern = reshape_pattern(v.dims, want);
  if (!pattern)
    user_error(loc, "view-reshape",
               "the view's layout cannot express shape " + shape_text(want) +
                   " without copying; copy it to a contiguous tile first");
  View r = v;
  r.dims = *pattern;
  if (is_on_chip(t.buffer)) r.dims[0] = v.dims[0];  // keep the partition step exact
  return r;
}

View reshape_dim(const TensorDecl& t, const View& v, int dim, std::span<const int64_t> shape, const SourceLoc& loc) {
  forbid_column_indirect(v, loc, "reshape_dim");
  const int d = normalize_dim(v, dim, 0, loc, "reshape_dim");
  forbid_partition_dim(t, d, loc, "reshape_dim");
  std::vector<int64_t> full = v.shape();
  full.erase(full.begin() + d);
  full.insert(full.begin() + d, shape.begin(), shape.end());
  // Resolve a -1 against this dim's size only.
  int64_t known = 1;
  int infer = -1;
  for (size_t k = 0; k < shape.size(); ++k) {
    if (shape[k] == -1) infer = static_cast<int>(k);
    else known *= shape[k];
  }
  if (infer >= 0) full[d + infer] = known ? v.dims[d].num / known : 0;
  return reshape(t, v, full, loc);
}

View flatten_dims(const TensorDecl& t, const View& v, int start_dim, int end_dim, const SourceLoc& loc) {
  forbid_column_indirect(v, loc, "flatten_dims");
  const int s = normalize_dim(v, start_dim, 0, loc, "flatten_dims");
  const int e = normalize_dim(v, end_dim, 0, loc, "flatten_dims");
  if (s > e) user_error(loc, "view-flatten", "flatten_dims needs start_dim <= end_dim");
  forbid_partition_dim(t, s, loc, "flatten_dims");
  std::vector<int64_t> full;
  int64_t merged = 1;
  for (int k = 0; k < static_cast<int>(v.dims.size()); ++k) {
    if (k < s || k > e) full.push_back(v.dims[k].num);
    else merged *= v.dims[k].num;
    if (k == e) full.push_back(merged);
  }
  return reshape(t, v, full, loc);
}

View bitcast(const TensorDecl& t, const View& v, DType dtype, const SourceLoc& loc) {
  forbid_column_indirect(v, loc, "bitcast");
  const int from = dtype_size(v.dtype), to = dtype_size(dtype);
  View r = v;
  r.dtype = dtype;
  if (from == to) return r;
  if (v.dims.empty() || v.dims.back().step != 1)
    user_error(loc, "view-bitcast", "view(dtype) needs a contiguous last dim (step 1)");
  if ((v.offset * from) % to != 0 || (v.dims.back().num * from) % to != 0)
    user_error(loc, "view-bitcast",
               "view(" + std::string(to_string(dtype)) + ") of a last dim of " + std::to_string(v.dims.back().num) +
                   " x " + std::string(to_string(v.dtype)) + " does not split into whole elements");
  r.offset = v.offset * from / to;
  for (RegTerm& term : r.dynamic) {
    if ((term.coeff * from) % to != 0)
      user_error(loc, "view-bitcast", "view(dtype): a dynamic offset is not a whole number of new elements");
    term.coeff = term.coeff * from / to;
  }
  for (size_t k = 0; k + 1 < r.dims.size(); ++k) {
    if ((r.dims[k].step * from) % to != 0)
      user_error(loc, "view-bitcast", "view(dtype): a stride is not a whole number of new elements");
    r.dims[k].step = r.dims[k].step * from / to;
  }
  r.dims.back().num = v.dims.back().num * from / to;
  (void)t;
  return r;
}

View ap(const TensorDecl& t, const View& v, const Pattern& pattern, std::optional<int64_t> offset,
        std::optional<DType> dtype, const SourceLoc& loc) {
  forbid_column_indirect(v, loc, "ap");
  if (pattern.empty()) user_error(loc, "view-ap", ".ap() needs a non-empty pattern");
  for (const ApDim& d : pattern)
    if (d.num < 1) user_error(loc, "view-ap", ".ap() counts must be >= 1");
  View r;
  r.tensor = v.tensor;
  r.dtype = dtype.value_or(t.dtype);
  r.offset = offset.value_or(v.offset);
  if (!offset) r.dynamic = v.dynamic;  // the view's own runtime offset carries over
  r.dims = pattern;
  return r;
}

int64_t view_partitions(const TensorDecl& t, const View& v) {
  return is_on_chip(t.buffer) && !v.dims.empty() ? v.dims[0].num : 1;
}

int64_t view_free_size(const TensorDecl& t, const View& v) {
  return v.num_elements() / std::max<int64_t>(1, view_partitions(t, v));
}

PartitionLayout partition_layout(const TensorDecl& t, const View& v) {
  PartitionLayout l;
  const int64_t es = dtype_size(v.dtype);
  l.partition_bytes = t.partition_elements() * dtype_size(t.dtype);
  l.first_partition = v.offset * es / l.partition_bytes;
  l.start_byte = v.offset * es % l.partition_bytes;
  l.partition_dim = !v.dims.empty() && (v.dims[0].num == 1 || v.dims[0].step * es == l.partition_bytes);
  l.lo = l.start_byte;
  l.hi = l.start_byte + es;
  for (size_t k = l.partition_dim ? 1 : 0; k < v.dims.size(); ++k) {
    const int64_t span = (v.dims[k].num - 1) * v.dims[k].step * es;
    (span < 0 ? l.lo : l.hi) += span;
  }
  return l;
}

View add_dynamic(const TensorDecl& t, const View& v, int dim, int reg, int64_t coeff, const SourceLoc& loc) {
  forbid_column_indirect(v, loc, "add_dynamic");
  if (dim < 0 || dim >= static_cast<int>(v.dims.size()))
    user_error(loc, "view-dim",
               "dim " + std::to_string(dim) + " is out of range for a " + std::to_string(v.dims.size()) + "-D view");
  if (is_on_chip(t.buffer) && dim == 0)
    user_error(loc, "dynamic-partition",
               "a register cannot index the partition dim of an " + std::string(to_string(t.buffer)) +
                   " tensor (instructions address a static partition range); index a free dim or an HBM tensor");
  if (reg < 0) user_error(loc, "register", "invalid register r" + std::to_string(reg));
  View r = v;
  r.dynamic.push_back({reg, coeff * v.dims[dim].step});
  return r;
}

View shift_dynamic(const TensorDecl& t, const View& v, int dim, int64_t amount, const SourceLoc& loc) {
  if (dim < 0 || dim >= static_cast<int>(v.dims.size()))
    user_error(loc, "view-dim",
               "dim " + std::to_string(dim) + " is out of range for a " + std::to_string(v.dims.size()) + "-D view");
  if (v.dynamic.empty()) internal_error("shift_dynamic on a static view of '" + t.name + "'");
  View r = v;
  r.offset += amount * v.dims[dim].step;
  return r;
}

View make_indirect(const TensorDecl& t, const View& v, int dim, const View& index, const SourceLoc& loc) {
  forbid_column_indirect(v, loc, "make_indirect");
  if (!is_hbm(t.buffer))
    user_error(
        loc, "indirect",
        "vector_offset indexes rows of an HBM tensor; '" + t.name + "' is in " + std::string(to_string(t.buffer)));
  if (dim < 0 || dim >= static_cast<int>(v.dims.size()))
    user_error(loc, "indirect",
               "indirect_dim " + std::to_string(dim) + " is not a dim of the " + std::to_string(v.dims.size()) +
                   "-D access pattern");
  if (v.index_view()) user_error(loc, "indirect", "the view is already indirect");
  View r = v;
  r.indirect_dim = dim;
  r.indirect = {index};
  return r;
}

View make_column_indirect(const TensorDecl& t, const View& v, const TensorDecl& index_t, const View& index,
                          std::optional<int64_t> num_elem, const SourceLoc& loc) {
  if (!v.is_static())
    user_error(loc, "indirect",
               ".indirect() on a view that is already indirect (a register offset, vector_offset or .indirect()); "
               "an indirect view cannot be indirected again");
  check_column_index(t, v, index_t, index, ".indirect()", loc, 0);
  const int64_t n = num_elem.value_or(index.num_elements());
  if (n < 1) user_error(loc, "indirect", ".indirect(): num_elem must be at least 1, got " + std::to_string(n));
  View r = v;
  r.dims = {v.dims[0], {1, n}};
  r.gather.assign(v.dims.begin() + 1, v.dims.end());
  if (r.gather.empty()) r.gather.push_back({1, 1});  // a 1-D tile: one element per partition
  r.indirect = {index};
  r.indirect_dim = -1;
  return r;
}

void check_view(const TensorDecl& t, const View& v, const std::string& what, const SourceLoc& loc) {
  if (v.indexes_columns()) {  // every column lies in the indirected view: check that view
    View base = v;
    base.indirect.clear();
    base.gather.clear();
    base.dims.resize(1);
    base.dims.insert(base.dims.end(), v.gather.begin(), v.gather.end());
    check_view(t, base, what, loc);
    return;
  }
  const int64_t storage_bytes = t.size_bytes();
  const int esize = dtype_size(v.dtype);
  // Flat index range touched by the free dims (and, off-chip, all dims).
  const size_t first_free = is_on_chip(t.buffer) ? 1 : 0;
  int64_t lo = 0, hi = 0;
  for (size_t k = first_free; k < v.dims.size(); ++k) {
    const int64_t span = v.dims[k].step * (v.dims[k].num - 1);
    (span < 0 ? lo : hi) += span;
  }
  auto oob = [&](const std::string& detail) {
    user_error(loc, "view-out-of-range",
               what + " reads or writes outside tensor '" + t.name + "' " + shape_text(t.shape) + ": " + detail);
  };
  // A dynamic or indirect view's range depends on register / index values: the interpreter
  // checks the concrete view each time the instruction runs. Its shape rules are checked here.
  const bool static_range = v.is_static();
  if (!is_on_chip(t.buffer)) {
    if (static_range && (v.offset + lo < 0 || (v.offset + hi + 1) * esize > storage_bytes))
      oob("flat elements " + std::to_string(v.offset + lo) + ".." + std::to_string(v.offset + hi) + " of " +
          std::to_string(storage_bytes / esize));
    return;
  }
  if (v.dims.empty()) user_error(loc, "view-rank", what + " must have a partition dim");
  const int64_t part_bytes = t.partition_elements() * dtype_size(t.dtype);
  if (part_bytes % esize != 0)
    user_error(loc, "view-bitcast",
               what + ": partition size is not a whole number of " + std::string(to_string(v.dtype)) + " elements");
  const int64_t per_part = part_bytes / esize;  // partition size in view elements
  const ApDim& pdim = v.dims[0];
  if (pdim.num > kMaxPartitions)
    user_error(loc, "partition-limit",
               what + " spans " + std::to_string(pdim.num) +
                   " partitions; the maximum is 128. Split the tile with nl.ds or a loop");
  if (pdim.num > 1 && pdim.step != per_part)
    user_error(loc, "view-partition-step",
               what + ": the partition dim's step is " + std::to_string(pdim.step) +
                   " but must equal the per-partition size " + std::to_string(per_part) +
                   " (views cannot move data across partitions)");
  if (!static_range) return;
  if (v.offset < 0) oob("negative offset " + std::to_string(v.offset));
  const int64_t p0 = v.offset / per_part, f0 = v.offset % per_part;
  if (p0 + pdim.num > t.partitions())
    oob("partitions " + std::to_string(p0) + ".." + std::to_string(p0 + pdim.num - 1) + " of " +
        std::to_string(t.partitions()));
  if (f0 + lo < 0 || f0 + hi >= per_part)
    oob("free elements " + std::to_string(f0 + lo) + ".." + std::to_string(f0 + hi) + " of " +
        std::to_string(per_part) + " per partition");
}

}  // namespace knit::ir
