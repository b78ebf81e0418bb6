#include "executor.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>

#include "../alu.h"
#include "../exec_compute.h"
#include "../machine.h"
#include "../matmul.h"
#include "knit/ir/view.h"
#include "knit/jit/specializer.h"
#include "knit/sim/native.h"
#include "shapes.h"
#include "workers.h"

// The body library, LLVM bitcode embedded by the build (native/library.S).
extern "C" const char knit_native_library[];
extern "C" const char knit_native_library_end[];

namespace knit::sim {

using namespace knit::ir;
using namespace knit::sim::native;

codegen::Specializer& native_specializer() {
  static codegen::Specializer specializer(
      std::string_view(knit_native_library, static_cast<size_t>(knit_native_library_end - knit_native_library)));
  return specializer;
}

NativeCacheStats native_cache_stats() {
  const codegen::Specializer& s = native_specializer();
  return {s.modules_compiled(), s.modules_from_cache(), s.cache_entries_rejected(), s.cache_directory()};
}

bool natively_executable(Opcode op) {
  switch (op) {
    case Opcode::tensor_tensor:
    case Opcode::tensor_scalar:
    case Opcode::scalar_tensor_tensor:
    case Opcode::reciprocal:
    case Opcode::activation:
    case Opcode::activation_reduce:
    case Opcode::tensor_scalar_reduce:
    case Opcode::tensor_copy:
    case Opcode::dma_copy:
    case Opcode::nc_transpose:
    case Opcode::dma_transpose:
    case Opcode::tensor_reduce:
    case Opcode::memset:
    case Opcode::tensor_copy_predicated:
    case Opcode::select_reduce:
    case Opcode::tensor_tensor_scan:
    case Opcode::tensor_partition_reduce:
    case Opcode::range_select:
    case Opcode::iota:
    case Opcode::affine_select:
    case Opcode::bn_stats:
    case Opcode::bn_aggr:
    case Opcode::max8:
    case Opcode::nc_matmul:
    case Opcode::quantize_mx:
    case Opcode::nc_matmul_mx:
    case Opcode::dma_compute: return true;
    default: return false;
  }
}

namespace {

// Why plan() leaves an instruction to the reference executors (listed in RunResult::fallbacks).
namespace why {
constexpr const char* no_body = "no native body for this opcode yet";
constexpr const char* indirect = "an operand is indirect (vector_offset): which rows it touches is read at run time";
constexpr const char* spills =
    "an operand has a dim that neither steps by whole partitions nor stays inside one partition";
constexpr const char* walk_dims = "its operands need more than 4 strided dims after merging";
constexpr const char* no_nest = "its operands' dims do not nest (no common walk of their elements)";
constexpr const char* partitions =
    "its operands do not share one partition dim (only a copy moves data between partitions)";
constexpr const char* free_dims =
    "an operand is not one [partition, free] block (it is in HBM, or its free dims do not merge into one)";
constexpr const char* perf_mode = "its perf_mode packs operands in a layout the matmul body does not walk";
constexpr const char* transpose_rank = "its axes do not match its source's dims";
constexpr const char* reduced_run = "its reduced dims are not one strided run of elements per result";
constexpr const char* operand_kind = "its source is neither a tile nor an immediate";
// dma_copy through an indirect view (NativeExecutor::run_indirect):
constexpr const char* both_indirect = "both of its operands are indirect";
constexpr const char* indirect_dim = "its indirect dim is not the view's first dim";
constexpr const char* indirect_on_chip = "its indirect view is on chip";
constexpr const char* same_tensor = "it copies between rows of one tensor";
constexpr const char* row_per_index = "its other operand's first dim does not have one row per index";
constexpr const char* short_index = "its vector_offset has fewer entries than the indirect dim has rows";
constexpr const char* partial_sums = "it sums more than two sources into a dst that is not fp32";
constexpr const char* late_source = "a source after the second is in its dst's tensor";
constexpr const char* partly_out = "an oob_mode=skip row lies partly inside its tensor (skipped element by element)";
}  // namespace why

// One operand of a planned instruction: where it lies and how the body walks it.
struct Operand {
  const View* view = nullptr;
  Machine::Layout layout;
  int64_t n[kWalkDims] = {1, 1, 1, 1};
  int64_t step[kWalkDims] = {0, 0, 0, 0};
  int esize = 4;
  bool written = false;
  bool partitioned = false;  // layout dim 0 is the partition dim (an on-chip view)
  // A transposed operand's dims in the order the walk takes them (`layout` stays the view's
  // own, for the overlap and initialized-byte checks).
  std::optional<Machine::Layout> walk_order;
  const Machine::Layout& walked() const { return walk_order ? *walk_order : layout; }
};

Access access_of(const Operand& o) {
  Access a{};
  a.dtype = static_cast<int32_t>(o.view->dtype);
  std::copy(o.step, o.step + kWalkDims, a.step);
  return a;
}

// Dims of a layout from `first` on, without extent-1 dims, adjacent dims merged where the
// outer one steps exactly over the inner one. Innermost last.
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

// A common walk for operands that go through their elements in lockstep (same count, each in its
// own row-major order): the coarsest dims that refine every operand's dims, innermost last.
// Fills n/step of walk dims [lead, kWalkDims) right-aligned; returns why not (null: done) if the
// dims do not nest or need more walk dims than there are.
const char* common_walk(std::vector<Operand*>& ops, size_t first, int lead) {
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
  if (static_cast<int>(ext.size()) > kWalkDims - lead) return why::walk_dims;
  for (size_t i = 0; i < ops.size(); ++i)
    for (size_t d = 0; d < ext.size(); ++d) {
      ops[i]->n[kWalkDims - 1 - d] = ext[d];
      ops[i]->step[kWalkDims - 1 - d] = st[i][d];
    }
  return nullptr;
}

// Whether two operands' layouts may share a byte: on-chip layouts (dim 0 moving by whole
// partitions) overlap only if both their partition ranges and their in-partition byte ranges do.
bool may_overlap(const Operand& x, const Operand& y) {
  struct Box {
    int64_t plo = 0, phi = 1, lo = 0, hi = 0;
  };
  auto box = [](const Operand& o) {
    const Machine::Layout& l = o.layout;
    Box b;
    size_t first = 0;
    b.lo = l.base;
    if (o.partitioned) {
      b.plo = l.base / l.stride[0];
      b.phi = b.plo + l.num[0];
      b.lo = l.base % l.stride[0];
      first = 1;
    }
    b.hi = b.lo;
    for (size_t d = first; d < l.num.size(); ++d) {
      const int64_t span = (l.num[d] - 1) * l.stride[d];
      (span < 0 ? b.lo : b.hi) += span;
    }
    b.hi += o.esize;
    return b;
  };
  const Box a = box(x), b = box(y);
  return a.plo < b.phi && b.plo < a.phi && a.lo < b.hi && b.lo < a.hi;
}

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

// Whether every byte of the operand in `flags` (0/1 per byte) is `value`.
bool all_flags_are(const ByteFlags& flags, const Operand& o, uint8_t value) {
  bool all = true;
  for_each_run(o, [&](int64_t at, int64_t len) { all = all && flags.all(at, len, value); });
  return all;
}

void set_flags(ByteFlags& flags, const Operand& o, uint8_t value) {
  for_each_run(o, [&](int64_t at, int64_t len) { flags.set(at, len, value); });
}

}  // namespace

struct NativeExecutor::Plan {
  const Instruction* inst = nullptr;
  const char* body = nullptr;
  std::string shape;
  std::vector<Operand> ops;  // the body's data[] order; written ones first
  int64_t partitions = 1;
  int64_t scratch_floats = 0;
};

NativeExecutor::NativeExecutor(Machine& m) : m_(m), jit_(native_specializer()) {
  if (const char* env = std::getenv("KNIT_JIT_THRESHOLD"); env && *env) threshold_ = std::max<int64_t>(0, std::atoll(env));
  if (m_.backend() == Backend::jit_strict) threshold_ = 0;  // strict: every instruction natively
}

namespace {

template <class Shape>
std::string bytes_of(const Shape& s) {
  return std::string(reinterpret_cast<const char*>(&s), sizeof s);
}

// The key of a compiled body in NativeExecutor::compiled_.
std::string compiled_key(const std::string& body, const std::string& shape) { return body + '\0' + shape; }

// The instruction as an activation (activation_reduce is one), if it is either.
std::optional<Activation> activation_of(const Instruction& inst) {
  if (const auto* op = std::get_if<Activation>(&inst.op)) return *op;
  if (const auto* op = std::get_if<ActivationReduce>(&inst.op)) return as_activation(*op);
  return std::nullopt;
}

}  // namespace

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
    if (const char* why = common_walk(ops, partitioned ? 1 : 0, partitioned ? 1 : 0)) return why;
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
  auto row = [&](RowKind kind, const View& dst, const View& data) -> const char* {
    out.body = "knit_row_body";
    for (const auto& [v, written] : {std::pair{&dst, true}, {&data, false}})
      if (const char* why = add(*v, written)) return why;
    if (!on_chip(dst) || !on_chip(data)) return why::free_dims;
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
  if (const auto* op = std::get_if<TensorScalar>(&inst.op)) {
    s.kind = is_bitvec_op(op->op0) ? MapKind::tensor_scalar_bits : MapKind::tensor_scalar;
    s.op0 = static_cast<int32_t>(op->op0);
    s.op1 = static_cast<int32_t>(op->op1);
    s.reverse0 = op->reverse0;
    s.reverse1 = op->reverse1;
    return map(s, op->dst, &op->data, nullptr);
  }
  if (const auto* op = std::get_if<ScalarTensorTensor>(&inst.op)) {
    s.kind = MapKind::scalar_tensor_tensor;
    s.op0 = static_cast<int32_t>(op->op0);
    s.op1 = static_cast<int32_t>(op->op1);
    s.reverse0 = op->reverse0;
    s.reverse1 = op->reverse1;
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
    s.kind = MapKind::scan;  // initial is column 0
    s.op0 = static_cast<int32_t>(op->op0);
    s.op1 = static_cast<int32_t>(op->op1);
    s.reverse0 = op->reverse0;
    s.reverse1 = op->reverse1;
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
  if (const auto* op = std::get_if<BnStats>(&inst.op)) return row(RowKind::bn_stats, op->dst, op->data);
  if (const auto* op = std::get_if<BnAggr>(&inst.op)) return row(RowKind::bn_aggr, op->dst, op->data);
  if (const auto* op = std::get_if<Max8>(&inst.op)) return row(RowKind::max8, op->dst, op->src);
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
    if (group.size() > 1) return why::reduced_run;
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
    r.group = group.empty() ? 1 : group[0].first;
    r.group_step = group.empty() ? 0 : group[0].second;
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
    if (op->perf_mode != MatmulPerfMode::none) return why::perf_mode;
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
    MatmulShape mm{};
    mm.K = extent[1][0];
    mm.M = extent[1][1];
    mm.N = extent[2][1];
    if (extent[2][0] != mm.K || extent[0][0] != mm.M || extent[0][1] != mm.N) return why::partitions;
    mm.dst = access_of(out.ops[0]);
    mm.stationary = access_of(out.ops[1]);
    mm.moving = access_of(out.ops[2]);
    for (Access* a : {&mm.dst, &mm.stationary, &mm.moving}) {
      a->step[0] = a->step[2];
      a->step[1] = a->step[3];
      a->step[2] = a->step[3] = 0;
    }
    mm.skip_zero_moving = op->is_transpose;
    out.scratch_floats = matmul_scratch_floats(mm.K, mm.M, mm.N);
    out.shape = bytes_of(mm);
    return nullptr;
  }
  return why::no_body;
}

namespace {

// One piece of an instruction for one thread: its shape, where its operands start relative to
// the whole instruction's (bytes, by data[] index), its scratch, and its first walk row (the
// per-partition columns and folds start there).
struct Part {
  std::string shape;
  int64_t offset[3] = {0, 0, 0};
  int64_t scratch_floats = 0;
  int64_t first_row = 0;
};

// An instruction touching at least this many elements splits across the worker threads.
constexpr int64_t kSplitElements = int64_t{1} << 16;

int64_t walk_elements(const Walk& w) { return w.n[0] * w.n[1] * w.n[2] * w.n[3]; }
const Walk& walk_of(const MapShape& s) { return s.walk; }
const Walk& walk_of(const ReduceShape& s) { return s.walk; }
const Walk& walk_of(const RowShape& s) { return s.data_walk; }
int64_t touched_elements(const MapShape& s) { return walk_elements(s.walk); }
int64_t touched_elements(const ReduceShape& s) { return walk_elements(s.walk) * s.group; }
int64_t touched_elements(const RowShape& s) { return walk_elements(s.data_walk); }
// Each row writes its own dst elements unless dst does not move along the rows (a stride-0 dim):
// then the rows overwrite one another in order, and that must stay on one thread.
template <class Shape>
bool rows_write_apart(const Shape& s) {
  return s.dst.step[0] != 0;
}

// Splits a shape by its walk's dim 0 (partitions, for on-chip operands) into up to `threads`
// parts of whole rows. `piece(shape, r0, rows)` returns the part's shape and its operands' byte
// offsets. Only for bodies whose rows are independent: then the bytes are the same for any split.
template <class Shape, class Piece>
std::vector<Part> row_parts(const std::string& bytes, int threads, int64_t scratch_floats, Piece&& piece) {
  Shape s;
  std::memcpy(&s, bytes.data(), sizeof s);
  const Walk& w = walk_of(s);
  const int64_t rows = w.n[0];
  const int64_t count =
      touched_elements(s) < kSplitElements || !rows_write_apart(s) ? 1 : std::min<int64_t>(threads, rows);
  if (count <= 1) return {Part{bytes, {0, 0, 0}, scratch_floats}};
  const int64_t chunk = (rows + count - 1) / count;
  std::vector<Part> parts;
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    Part part{{}, {0, 0, 0}, scratch_floats, r0};
    Shape p = piece(s, r0, std::min(chunk, rows - r0), part.offset);
    part.shape = bytes_of(p);
    parts.push_back(std::move(part));
  }
  return parts;
}

// Element-wise (every element alone; row folds per row), reductions (every dst element alone)
// and per-partition row statistics (every partition alone) split by rows.
std::vector<Part> row_parts_of(const std::string& body, const std::string& shape, int64_t scratch_floats,
                               int threads) {
  if (body == std::string_view("knit_map_body"))
    return row_parts<MapShape>(shape, threads, scratch_floats, [](MapShape s, int64_t r0, int64_t n, int64_t* off) {
      off[0] = r0 * s.dst.step[0], off[1] = r0 * s.a.step[0], off[2] = r0 * s.b.step[0];
      s.affine_offset += r0 * s.affine_step[0];
      s.walk.n[0] = n;
      return s;
    });
  if (body == std::string_view("knit_reduce_body"))
    return row_parts<ReduceShape>(shape, threads, scratch_floats, [](ReduceShape s, int64_t r0, int64_t n, int64_t* off) {
      off[0] = r0 * s.dst.step[0], off[1] = r0 * s.data.step[0];
      s.walk.n[0] = n;
      return s;
    });
  if (body == std::string_view("knit_row_body"))
    return row_parts<RowShape>(shape, threads, scratch_floats, [](RowShape s, int64_t r0, int64_t n, int64_t* off) {
      off[0] = r0 * s.dst.step[0], off[1] = r0 * s.data.step[0];
      s.data_walk.n[0] = s.dst_walk.n[0] = n;
      return s;
    });
  return {Part{shape, {0, 0, 0}, scratch_floats}};
}

// A matmul splits by moving / output columns into up to `threads` parts of whole 16-column
// panels (each output is still one thread's k-ordered sum, so results are the same bytes for
// any split); other large instructions by rows (row_parts_of).
std::vector<Part> parts_of(const std::string& body, const std::string& shape, int64_t scratch_floats, int threads) {
  if (body != "knit_matmul_body") return row_parts_of(body, shape, scratch_floats, threads);
  MatmulShape mm;
  std::memcpy(&mm, shape.data(), sizeof mm);
  const int64_t panels = (mm.N + 15) / 16;
  const int64_t count = std::max<int64_t>(1, std::min<int64_t>(threads, panels / 4));  // >= 64 columns each
  const int64_t chunk = (panels + count - 1) / count * 16;
  std::vector<Part> parts;
  for (int64_t n0 = 0; n0 < mm.N; n0 += chunk) {
    MatmulShape piece = mm;
    piece.N = std::min(chunk, mm.N - n0);
    parts.push_back({bytes_of(piece), {n0 * mm.dst.step[1], 0, n0 * mm.moving.step[1]},
                     matmul_scratch_floats(piece.K, piece.M, piece.N)});
  }
  return parts;
}

}  // namespace

