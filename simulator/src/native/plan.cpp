#include "plan.h"

#include <algorithm>
#include <cstring>
#include <tuple>

#include "../alu.h"
#include "../exec_compute.h"
#include "knit/ir/view.h"

namespace knit::sim {

using namespace knit::ir;
using namespace knit::sim::native;

Access access_of(const Operand& o) {
  Access a{};
  a.dtype = static_cast<int32_t>(o.view->dtype);
  std::copy(o.step, o.step + kWalkDims, a.step);
  return a;
}

std::vector<std::pair<int64_t, int64_t>> simplified(const Machine::Layout& l, size_t first) {
  std::vector<std::pair<int64_t, int64_t>> dims;
  for (size_t k = first; k < l.num.size(); ++k) {
    if (l.num[k] == 1) continue;
    if (!dims.empty() && dims.back().second == l.num[k] * l.stride[k]) {
      dims.back() = {dims.back().first * l.num[k], l.stride[k]};
      continue;
    }
    dims.push_back({l.num[k], l.stride[k]});
  }
  return dims;
}

const char* common_walk(std::vector<Operand*>& ops, size_t first, int lead, std::vector<OuterDim>* outer) {
  struct Cursor {
    std::vector<std::pair<int64_t, int64_t>> dims;
    int64_t rem = 1, stride = 0;
  };
  std::vector<Cursor> cur(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    cur[i].dims = simplified(ops[i]->walked(), first);
    if (!cur[i].dims.empty()) {
      cur[i].rem = cur[i].dims.back().first;
      cur[i].stride = cur[i].dims.back().second;
      cur[i].dims.pop_back();
    }
  }
  std::vector<int64_t> extents;                        // innermost first
  std::vector<std::vector<int64_t>> steps(ops.size());  // per operand, innermost first
  while (true) {
    int64_t e = 0;
    for (const Cursor& c : cur) e = (c.rem > 1 && (e == 0 || c.rem < e)) ? c.rem : e;
    if (e == 0) break;
    for (size_t i = 0; i < cur.size(); ++i) {
      Cursor& c = cur[i];
      if (c.rem % e) return why::no_nest;
      steps[i].push_back(c.stride);
      c.stride *= e;
      c.rem /= e;
      if (c.rem == 1 && !c.dims.empty()) {
        c.rem = c.dims.back().first;
        c.stride = c.dims.back().second;
        c.dims.pop_back();
      }
    }
    extents.push_back(e);
  }
  for (const Cursor& c : cur)
    if (c.rem != 1 || !c.dims.empty()) return why::no_nest;  // element counts differ
  // Merge adjacent common dims every operand steps over contiguously.
  std::vector<int64_t> ext;
  std::vector<std::vector<int64_t>> st(ops.size());
  for (size_t d = 0; d < extents.size(); ++d) {
    bool merge = d > 0;
    for (size_t i = 0; i < ops.size() && merge; ++i) merge = steps[i][d] == st[i].back() * ext.back();
    if (merge) {
      ext.back() *= extents[d];
      continue;
    }
    ext.push_back(extents[d]);
    for (size_t i = 0; i < ops.size(); ++i) st[i].push_back(steps[i][d]);
  }
  const size_t inner = static_cast<size_t>(kWalkDims - lead);
  if (ext.size() > inner && !outer) return why::walk_dims;
  for (size_t d = inner; d < ext.size(); ++d) {
    outer->push_back({ext[d], {}});
    for (size_t i = 0; i < ops.size(); ++i) outer->back().step.push_back(st[i][d]);
  }
  ext.resize(std::min(ext.size(), inner));
  for (size_t i = 0; i < ops.size(); ++i)
    for (size_t d = 0; d < ext.size(); ++d) {
      ops[i]->n[kWalkDims - 1 - d] = ext[d];
      ops[i]->step[kWalkDims - 1 - d] = st[i][d];
    }
  return nullptr;
}

// Whether two operands' layouts may share a byte: on-chip layouts (dim 0 moving by whole
// partitions) overlap only if both their partition ranges and their in-partition byte ranges do.
std::pair<int64_t, int64_t> byte_range(const Operand& o) {
  const Machine::Layout& l = o.layout;
  int64_t lo = o.partitioned ? l.base % l.stride[0] : l.base, hi = lo;
  for (size_t d = o.partitioned ? 1 : 0; d < l.num.size(); ++d) {
    const int64_t span = (l.num[d] - 1) * l.stride[d];
    (span < 0 ? lo : hi) += span;
  }
  return {lo, hi + o.esize};
}

bool may_overlap(const Operand& x, const Operand& y) {
  struct Box {
    int64_t plo = 0, phi = 1, lo = 0, hi = 0;
  };
  auto box = [](const Operand& o) {
    Box b;
    std::tie(b.lo, b.hi) = byte_range(o);
    if (o.partitioned) {
      b.plo = o.layout.base / o.layout.stride[0];
      b.phi = b.plo + o.layout.num[0];
    }
    return b;
  };
  const Box a = box(x), b = box(y);
  return a.plo < b.phi && b.plo < a.phi && a.lo < b.hi && b.lo < a.hi;
}

// Copies an input that an output overlaps (NativeExecutor::execute) into `buffer`; returns where
// the operand's base lies in the copy. The bytes keep their offsets from the base: on chip, the
// operand's in-partition byte range of each of its partitions, the partition stride kept (the
// buffer's untouched pages cost nothing); in HBM, its byte range.
uint8_t* snapshot(ZeroedBytes& buffer, const Operand& o, const Memory& mem) {
  const Machine::Layout& l = o.layout;
  const int64_t stride = o.partitioned ? l.stride[0] : 0;
  const int64_t rows = o.partitioned ? l.num[0] : 1;
  const int64_t start = o.partitioned ? l.base - l.base % stride : 0;  // the first partition's
  const auto [lo, hi] = byte_range(o);
  const auto size = static_cast<size_t>((rows - 1) * stride + hi);
  if (buffer.size() < size) buffer.reset(size, false);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(buffer.data() + r * stride + lo, mem.bytes.data() + start + r * stride + lo, static_cast<size_t>(hi - lo));
  return buffer.data() + (l.base - start);
}

namespace {

// Calls f(offset, length) for each run of an operand's bytes: one contiguous run per innermost
// row when that dim is dense, else one per element.
template <class F>
void for_each_run(const Operand& o, F&& f) {
  const Machine::Layout& l = o.layout;
  if (l.num.empty()) return f(l.base, int64_t{o.esize});
  const size_t inner = l.num.size() - 1;
  const bool dense = l.stride[inner] == o.esize;
  std::vector<int64_t> idx(inner, 0);
  int64_t row = l.base;
  while (true) {
    if (dense) f(row, l.num[inner] * o.esize);
    else
      for (int64_t j = 0; j < l.num[inner]; ++j) f(row + j * l.stride[inner], int64_t{o.esize});
    size_t k = inner;
    for (; k-- > 0;) {
      row += l.stride[k];
      if (++idx[k] < l.num[k]) break;
      row -= l.stride[k] * l.num[k];
      idx[k] = 0;
    }
    if (k == static_cast<size_t>(-1)) return;
  }
}

}  // namespace

bool all_flags_are(const ByteFlags& flags, const Operand& o, uint8_t value) {
  bool all = true;
  for_each_run(o, [&](int64_t at, int64_t len) { all = all && flags.all(at, len, value); });
  return all;
}

void set_flags(ByteFlags& flags, const Operand& o, uint8_t value) {
  for_each_run(o, [&](int64_t at, int64_t len) { flags.set(at, len, value); });
}

std::optional<Activation> activation_of(const Instruction& inst) {
  if (const auto* op = std::get_if<Activation>(&inst.op)) return *op;
  if (const auto* op = std::get_if<ActivationReduce>(&inst.op)) return as_activation(*op);
  return std::nullopt;
}

namespace {

// An operand (on chip: `on_chip`) walked as [partitions, one free dim] in walk dims d and d + 1
// (matmul and quantize_mx operands); false if its free dims do not merge into one.
bool partitions_and_free(Operand& o, bool on_chip, int d) {
  if (!on_chip || o.layout.num.empty()) return false;
  const auto free = simplified(o.layout, 1);
  if (free.size() > 1) return false;
  o.n[d] = o.layout.num[0];
  o.step[d] = o.layout.stride[0];
  o.n[d + 1] = free.empty() ? 1 : free[0].first;
  o.step[d + 1] = free.empty() ? o.esize : free[0].second;
  return true;
}

}  // namespace

// The static part of running `inst` natively: operand layouts, the walk and the shape bytes.
// Returns why it cannot run natively (a why:: reason), or null.
const char* NativeExecutor::plan(const Instruction& inst, Plan& out) {
  if (!natively_executable(inst.opcode())) return why::no_body;
  out.inst = &inst;
  // Adds an operand; returns why its layout is not a strided walk (null: it is).
  auto add = [&](const View& v, bool written) -> const char* {
    Operand o;
    o.view = &v;
    o.esize = dtype_size(v.dtype);
    o.written = written;
    o.partitioned = is_on_chip(m_.kernel().tensor(v.tensor).buffer);
    out.ops.push_back(std::move(o));
    if (m_.layout_of(v, out.ops.back().layout)) return nullptr;
    return v.index_view() ? why::indirect : why::spills;
  };
  const Kernel& k = m_.kernel();
  auto on_chip = [&](const View& v) { return is_on_chip(k.tensor(v.tensor).buffer); };
  // `a_axes` (a transpose): walk operand a with its dims permuted, dim k being a's dim a_axes[k];
  // its elements then pair with dst's in row-major order, across partitions. `affine` (iota,
  // affine_select): a pseudo-operand whose "layout" is the affine index's per-partition and
  // pattern steps; walked with the others, its steps become the shape's affine_step.
  auto map = [&](MapShape s, const View& dst, const View* a, const View* b, const IntList* a_axes = nullptr,
                 const Operand* affine = nullptr) -> const char* {
    out.body = "knit_map_body";
    for (const auto& [v, written] : {std::pair{&dst, true}, {a, false}, {b, false}})
      if (const char* why = v ? add(*v, written) : nullptr) return why;
    if (a_axes) {
      const Machine::Layout& l = out.ops[1].layout;
      if (a_axes->size() != l.num.size()) return why::transpose_rank;
      Machine::Layout permuted{l.base, {}, {}};
      for (int64_t axis : *a_axes) {
        permuted.num.push_back(l.num[static_cast<size_t>(axis)]);
        permuted.stride.push_back(l.stride[static_cast<size_t>(axis)]);
      }
      out.ops[1].walk_order = std::move(permuted);
    }
    Operand index;  // the walk of `affine`
    std::vector<Operand*> ops;
    for (Operand& o : out.ops) ops.push_back(&o);
    if (affine) ops.push_back(&(index = *affine));
    // Walk dim 0 is dst's partition dim when every operand has it (per-partition columns and row
    // folds follow it); a copy or an fp32 tensor_tensor (dma_compute's adds, in HBM too) may
    // instead walk all its operands' dims alike, across partitions.
    const int64_t partitions = dst.dims.empty() ? 1 : dst.dims[0].num;
    bool partitioned = !a_axes && on_chip(dst) && (!a || on_chip(*a)) && (!b || on_chip(*b));
    for (const Operand* o : ops) partitioned = partitioned && !o->layout.num.empty() && o->layout.num[0] == partitions;
    if (partitioned) {
      out.partitions = partitions;
      for (Operand* o : ops) {
        o->n[0] = out.partitions;
        o->step[0] = o->layout.stride[0];
      }
    } else if (s.kind != MapKind::copy && s.kind != MapKind::tensor_tensor) {
      return why::partitions;  // per-partition columns, row folds and carries follow dst's partitions
    }
    // Kinds without an affine index or a gather source may walk more dims than the body: the
    // executor walks the outer ones, and a row fold or a scan's carry goes on from call to call
    // (MapShape::fold_continues).
    const bool outer_ok = !affine && s.kind != MapKind::iota &&
                          s.kind != MapKind::affine_select && s.kind != MapKind::range_select &&
                          s.kind != MapKind::gather;
    if (const char* why = common_walk(ops, partitioned ? 1 : 0, partitioned ? 1 : 0, outer_ok ? &out.outer : nullptr))
      return why;
    std::copy(out.ops[0].n, out.ops[0].n + kWalkDims, s.walk.n);
    s.dst = access_of(out.ops[0]);
    if (a) s.a = access_of(out.ops[1]);
    if (b) s.b = access_of(out.ops[a ? 2 : 1]);
    if (affine) std::copy(index.step, index.step + kWalkDims, s.affine_step);
    out.shape = bytes_of(s);
    return nullptr;
  };
  // The affine index of iota / affine_select (exec_select.cpp's free_affine_values): partition p
  // steps by channel_multiplier, free element j by the pattern dims j decomposes into.
  auto affine_index = [&](const View& dst, const Pattern& pattern, int64_t channel_multiplier) {
    Operand o;
    o.layout.num.push_back(dst.dims.empty() ? 1 : dst.dims[0].num);
    o.layout.stride.push_back(channel_multiplier);
    for (const ApDim& d : pattern) {
      o.layout.num.push_back(d.num);
      o.layout.stride.push_back(d.step);
    }
    return o;
  };
  // bn_stats / bn_aggr / max8: each operand walks its own free dims (up to three after merging).
  // find_index8's `vals`, a third operand, reads its first 8 free elements (one strided run).
  auto row = [&](RowKind kind, const View& dst, const View& data, const View* vals = nullptr) -> const char* {
    out.body = "knit_row_body";
    for (const auto& [v, written] : {std::pair{&dst, true}, {&data, false}, {vals, false}})
      if (const char* why = v ? add(*v, written) : nullptr) return why;
    if (!on_chip(dst) || !on_chip(data) || (vals && !on_chip(*vals))) return why::free_dims;
    out.partitions = dst.dims.empty() ? 1 : dst.dims[0].num;
    for (Operand& o : out.ops) {
      if (o.layout.num.empty() || o.layout.num[0] != out.partitions) return why::partitions;
      o.n[0] = out.partitions;
      o.step[0] = o.layout.stride[0];
      const auto free = simplified(o.layout, 1);
      if (free.size() > kWalkDims - 1) return why::walk_dims;
      for (size_t d = 0; d < free.size(); ++d) {
        o.n[kWalkDims - free.size() + d] = free[d].first;
        o.step[kWalkDims - free.size() + d] = free[d].second;
      }
    }
    RowShape r{};
    std::copy(out.ops[0].n, out.ops[0].n + kWalkDims, r.dst_walk.n);
    std::copy(out.ops[1].n, out.ops[1].n + kWalkDims, r.data_walk.n);
    r.dst = access_of(out.ops[0]);
    r.data = access_of(out.ops[1]);
    r.kind = kind;
    if (vals) {
      const Operand& v = out.ops[2];
      if (v.n[1] * v.n[2] > 1 || v.n[3] < 8) return why::free_dims;  // not one run of at least 8
      r.vals = access_of(v);
    }
    out.scratch_floats = out.ops[1].n[1] * out.ops[1].n[2] * out.ops[1].n[3];
    out.shape = bytes_of(r);
    return nullptr;
  };
  MapShape s{};
  s.fold_op = -1;
  s.op1 = static_cast<int32_t>(AluOp::bypass);
  if (const auto* op = std::get_if<TensorTensor>(&inst.op)) {
    s.kind = is_bitvec_op(op->op) ? MapKind::tensor_tensor_bits
             : exact_int_path(m_, *op) ? MapKind::tensor_tensor_int
                                       : MapKind::tensor_tensor;
    s.op0 = static_cast<int32_t>(op->op);
    return map(s, op->dst, &op->data1, &op->data2);
  }
  // The two ALU stages of tensor_scalar, scalar_tensor_tensor and tensor_tensor_scan.
  auto two_stages = [&](MapKind kind, const auto& op) {
    s.kind = kind;
    s.op0 = static_cast<int32_t>(op.op0);
    s.op1 = static_cast<int32_t>(op.op1);
    s.reverse0 = op.reverse0;
    s.reverse1 = op.reverse1;
  };
  if (const auto* op = std::get_if<TensorScalar>(&inst.op)) {
    two_stages(is_bitvec_op(op->op0) ? MapKind::tensor_scalar_bits : MapKind::tensor_scalar, *op);
    return map(s, op->dst, &op->data, nullptr);
  }
  if (const auto* op = std::get_if<ScalarTensorTensor>(&inst.op)) {
    two_stages(MapKind::scalar_tensor_tensor, *op);
    return map(s, op->dst, &op->data, &op->operand1);
  }
  if (const auto* op = std::get_if<Reciprocal>(&inst.op)) {
    s.kind = MapKind::tensor_scalar;  // apply(reciprocal, x, .) = alu(reciprocal, x, 0), as exec
    s.op0 = static_cast<int32_t>(AluOp::reciprocal);
    return map(s, op->dst, &op->data, nullptr);
  }
  if (const std::optional<Activation> act = activation_of(inst)) {
    s.kind = MapKind::activation;
    s.op0 = static_cast<int32_t>(act->op);
    s.has_bias = !act->bias.is_none();
    s.fold_op = activation_folds(*act) ? static_cast<int32_t>(act->reduce_op) : -1;
    s.alpha = static_cast<float>(act->alpha);
    // The plan keeps pointers to the views: pass the instruction's own, not the copy's.
    if (const auto* op = std::get_if<Activation>(&inst.op)) return map(s, op->dst, &op->data, nullptr);
    const auto& op = std::get<ActivationReduce>(inst.op);
    return map(s, op.dst, &op.data, nullptr);
  }
  if (const auto* op = std::get_if<TensorScalarReduce>(&inst.op)) {
    s.kind = MapKind::tensor_scalar_fold;
    s.op0 = static_cast<int32_t>(op->op0);
    s.reverse0 = op->reverse0;
    s.fold_op = static_cast<int32_t>(op->reduce_op);
    return map(s, op->dst, &op->data, nullptr);
  }
  if (const auto* op = std::get_if<TensorCopy>(&inst.op)) {
    s.kind = MapKind::copy;
    return map(s, op->dst, &op->src, nullptr);
  }
  if (const auto* op = std::get_if<DmaCopy>(&inst.op)) {
    s.kind = MapKind::copy;
    return map(s, op->dst, &op->src, nullptr);
  }
  if (const auto* op = std::get_if<NcTranspose>(&inst.op)) {
    // dst[f, p] = data[p, f], f running over data's free dims (exec_data.cpp).
    s.kind = MapKind::copy;
    IntList axes;
    for (size_t k = 1; k < op->data.dims.size(); ++k) axes.push_back(static_cast<int64_t>(k));
    axes.push_back(0);
    return map(s, op->dst, &op->data, nullptr, &axes);
  }
  if (const auto* op = std::get_if<DmaTranspose>(&inst.op)) {
    s.kind = MapKind::copy;
    const IntList axes = op->resolved_axes();
    return map(s, op->dst, &op->src, nullptr, &axes);
  }
  if (const auto* op = std::get_if<Memset>(&inst.op)) {
    s.kind = MapKind::fill;
    s.fill_bits = memset_bits(op->dst.dtype, op->value);
    return map(s, op->dst, nullptr, nullptr);
  }
  if (const auto* op = std::get_if<TensorCopyPredicated>(&inst.op)) {
    // The predicate is operand a (data[1]), a tile source operand b (data[2]).
    if (!op->src.is_tile() && !op->src.is_imm()) return why::operand_kind;
    s.kind = op->src.is_tile() ? MapKind::copy_predicated : MapKind::fill_predicated;
    s.reverse0 = op->reverse_pred;
    s.imm = static_cast<float>(op->src.imm);
    return map(s, op->dst, &op->predicate, op->src.is_tile() ? &op->src.tile : nullptr);
  }
  if (const auto* op = std::get_if<TensorTensorScan>(&inst.op)) {
    two_stages(MapKind::scan, *op);  // initial is column 0
    return map(s, op->dst, &op->data0, &op->data1);
  }
  if (const auto* op = std::get_if<SelectReduce>(&inst.op)) {
    s.kind = MapKind::select_reduce;  // predicate a, on_true b; on_false is column 0
    s.reverse0 = op->reverse_pred;
    s.fold_op = static_cast<int32_t>(op->reduce_op);
    return map(s, op->dst, &op->predicate, &op->on_true);
  }
  if (const auto* op = std::get_if<RangeSelect>(&inst.op)) {
    s.kind = MapKind::range_select;  // bounds are columns 0 and 1
    s.op0 = static_cast<int32_t>(op->comp_op0);
    s.op1 = static_cast<int32_t>(op->comp_op1);
    s.alpha = static_cast<float>(op->range_start);
    s.imm = static_cast<float>(op->on_false_value);
    s.fold_op = static_cast<int32_t>(op->reduce_op);
    // The index is dst's flattened free element number: the affine pseudo-operand of a dense
    // row-major array of dst's free shape, not moving with the partition.
    Operand index;
    int64_t stride = 1;
    for (size_t k = op->dst.dims.size(); k-- > 1;) {
      index.layout.num.insert(index.layout.num.begin(), op->dst.dims[k].num);
      index.layout.stride.insert(index.layout.stride.begin(), stride);
      stride *= op->dst.dims[k].num;
    }
    index.layout.num.insert(index.layout.num.begin(), op->dst.dims.empty() ? 1 : op->dst.dims[0].num);
    index.layout.stride.insert(index.layout.stride.begin(), 0);
    return map(s, op->dst, &op->on_true_tile, nullptr, nullptr, &index);
  }
  if (const auto* op = std::get_if<Iota>(&inst.op)) {
    s.kind = MapKind::iota;
    s.affine_offset = op->offset;
    const Operand index = affine_index(op->dst, op->pattern, op->channel_multiplier);
    return map(s, op->dst, nullptr, nullptr, nullptr, &index);
  }
  if (const auto* op = std::get_if<AffineSelect>(&inst.op)) {
    s.kind = MapKind::affine_select;
    s.op0 = static_cast<int32_t>(op->cmp_op);
    s.imm = static_cast<float>(op->on_false_value);
    s.affine_offset = op->offset;
    const Operand index = affine_index(op->dst, op->pattern, op->channel_multiplier);
    return map(s, op->dst, &op->on_true_tile, nullptr, nullptr, &index);
  }
  // The source of the gather kind (after map() planned dst and the walked operands): added as
  // the last operand but not walked, each index addressing its partition's free elements (one
  // strided run), so only its partition step and free element step go into `s` (map()'s shape).
  auto gather_source = [&](const View& source) -> const char* {
    if (const char* why = add(source, false)) return why;
    const Operand& o = out.ops.back();
    if (!on_chip(source) || o.layout.num.empty() || o.layout.num[0] != out.partitions) return why::partitions;
    const auto free = simplified(o.layout, 1);
    if (free.size() > 1) return why::free_dims;
    std::memcpy(&s, out.shape.data(), sizeof s);
    s.b = Access{static_cast<int32_t>(source.dtype), 0, {o.layout.stride[0], 0, 0, 0}};
    s.gather_step = free.empty() ? o.esize : free[0].second;
    return nullptr;
  };
  if (const auto* op = std::get_if<NcNGather>(&inst.op)) {
    // dst and indices walk in lockstep; data is the gather source.
    if (op->data.dtype != op->dst.dtype) return why::gather_dtypes;
    s.kind = MapKind::gather;
    if (const char* why = map(s, op->dst, &op->indices, nullptr)) return why;
    if (const char* why = gather_source(op->data)) return why;
    out.shape = bytes_of(s);
    return nullptr;
  }
  if (const auto* op = std::get_if<LocalGather>(&inst.op)) {
    // The gather kind too, its indices expanded by the executor into a dense int32 [P, J] array in
    // dst's element order (NativeExecutor::execute): dst (p, k E + e) reads src_buffer element
    // idx[k] + e of partition p, idx the index list of p's group of 16 partitions.
    if (op->src_buffer.dtype != op->dst.dtype) return why::gather_dtypes;
    s.kind = MapKind::gather;
    if (const char* why = map(s, op->dst, nullptr, nullptr)) return why;
    if (const char* why = add(op->index, false)) return why;  // data[1], for the checks
    if (const char* why = gather_source(op->src_buffer)) return why;
    if (out.partitions % 16) return why::partitions;
    const Operand& dst = out.ops[0];
    const int64_t row = dst.n[1] * dst.n[2] * dst.n[3];
    const int64_t index_row = op->index.num_elements() / std::max<int64_t>(1, out.partitions);
    const int64_t valid = op->num_valid_indices < 0 ? 16 * index_row : op->num_valid_indices;
    if (row != valid * op->num_elem_per_idx) return why::gather_width;
    s.a = Access{static_cast<int32_t>(DType::int32), 0, {4 * row, 4 * dst.n[2] * dst.n[3], 4 * dst.n[3], 4}};
    out.shape = bytes_of(s);
    return nullptr;
  }
  if (const auto* op = std::get_if<BnStats>(&inst.op)) return row(RowKind::bn_stats, op->dst, op->data);
  if (const auto* op = std::get_if<BnAggr>(&inst.op)) return row(RowKind::bn_aggr, op->dst, op->data);
  if (const auto* op = std::get_if<Max8>(&inst.op)) return row(RowKind::max8, op->dst, op->src);
  if (const auto* op = std::get_if<NcFindIndex8>(&inst.op)) return row(RowKind::find_index8, op->dst, op->data, &op->vals);
  if (const auto* op = std::get_if<TensorReduce>(&inst.op)) {
    out.body = "knit_reduce_body";
    for (const auto& [v, written] : {std::pair{&op->dst, true}, {&op->data, false}})
      if (const char* why = add(*v, written)) return why;
    Operand& dst = out.ops[0];
    Operand& data = out.ops[1];
    // The reduced trailing dims must form one strided run per dst element.
    const size_t kept = op->data.dims.size() - op->axis.size();
    Machine::Layout inner{0, {data.layout.num.begin() + kept, data.layout.num.end()},
                          {data.layout.stride.begin() + kept, data.layout.stride.end()}};
    const auto group = simplified(inner, 0);
    if (group.size() > 2) return why::reduced_run;
    if (!on_chip(op->dst) || !on_chip(op->data)) return why::free_dims;
    Operand kept_data = data;  // the dims the walk keeps; the group is the body's inner loop
    kept_data.layout.num.resize(kept);
    kept_data.layout.stride.resize(kept);
    out.partitions = op->data.dims[0].num;
    for (Operand* o : {&dst, &kept_data}) {
      if (o->layout.num.empty() || o->layout.num[0] != out.partitions) return why::partitions;
      o->n[0] = out.partitions;
      o->step[0] = o->layout.stride[0];
    }
    std::vector<Operand*> ops{&dst, &kept_data};
    if (const char* why = common_walk(ops, 1, 1)) return why;
    std::copy(kept_data.n, kept_data.n + kWalkDims, data.n);
    std::copy(kept_data.step, kept_data.step + kWalkDims, data.step);
    ReduceShape r{};
    std::copy(dst.n, dst.n + kWalkDims, r.walk.n);
    r.dst = access_of(dst);
    r.data = access_of(data);
    r.runs = group.size() == 2 ? group[0].first : 1;
    r.run_step = group.size() == 2 ? group[0].second : 0;
    r.group = group.empty() ? 1 : group.back().first;
    r.group_step = group.empty() ? 0 : group.back().second;
    r.op = static_cast<int32_t>(op->op);
    r.bits = is_bitvec_op(op->op);
    r.negate = op->negate;
    out.shape = bytes_of(r);
    return nullptr;
  }
  if (const auto* op = std::get_if<TensorPartitionReduce>(&inst.op)) {
    // dst[0, j] = fold over p of data[p, j] (exec_select.cpp): the reduce body with the free dims
    // as the walk and each column across the partitions as a group.
    out.body = "knit_reduce_body";
    for (const auto& [v, written] : {std::pair{&op->dst, true}, {&op->data, false}})
      if (const char* why = add(*v, written)) return why;
    if (!on_chip(op->dst) || !on_chip(op->data)) return why::free_dims;
    Operand& dst = out.ops[0];
    Operand& data = out.ops[1];
    if (data.layout.num.empty() || dst.layout.num.empty() || dst.layout.num[0] != 1) return why::partitions;
    std::vector<Operand*> ops{&dst, &data};
    if (const char* why = common_walk(ops, 1, 0)) return why;
    ReduceShape r{};
    std::copy(dst.n, dst.n + kWalkDims, r.walk.n);
    r.dst = access_of(dst);
    r.data = access_of(data);
    r.group = data.layout.num[0];
    r.group_step = data.layout.stride[0];
    r.runs = 1;
    r.op = static_cast<int32_t>(op->op);
    r.bits = is_bitvec_op(op->op);
    r.average = op->op == AluOp::average;
    out.shape = bytes_of(r);
    return nullptr;
  }
  if (const auto* op = std::get_if<QuantizeMx>(&inst.op)) {
    out.body = "knit_quantize_mx_body";
    for (const auto& [v, written] : {std::pair{&op->dst, true}, {&op->dst_scale, true}, {&op->src, false}})
      if (const char* why = add(*v, written)) return why;
    for (Operand& o : out.ops)
      if (!partitions_and_free(o, on_chip(*o.view), 0)) return why::free_dims;
    QuantizeMxShape q{};
    q.groups = out.ops[1].n[0];
    q.words = out.ops[0].n[1];
    if (out.ops[0].n[0] != 8 * q.groups || out.ops[2].n[0] != 8 * q.groups || out.ops[1].n[1] != q.words ||
        out.ops[2].n[1] != 4 * q.words)
      return why::partitions;
    q.dst = access_of(out.ops[0]);
    q.scale = access_of(out.ops[1]);
    q.src = access_of(out.ops[2]);
    out.shape = bytes_of(q);
    return nullptr;
  }
  if (const auto* op = std::get_if<NcMatmul>(&inst.op)) {
    // double_row: each partition holds two contraction rows, [P, 2, M] (exec_data.cpp).
    const int64_t k_rows = op->perf_mode == MatmulPerfMode::double_row ? 2 : 1;
    out.body = "knit_matmul_body";
    for (const auto& [v, written] : {std::pair{&op->dst, true}, {&op->stationary, false}, {&op->moving, false}})
      if (const char* why = add(*v, written)) return why;
    int64_t extent[3][2];
    for (int i = 0; i < 3; ++i) {
      Operand& o = out.ops[i];
      if (!partitions_and_free(o, on_chip(*o.view), 2)) return why::free_dims;
      extent[i][0] = o.n[2];
      extent[i][1] = o.n[3];
    }
    if (extent[1][1] % k_rows || extent[2][1] % k_rows) return why::perf_mode;
    MatmulShape mm{};
    mm.k_rows = static_cast<int32_t>(k_rows);
    mm.K = extent[1][0] * k_rows;
    mm.M = extent[1][1] / k_rows;
    mm.N = extent[2][1] / k_rows;
    if (extent[2][0] * k_rows != mm.K || extent[0][0] != mm.M || extent[0][1] != mm.N) return why::partitions;
    mm.dst = access_of(out.ops[0]);
    mm.stationary = access_of(out.ops[1]);
    mm.moving = access_of(out.ops[2]);
    for (Access* a : {&mm.dst, &mm.stationary, &mm.moving}) {
      a->step[0] = a->step[2];
      a->step[1] = a->step[3];
      a->step[2] = a->step[3] = 0;
    }
    mm.stationary.step[2] = mm.M * mm.stationary.step[1];  // row j of a partition: j M elements on
    mm.moving.step[2] = mm.N * mm.moving.step[1];
    mm.skip_zero_moving = op->is_transpose;
    out.scratch_floats = matmul_scratch_floats(mm.K, mm.M, mm.N);
    out.shape = bytes_of(mm);
    return nullptr;
  }
  return why::no_body;
}

}  // namespace knit::sim
