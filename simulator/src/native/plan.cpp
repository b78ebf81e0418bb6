#include "plan.h"

#include <algorithm>
#include <cstring>
#include <tuple>

#include "../alu.h"
#include "../exec_compute.h"
#include "knit/ir/op_traits.h"
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
  std::vector<int64_t> extents;                         // innermost first
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
    std::memcpy(buffer.data() + r * stride + lo, mem.bytes.data() + start + r * stride + lo,
                static_cast<size_t>(hi - lo));
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

void mark_written(Memory& mem, const Operand& o, bool by_matmul) {
  if (mem.tracks_init()) set_flags(mem.init, o, 1);
  if (mem.tracks_matmul()) set_flags(mem.mm_written, o, by_matmul ? 1 : 0);
  if (mem.poison.size()) set_flags(mem.poison, o, 0);
}

std::optional<Activation> activation_of(const Instruction& inst) {
  if (const auto* op = std::get_if<Activation>(&inst.op)) return *op;
  if (const auto* op = std::get_if<ActivationReduce>(&inst.op)) return as_activation(*op);
  return std::nullopt;
}

// ---- Planner: the operand machinery every op's planner shares ----------------------------------

Planner::Planner(Machine& m, const Instruction& inst, NativeExecutor::Plan& out) : m(m), out(out) { out.inst = &inst; }

bool Planner::on_chip(const View& v) const { return is_on_chip(m.kernel().tensor(v.tensor).buffer); }

MapShape Planner::map_shape() {
  MapShape s{};
  s.fold_op = -1;
  s.op1 = static_cast<int32_t>(AluOp::bypass);
  return s;
}

const char* Planner::add(const View& v, bool written) {
  Operand o;
  o.view = &v;
  o.esize = dtype_size(v.dtype);
  o.written = written;
  o.partitioned = on_chip(v);
  out.ops.push_back(std::move(o));
  if (m.layout_of(v, out.ops.back().layout)) return nullptr;
  return v.index_view() ? why::indirect : why::spills;
}

const char* Planner::map(MapShape s, const View& dst, const View* a, const View* b, const IntList* a_axes,
                         const Operand* affine) {
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
  // instead walk all its operands' dims alike, across partitions. An input in HBM whose first
  // dim has as many rows (a forwarded copy's source, forward_note) walks its rows alongside;
  // a copy from HBM keeps walking across partitions (its rows move whole, copy_rows).
  const int64_t partitions = dst.dims.empty() ? 1 : dst.dims[0].num;
  const bool inputs_on_chip = (!a || on_chip(*a)) && (!b || on_chip(*b));
  bool partitioned = !a_axes && on_chip(dst) && (inputs_on_chip || s.kind != MapKind::copy);
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
  const bool outer_ok = !affine && s.kind != MapKind::iota && s.kind != MapKind::affine_select &&
                        s.kind != MapKind::range_select && s.kind != MapKind::gather;
  if (const char* why = common_walk(ops, partitioned ? 1 : 0, partitioned ? 1 : 0, outer_ok ? &out.outer : nullptr))
    return why;
  std::copy(out.ops[0].n, out.ops[0].n + kWalkDims, s.walk.n);
  s.dst = access_of(out.ops[0]);
  if (a) s.a = access_of(out.ops[1]);
  if (b) s.b = access_of(out.ops[a ? 2 : 1]);
  if (affine) std::copy(index.step, index.step + kWalkDims, s.affine_step);
  out.shape = bytes_of(s);
  return nullptr;
}

Operand Planner::affine_index(const View& dst, const Pattern& pattern, int64_t channel_multiplier) {
  Operand o;
  o.layout.num.push_back(dst.dims.empty() ? 1 : dst.dims[0].num);
  o.layout.stride.push_back(channel_multiplier);
  for (const ApDim& d : pattern) {
    o.layout.num.push_back(d.num);
    o.layout.stride.push_back(d.step);
  }
  return o;
}

const char* Planner::row(RowKind kind, const View& dst, const View& data, const View* vals, bool data_written) {
  out.body = "knit_row_body";
  for (const auto& [v, written] : {std::pair{&dst, true}, {&data, data_written}, {vals, false}})
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
    if (kind != RowKind::topk && (v.n[1] * v.n[2] > 1 || v.n[3] < 8)) return why::free_dims;  // not one run of 8+
    r.vals = access_of(v);
  }
  out.scratch_floats = out.ops[1].n[1] * out.ops[1].n[2] * out.ops[1].n[3] *
                       (kind == RowKind::bn_stats ? kMomentRows : 1);
  out.shape = bytes_of(r);
  return nullptr;
}

const char* Planner::gather_source(MapShape& s, const View& source) {
  if (const char* why = add(source, false)) return why;
  const Operand& o = out.ops.back();
  if (!on_chip(source) || o.layout.num.empty() || o.layout.num[0] != out.partitions) return why::partitions;
  const auto free = simplified(o.layout, 1);
  if (free.size() > 1) return why::free_dims;
  std::memcpy(&s, out.shape.data(), sizeof s);
  s.b = Access{static_cast<int32_t>(source.dtype), 0, {o.layout.stride[0], 0, 0, 0}};
  s.gather_step = free.empty() ? o.esize : free[0].second;
  return nullptr;
}

// ---- the dispatch ------------------------------------------------------------------------------

// The instructions run() sends through their own paths before planning (matmul_mx, dma_compute's
// stages, run_shuffle): no single planned body.
const char* plan_op(Planner&, const NcMatmulMx&) { return why::no_body; }
const char* plan_op(Planner&, const DmaCompute&) { return why::no_body; }
const char* plan_op(Planner&, const NcStreamShuffle&) { return why::no_body; }

// The static part of running `inst` natively: operand layouts, the walk and the shape bytes.
// Returns why it cannot run natively (a why:: reason), or null. Instructions that move no tensor
// data have no body; every other op's planner is declared in plan.h, so a missing one does not link.
const char* NativeExecutor::plan(const Instruction& inst, Plan& out) {
  return std::visit(
      [&](const auto& op) -> const char* {
        using Op = std::decay_t<decltype(op)>;
        if constexpr (std::is_same_v<Op, std::monostate>) {
          return why::no_body;
        } else if constexpr (!moves_tensor_data(opcode_of<Op>())) {
          return why::no_body;
        } else {
          Planner p(m_, inst, out);
          return plan_op(p, op);
        }
      },
      inst.op);
}

}  // namespace knit::sim