namespace {

// Register, grid and multi-core synchronization instructions move no tensor data of their own
// (Machine::run_cores moves sendrecv's between the cores): nothing to compile, nothing to report.
bool moves_no_data(Opcode op) {
  switch (op) {
    case Opcode::register_move:
    case Opcode::register_load:
    case Opcode::register_store:
    case Opcode::register_alu:
    case Opcode::program:
    case Opcode::sendrecv:
    case Opcode::core_barrier: return true;
    default: return false;
  }
}

}  // namespace

bool NativeExecutor::warm(const Instruction& inst) {
  if (hot_) return true;
  for_each_view(inst, [&](const char*, const View& v) { work_ += v.num_elements(); });
  if (work_ < threshold_) return false;
  hot_ = true;
  prepare();
  return true;
}

bool NativeExecutor::run(const Instruction& inst) {
  if (const auto* op = std::get_if<NcMatmulMx>(&inst.op)) {
    if (!warm(inst)) {
      ++interpreted;
      return false;
    }
    matmul_mx(*op);
    ++native;
    return true;
  }
  if (const auto* op = std::get_if<DmaCompute>(&inst.op)) return run_dma_compute(inst, *op);
  if (const auto* op = std::get_if<DmaCopy>(&inst.op); op && (op->src.index_view() || op->dst.index_view()))
    return run_rows(inst, op->dst.index_view() ? op->dst : op->src, {inst}, op->oob_mode, false);
  Plan p;
  if (const char* why = plan(inst, p)) {
    if (moves_no_data(inst.opcode())) {
      ++interpreted;
      return false;
    }
    return refuse(inst, {why});
  }
  if (!warm(inst)) {
    ++interpreted;
    return false;
  }
  if (const Refusal why = execute(p); why.reason) return refuse(inst, why);
  ++native;
  return true;
}

bool NativeExecutor::refuse(const Instruction& inst, Refusal why) {
  if (!why.diagnostic) {
    if (m_.backend() == Backend::jit_strict)
      m_.fail("jit-strict", std::string(inst.opcode_name()) + " cannot run on the native path: " + why.reason +
                                ". KNIT_BACKEND=jit runs such instructions on the reference executors "
                                "(listed in Compiled.last_run[\"fallbacks\"]); KNIT_BACKEND=reference runs all of them there");
    std::string line = inst.loc.file + ":" + std::to_string(inst.loc.line) + ": " + std::string(inst.opcode_name()) +
                       ": " + why.reason;
    if (std::find(fallbacks.begin(), fallbacks.end(), line) == fallbacks.end()) fallbacks.push_back(std::move(line));
  }
  ++interpreted;
  return false;
}

NativeExecutor::Refusal NativeExecutor::execute(const Plan& p) {
  const Instruction& inst = *p.inst;
  Memory* mem[4] = {};
  for (size_t i = 0; i < p.ops.size(); ++i) mem[i] = m_.memory_of(*p.ops[i].view);
  // Reads of never-written bytes: the reference executor names the element (or warns).
  for (size_t i = 0; i < p.ops.size(); ++i)
    if (!p.ops[i].written && mem[i]->tracks_init() && !all_flags_are(mem[i]->init, p.ops[i], 1))
      return {"reads never-written bytes", true};
  // An output may be an input exactly (element-wise in place), never a shifted one.
  for (size_t i = 0; i < p.ops.size(); ++i)
    for (size_t j = 0; j < p.ops.size(); ++j) {
      const Operand& w = p.ops[i];
      const Operand& r = p.ops[j];
      if (!w.written || r.written || mem[i] != mem[j]) continue;
      if (!may_overlap(w, r)) continue;
      const bool same = w.layout.base == r.layout.base && w.esize == r.esize &&
                        std::equal(w.step, w.step + kWalkDims, r.step) && std::equal(w.n, w.n + kWalkDims, r.n);
      if (!same || p.body != std::string_view("knit_map_body"))
        return {"its output overlaps an input other than element for element"};
    }
  if (std::holds_alternative<TensorCopyPredicated>(inst.op)) {
    // It writes only the selected elements, which keep their state otherwise; the flags are
    // updated in bulk afterwards, so natively only when that is exact for the whole dst.
    const Operand& dst = p.ops[0];
    if (mem[0]->tracks_init() && !all_flags_are(mem[0]->init, dst, 1))
      return {"its dst is partly never written (a predicated copy leaves the unselected elements unwritten)"};
    if (mem[0]->tracks_matmul() && !all_flags_are(mem[0]->mm_written, dst, 0))
      return {"its dst holds matmul results (a predicated copy clears the matmul-written state of the selected "
              "elements only)"};
  }
  const std::string& shape = p.shape;
  std::vector<float> col[2];  // per-partition operand columns (the matmul body: its accumulate flag)
  bool by_matmul = false;
  if (const auto* op = std::get_if<NcMatmul>(&inst.op)) {
    // Accumulation is decided per element by the PSUM state; natively only when it is uniform.
    const Operand& dst = p.ops[0];
    if (!mem[0]->tracks_matmul()) return {"its dst is not in PSUM"};
    const bool written = all_flags_are(mem[0]->mm_written, dst, 1);
    const bool fresh = all_flags_are(mem[0]->mm_written, dst, 0);
    bool add = false;
    if (op->accumulate == Accumulate::on) add = true;
    else if (op->accumulate == Accumulate::auto_) add = written;
    if (add && !written) return {"it adds into PSUM no matmul wrote", true};  // the reference warns
    if (op->accumulate == Accumulate::auto_ && !written && !fresh)
      return {"its dst is partly matmul-accumulated, partly not (accumulation decided per element)"};
    col[0] = {add ? 1.0f : 0.0f};  // the body's run-time accumulate flag (shapes.h)
    by_matmul = true;
  }
  // Per-partition operands (read after the tiles, like the reference executors).
  std::vector<float> folds(static_cast<size_t>(p.partitions), 0.0f);
  auto bits_as_floats = [](const std::vector<uint32_t>& bits) {
    std::vector<float> v(bits.size());
    std::memcpy(v.data(), bits.data(), bits.size() * 4);
    return v;
  };
  const int64_t P = p.partitions;
  const std::optional<Activation> activation = activation_of(inst);
  if (const auto* op = std::get_if<TensorScalar>(&inst.op)) {
    if (is_bitvec_op(op->op0)) {
      col[0] = bits_as_floats(scalar_column_bits(m_, op->operand0, op->op0, P, "operand0"));
      col[1] = bits_as_floats(scalar_column_bits(m_, op->operand1, op->op1, P, "operand1"));
    } else {
      col[0] = scalar_column(m_, op->operand0, op->op0, P, "operand0");
      col[1] = scalar_column(m_, op->operand1, op->op1, P, "operand1");
    }
  } else if (const auto* op = std::get_if<ScalarTensorTensor>(&inst.op)) {
    col[0] = scalar_column(m_, op->operand0, op->op0, P, "operand0");
  } else if (const auto* op = std::get_if<TensorScalarReduce>(&inst.op)) {
    col[0] = scalar_column(m_, op->operand0, op->op0, P, "operand0");
  } else if (const auto* op = std::get_if<SelectReduce>(&inst.op)) {
    col[0] = m_.column(op->on_false, P, "on_false");
  } else if (const auto* op = std::get_if<TensorTensorScan>(&inst.op)) {
    col[0] = m_.column(op->initial, P, "initial");
  } else if (const auto* op = std::get_if<RangeSelect>(&inst.op)) {
    col[0] = m_.column(ir::Operand::of(op->bound0), P, "bound0");
    col[1] = m_.column(ir::Operand::of(op->bound1), P, "bound1");
  } else if (activation) {
    col[0] = m_.column(activation->scale, P, "scale");
    col[1] = activation->bias.is_none() ? std::vector<float>(P, 0.0f) : m_.column(activation->bias, P, "bias");
  }
  std::array<uint8_t*, 3> bases{};
  for (size_t i = 0; i < p.ops.size() && i < bases.size(); ++i) bases[i] = mem[i]->bytes.data() + p.ops[i].layout.base;
  dispatch(p.body, shape, p.scratch_floats, bases, {&col[0], &col[1], &folds});
  for (size_t i = 0; i < p.ops.size(); ++i) {  // the written operands come first
    if (!p.ops[i].written) break;
    if (mem[i]->tracks_init()) set_flags(mem[i]->init, p.ops[i], 1);
    if (mem[i]->tracks_matmul()) set_flags(mem[i]->mm_written, p.ops[i], by_matmul ? 1 : 0);
  }
  if (activation) finish_activation(m_, *activation, folds.data(), P);
  if (const auto* op = std::get_if<TensorScalarReduce>(&inst.op)) finish_tensor_scalar_reduce(m_, *op, folds.data(), P);
  if (const auto* op = std::get_if<SelectReduce>(&inst.op))
    finish_vector_reduce(m_, op->reduce_cmd, op->reduce_op, folds.data(), P, op->reduce_res);
  if (const auto* op = std::get_if<RangeSelect>(&inst.op))
    finish_vector_reduce(m_, op->reduce_cmd, op->reduce_op, folds.data(), P, op->reduce_res);
  return {};
}

void* NativeExecutor::compiled(const char* body, const std::string& shape) {
  const std::string key = compiled_key(body, shape);
  auto it = compiled_.find(key);
  if (it == compiled_.end()) {
    const auto fns = jit_.compile({{body, shape}});
    it = compiled_.emplace(key, reinterpret_cast<void*>(fns[0])).first;
  }
  return it->second;
}

// An instruction through an indirect HBM view `ind` (dma_copy's gather or scatter of rows,
// dma_compute's scatter-add), run as `stages` (instructions over the same elements, in order),
// one row at a time: with every view's first dim cut to one row each stage has one static shape,
// compiled once, and row i moves only the bases, by index[i] rows on a view equal to `ind` and by
// i rows on any other. The reference's checks, in bulk: the index tile is read through a Tile
// (its errors), each row's bounds (an out-of-range row goes to the reference to raise, or with
// oob_mode skip is left alone), repeated indices where `unique` promises none (the reference
// raises), the rows read initialized. Rows run in order, so a repeated index in a scatter sees
// the earlier rows' writes, as the reference's element order does.
bool NativeExecutor::run_rows(const Instruction& inst, const View& ind, const std::vector<Instruction>& stages,
                              OobMode oob, bool unique) {
  const Kernel& k = m_.kernel();
  const int64_t n = ind.dims.empty() ? 0 : ind.dims[0].num;
  const char* why = nullptr;
  if (ind.indirect_dim != 0) why = why::indirect_dim;
  else if (is_on_chip(k.tensor(ind.tensor).buffer)) why = why::indirect_on_chip;
  for (size_t s = 0; s < stages.size() && !why; ++s)
    for_each_view(stages[s], [&](const char* name, const View& v) {
      if (name == std::string_view("vector_offset")) return;
      const bool indirect = v.index_view() != nullptr;
      if (indirect && !(v == ind)) why = why::both_indirect;
      else if (!indirect && v.tensor == ind.tensor) why = why::same_tensor;
      else if (!indirect && (v.dims.empty() || v.dims[0].num != n)) why = why::row_per_index;
    });
  // Each stage cut to its first row, and which of its planned operands are the indirect view's
  // row (no other operand is in its tensor).
  auto first_row = [](View v) {
    v.indirect.clear();
    v.indirect_dim = -1;
    if (!v.dims.empty()) v.dims[0].num = 1;
    return v;
  };
  const View ind_row = first_row(ind);
  std::vector<Instruction> cut = stages;
  std::vector<Plan> plans(stages.size());
  std::vector<std::vector<bool>> on_ind(stages.size());
  for (size_t s = 0; s < stages.size() && !why; ++s) {
    for_each_view_mut(cut[s], [&](View& v) { v = first_row(v); });
    why = plan(cut[s], plans[s]);
    for (const Operand& o : plans[s].ops) on_ind[s].push_back(*o.view == ind_row);
  }
  if (why) return refuse(inst, {why});
  if (!warm(inst)) {
    ++interpreted;
    return false;
  }
  // Row 0's byte range in the indirect tensor, [lo, hi): row i's is shifted by index[i] rows.
  const Operand* row0 = nullptr;
  for (size_t i = 0; i < on_ind[0].size() && !row0; ++i)
    if (on_ind[0][i]) row0 = &plans[0].ops[i];
  const int64_t esize = row0->esize, ind_row_bytes = ind.dims[0].step * esize;
  const Machine::Layout& l = row0->layout;
  int64_t lo = l.base, hi = l.base;
  for (size_t d = 0; d < l.num.size(); ++d) ((l.stride[d] < 0) ? lo : hi) += (l.num[d] - 1) * l.stride[d];
  hi += esize;
  const int64_t size = k.tensor(ind.tensor).size_bytes();
  Tile index = m_.tile(*ind.index_view(), "vector_offset");
  if (index.size() < n) return refuse(inst, {why::short_index});
  std::vector<int64_t> rows(static_cast<size_t>(n));
  std::vector<bool> skipped(static_cast<size_t>(n), false);
  for (int64_t i = 0; i < n; ++i) {
    rows[i] = index.read_int(i);
    const int64_t shift = rows[i] * ind_row_bytes;
    if (lo + shift >= 0 && hi + shift <= size) continue;
    if (oob != OobMode::skip) return refuse(inst, {"an index is out of range", true});  // the reference raises
    if (hi - esize + shift >= 0 && lo + shift + esize <= size) return refuse(inst, {why::partly_out});
    skipped[i] = true;
  }
  if (unique) {
    std::vector<int64_t> sorted = rows;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      return refuse(inst, {"it repeats an index it promised unique", true});  // the reference raises
  }
  // Operand o of stage s at row i.
  auto at_row = [&](size_t s, size_t o, int64_t i) {
    Operand x = plans[s].ops[o];
    x.layout.base += on_ind[s][o] ? rows[i] * ind_row_bytes : i * x.layout.stride[0];
    return x;
  };
  // Reads of never-written bytes: the sources of every stage (a later stage's first input is the
  // dst an earlier one wrote).
  for (size_t s = 0; s < plans.size(); ++s)
    for (size_t o = 0; o < plans[s].ops.size(); ++o) {
      if (plans[s].ops[o].written || (s > 0 && o == 1)) continue;
      const Memory* mem = m_.memory_of(*plans[s].ops[o].view);
      for (int64_t i = 0; i < n && mem->tracks_init(); ++i)
        if (!skipped[i] && !all_flags_are(mem->init, at_row(s, o, i), 1))
          return refuse(inst, {"reads never-written bytes", true});
    }
  std::vector<codegen::SpecializedFn> fns;
  for (const Plan& p : plans) fns.push_back(reinterpret_cast<codegen::SpecializedFn>(compiled(p.body, p.shape)));
  const std::array<float*, 3> no_columns{};
  for (int64_t i = 0; i < n; ++i) {
    if (skipped[i]) continue;
    for (size_t s = 0; s < plans.size(); ++s) {
      std::array<uint8_t*, 4> data{};
      for (size_t o = 0; o < plans[s].ops.size(); ++o)
        data[o] = m_.memory_of(*plans[s].ops[o].view)->bytes.data() + at_row(s, o, i).layout.base;
      fns[s](data.data(), no_columns.data());
      Memory* dst_mem = m_.memory_of(*plans[s].ops[0].view);
      const Operand dst = at_row(s, 0, i);
      if (dst_mem->tracks_init()) set_flags(dst_mem->init, dst, 1);
      if (dst_mem->tracks_matmul()) set_flags(dst_mem->mm_written, dst, 0);
    }
  }
  ++native;
  return true;
}

namespace {

// dma_compute: dst = srcs[0] + srcs[1] + ... in fp32, rounded once at the store (exec_data.cpp),
// natively a chain of fp32 tensor_tensor stages over the same elements: dst = s0 + s1 (one
// source: dst = bypass(s0, s0), its value through fp32), then dst = dst + s_k for each further
// source, whose partial sums an fp32 dst holds exactly (run_dma_compute refuses the others).
std::vector<Instruction> dma_compute_stages(const Instruction& inst, const DmaCompute& op) {
  std::vector<Instruction> stages;
  auto stage = [&](const View& a, const View& b, AluOp alu) {
    Instruction s = inst;
    s.op = TensorTensor{op.dst, a, b, alu, Engine::vector};  // the fp32 path (no GpSimd integer one)
    stages.push_back(std::move(s));
  };
  const bool one = op.srcs.size() == 1;
  stage(op.srcs[0], op.srcs[one ? 0 : 1], one ? AluOp::bypass : AluOp::add);
  for (size_t k = 2; k < op.srcs.size(); ++k) stage(op.dst, op.srcs[k], AluOp::add);
  return stages;
}

}  // namespace

// Through an indirect view (a scatter-add into HBM rows) the stages run row by row (run_rows).
bool NativeExecutor::run_dma_compute(const Instruction& inst, const DmaCompute& op) {
  const char* why = nullptr;
  if (op.srcs.size() > 2 && op.dst.dtype != DType::float32) why = why::partial_sums;
  for (size_t k = 2; k < op.srcs.size(); ++k)
    if (op.srcs[k].tensor == op.dst.tensor) why = why::late_source;  // earlier stages would have written it
  const std::vector<Instruction> stages = dma_compute_stages(inst, op);
  const View* ind = op.dst.index_view() ? &op.dst : nullptr;
  for (const View& v : op.srcs) ind = ind ? ind : v.index_view() ? &v : nullptr;
  if (!why && ind) return run_rows(inst, *ind, stages, op.oob_mode, op.unique_indices && op.dst.index_view());
  std::vector<Plan> plans(stages.size());
  for (size_t s = 0; s < stages.size() && !why; ++s) why = plan(stages[s], plans[s]);
  if (why) return refuse(inst, {why});
  if (!warm(inst)) {
    ++interpreted;
    return false;
  }
  // Every source must be readable before the first stage writes dst; after that a stage's first
  // input is the dst the one before wrote, and its second a source in another tensor.
  for (size_t s = 1; s < plans.size(); ++s) {
    const Operand& src = plans[s].ops[2];
    const Memory* mem = m_.memory_of(*src.view);
    if (mem->tracks_init() && !all_flags_are(mem->init, src, 1)) return refuse(inst, {"reads never-written bytes", true});
  }
  for (const Plan& p : plans)
    if (const Refusal why = execute(p); why.reason) return refuse(inst, why);  // only the first stage can
  ++native;
  return true;
}

void NativeExecutor::dispatch(const char* body, const std::string& shape, int64_t scratch_floats,
                              const std::array<uint8_t*, 3>& bases, const std::array<std::vector<float>*, 3>& columns) {
  // Compile (once per shape) and run, in parts on the worker threads where that pays.
  WorkerPool& pool = WorkerPool::instance();
  const std::vector<Part> parts = parts_of(body, shape, scratch_floats, pool.threads());
  int64_t scratch_total = 0;
  for (const Part& part : parts) scratch_total += part.scratch_floats;
  if (scratch_total > static_cast<int64_t>(scratch_.size())) scratch_.resize(static_cast<size_t>(scratch_total));
  std::vector<std::function<void()>> jobs;
  float* scratch = scratch_.data();
  for (const Part& part : parts) {
    // The shapes' steps are relative to each operand's start; the bodies add them to data[i].
    std::array<uint8_t*, 4> data{};
    for (size_t i = 0; i < bases.size(); ++i) data[i] = bases[i] ? bases[i] + part.offset[i] : nullptr;
    if (part.scratch_floats) data[3] = reinterpret_cast<uint8_t*>(scratch);
    scratch += part.scratch_floats;
    const auto fn = reinterpret_cast<codegen::SpecializedFn>(compiled(body, part.shape));
    auto from_row = [&](std::vector<float>* v) { return !v || v->empty() ? nullptr : v->data() + part.first_row; };
    const std::array<float*, 3> cols{from_row(columns[0]), from_row(columns[1]), from_row(columns[2])};
    jobs.push_back([fn, data, cols] { fn(data.data(), cols.data()); });
  }
  pool.run(jobs);
}

namespace {

// The fp32 K-sum of an nc_matmul_mx over its dequantized operands, all row-major: [K, M], [K, N]
// and the partial sums [M, N], with K = 4 x the partitions and M, N the operands' free sizes.
MatmulShape mx_sum_shape(const NcMatmulMx& op) {
  const int64_t P = op.stationary.dims[0].num, K = 4 * P;
  const int64_t M = op.stationary.num_elements() / P, N = op.moving.num_elements() / P;
  auto rows_of = [](int64_t row_elements) {
    Access a{};
    a.dtype = static_cast<int32_t>(DType::float32);
    a.step[0] = 4 * row_elements;
    a.step[1] = 4;
    return a;
  };
  MatmulShape mm{};
  mm.K = K;
  mm.M = M;
  mm.N = N;
  mm.stationary = rows_of(M);
  mm.moving = rows_of(N);
  mm.dst = rows_of(N);
  return mm;
}

}  // namespace

// nc_matmul_mx: both operands are dequantized to fp32 by the reference's own code (dequantize_mx,
// reading through Tiles: the same checks, errors and warnings), the K x M x N sum, all of the
// instruction's arithmetic but those exact multiplications by powers of two, runs in the native
// matmul body on them, and the result goes into PSUM as the reference writes it
// (write_matmul_result): each of those bytes is the reference's by construction.
void NativeExecutor::matmul_mx(const NcMatmulMx& op) {
  Tile stat = m_.tile(op.stationary, "stationary");
  Tile mov = m_.tile(op.moving, "moving");
  Tile stat_scale = m_.tile(op.stationary_scale, "stationary_scale");
  Tile mov_scale = m_.tile(op.moving_scale, "moving_scale");
  Tile dst = m_.tile(op.dst, "dst");
  std::vector<float> s = dequantize_mx(stat, stat_scale), v = dequantize_mx(mov, mov_scale);
  const MatmulShape mm = mx_sum_shape(op);
  std::vector<float> partial(static_cast<size_t>(mm.M * mm.N)), overwrite{0.0f};
  auto bytes = [](std::vector<float>& x) { return reinterpret_cast<uint8_t*>(x.data()); };
  dispatch("knit_matmul_body", bytes_of(mm), matmul_scratch_floats(mm.K, mm.M, mm.N),
           {bytes(partial), bytes(s), bytes(v)}, {&overwrite, nullptr, nullptr});
  write_matmul_result(m_, dst, partial, op.accumulate);
}

void NativeExecutor::start() {
  // The kernel's static element work (each data instruction once; loops traced into the body
  // count once per trace-time iteration): above the threshold, compile everything now.
  int64_t estimate = 0;
  for (const Instruction& inst : m_.kernel().body)
    for_each_view(inst, [&](const char*, const View& v) { estimate += v.num_elements(); });
  if (estimate >= threshold_) {
    hot_ = true;
    prepare();
  }
}

void NativeExecutor::prepare() {
  std::vector<codegen::SpecializeRequest> requests;
  auto request = [&](const Plan& p) {
    for (const Part& part : parts_of(p.body, p.shape, p.scratch_floats, WorkerPool::instance().threads()))
      requests.push_back({p.body, part.shape});
  };
  for (const Instruction& inst : m_.kernel().body) {
    bool dynamic = false;
    for_each_view(inst, [&](const char*, const View& v) { dynamic = dynamic || !v.is_static(); });
    if (dynamic) continue;
    Plan p;
    if (const auto* dc = std::get_if<DmaCompute>(&inst.op)) {
      for (const Instruction& stage : dma_compute_stages(inst, *dc))
        if (Plan sp; !plan(stage, sp)) request(sp);
    } else if (const auto* mx = std::get_if<NcMatmulMx>(&inst.op)) {
      const MatmulShape mm = mx_sum_shape(*mx);
      p.body = "knit_matmul_body";
      p.shape = bytes_of(mm);
      p.scratch_floats = matmul_scratch_floats(mm.K, mm.M, mm.N);
      request(p);
    } else if (!plan(inst, p)) {
      request(p);
    }
  }
  std::sort(requests.begin(), requests.end(), [](const auto& a, const auto& b) {
    return std::tie(a.body, a.constant) < std::tie(b.body, b.constant);
  });
  requests.erase(std::unique(requests.begin(), requests.end(),
                             [](const auto& a, const auto& b) { return a.body == b.body && a.constant == b.constant; }),
                 requests.end());
  if (requests.empty()) return;
  const auto fns = jit_.compile(requests);
  for (size_t i = 0; i < requests.size(); ++i)
    compiled_.emplace(compiled_key(requests[i].body, requests[i].constant), reinterpret_cast<void*>(fns[i]));
}

}  // namespace knit::sim
