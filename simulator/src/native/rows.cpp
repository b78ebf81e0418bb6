// Instructions through an indirect view (dma_copy's gather and scatter of rows, dma_compute's
// scatter-add) and dma_compute, on the native path: chains of planned stages, run row by row where
// a view is indirect.
#include <algorithm>
#include <cstring>

#include "knit/jit/specializer.h"
#include "plan.h"

namespace knit::sim {

using namespace knit::ir;
using namespace knit::sim::native;

namespace {

// A view cut to its first row (index 0 of its first dim), direct: the one-row view every row of
// a row walk shares, with its base moved.
View first_row(View v) {
  v.indirect.clear();
  v.indirect_dim = -1;
  if (!v.dims.empty()) v.dims[0].num = 1;
  return v;
}

}  // namespace

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
                              OobMode oob, bool unique, bool whole_reads) {
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
      else if (!indirect && v.tensor == ind.tensor && !whole_reads) why = why::same_tensor;
      else if (!indirect && (v.dims.empty() || v.dims[0].num != n)) why = why::row_per_index;
    });
  // Each stage cut to its first row, and which of its planned operands are the indirect view's
  // row: those that were indirect (a direct operand may be in the same tensor, at the same row 0).
  std::vector<Instruction> cut = stages;
  std::vector<Plan> plans(stages.size());
  std::vector<std::vector<bool>> on_ind(stages.size());
  for (size_t s = 0; s < stages.size() && !why; ++s) {
    std::vector<const View*> was_indirect;
    for_each_view_mut(cut[s], [&](View& v) {
      if (v.index_view()) was_indirect.push_back(&v);
      v = first_row(v);
    });
    why = plan(cut[s], plans[s]);
    for (const Operand& o : plans[s].ops)
      on_ind[s].push_back(std::find(was_indirect.begin(), was_indirect.end(), o.view) != was_indirect.end());
  }
  if (why) return refuse(inst, {why});
  if (!warm(inst)) return false;
  // Row 0's byte range in the indirect tensor, [lo, hi): row i's is shifted by index[i] rows.
  const Operand* row0 = nullptr;
  for (size_t i = 0; i < on_ind[0].size() && !row0; ++i)
    if (on_ind[0][i]) row0 = &plans[0].ops[i];
  const int64_t esize = row0->esize, ind_row_bytes = ind.dims[0].step * esize;
  const auto [lo, hi] = byte_range(*row0);  // an HBM view: bytes of the tensor
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
  // Rows moved within one tensor (whole_reads: one stage, a copy): the reference reads the source
  // whole, then writes, unless it skips rows (then element by element, reads and writes
  // interleaved). The source is read from a snapshot of the bytes its rows reach: its row 0's
  // byte range, shifted by each row it reads.
  std::vector<std::pair<uint8_t*, int64_t>> copies;
  const Operand& src = plans[0].ops[1];
  const Memory* src_mem = m_.memory_of(*src.view);
  if (whole_reads && src_mem == m_.memory_of(*plans[0].ops[0].view)) {
    if (std::find(skipped.begin(), skipped.end(), true) != skipped.end()) return refuse(inst, {why::same_tensor_skip});
    const auto [first, end] = byte_range(src);
    int64_t low = 0, high = 0;  // the extreme shifts of row 0
    for (int64_t i = 0; i < n; ++i) {
      const int64_t shift = on_ind[0][1] ? rows[i] * ind_row_bytes : i * src.layout.stride[0];
      low = std::min(low, shift);
      high = std::max(high, shift);
    }
    Operand read;  // those bytes, one run
    read.esize = 1;
    read.layout = Machine::Layout{first + low, {end + high - first - low}, {1}};
    copies = {{nullptr, 0}, {snapshot(snapshots_[1], read, *src_mem), read.layout.base}};
  }
  return move_rows(inst, plans, on_ind, rows, skipped, ind_row_bytes, copies);
}

// Runs `plans` (stages over one row each) for every row i not skipped, in order: the operands
// marked `picked` at row rows[i] (row_bytes apart), the others at row i.
bool NativeExecutor::move_rows(const Instruction& inst, const std::vector<Plan>& plans,
                               const std::vector<std::vector<bool>>& picked, const std::vector<int64_t>& rows,
                               const std::vector<bool>& skipped, int64_t row_bytes,
                               const std::vector<std::pair<uint8_t*, int64_t>>& copies) {
  const int64_t n = static_cast<int64_t>(rows.size());
  for (const Plan& p : plans)
    if (!p.outer.empty()) return refuse(inst, {why::walk_dims});  // a row is one call of its body
  // Operand o of stage s at row i.
  auto at_row = [&](size_t s, size_t o, int64_t i) {
    Operand x = plans[s].ops[o];
    x.layout.base += picked[s][o] ? rows[i] * row_bytes : i * x.layout.stride[0];
    return x;
  };
  // Reads of never-written bytes: the inputs of every stage that no earlier stage wrote.
  for (size_t s = 0; s < plans.size(); ++s)
    for (size_t o = 0; o < plans[s].ops.size(); ++o) {
      if (plans[s].ops[o].written || chained_input(s, o)) continue;
      const Memory* mem = m_.memory_of(*plans[s].ops[o].view);
      for (int64_t i = 0; i < n && mem->tracks_init(); ++i)
        if (!skipped[i] && reads_unwritten(*mem, at_row(s, o, i))) return refuse(inst, {why::unwritten_read, true});
    }
  std::vector<codegen::SpecializedFn> fns;
  for (const Plan& p : plans) fns.push_back(reinterpret_cast<codegen::SpecializedFn>(compiled(p.body, p.shape)));
  const std::array<float*, 3> no_columns{};
  for (int64_t i = 0; i < n; ++i) {
    if (skipped[i]) continue;
    for (size_t s = 0; s < plans.size(); ++s) {
      std::array<uint8_t*, 4> data{};
      for (size_t o = 0; o < plans[s].ops.size(); ++o) {
        const int64_t at = at_row(s, o, i).layout.base;
        data[o] = s == 0 && o < copies.size() && copies[o].first
                      ? copies[o].first + (at - copies[o].second)
                      : m_.memory_of(*plans[s].ops[o].view)->bytes.data() + at;
      }
      fns[s](data.data(), no_columns.data());
      Memory* dst_mem = m_.memory_of(*plans[s].ops[0].view);
      const Operand dst = at_row(s, 0, i);
      mark_written(*dst_mem, dst, false);
    }
  }
  ++native;
  return true;
}

// dma_compute: dst = srcs[0] + srcs[1] + ... in fp32, rounded once at the store (exec_data.cpp),
// natively a chain of fp32 tensor_tensor stages over the same elements: dst = s0 + s1 (one
// source: dst = bypass(s0, s0), its value through fp32), then dst = dst + s_k for each further
// source. Through an indirect view the chain runs in dst's rows, whose partial sums an fp32 dst
// holds exactly (run_dma_compute refuses the others); directly, in a dense fp32 buffer instead
// of dst (plan_dma_compute).
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

namespace {

// A dense row-major fp32 array walked by `w`: element number e (in walk order) at byte 4 e.
Access dense_fp32(const Walk& w) {
  Access a{};
  a.dtype = static_cast<int32_t>(DType::float32);
  int64_t step = 4;
  for (int d = kWalkDims - 1; d >= 0; --d) {
    a.step[d] = step;
    step *= w.n[d];
  }
  return a;
}

// Re-targets a planned map shape's dst (and, for a chained stage, its first input) at the
// dense fp32 buffer; for the store, its source.
void onto_buffer(std::string& shape, bool dst, bool a) {
  MapShape s;
  std::memcpy(&s, shape.data(), sizeof s);
  if (dst) s.dst = dense_fp32(s.walk);
  if (a) s.a = dense_fp32(s.walk);
  shape = bytes_of(s);
}

}  // namespace

// A direct dma_compute's plans: one source or two, its one stage as it is; more, the stages
// with dst moved to a dense fp32 buffer of dst's elements (every operand walks them in dst's
// row-major order, whatever the walk's dims, so element e is at byte 4 e in every stage), then
// the store, a copy of the buffer into dst that rounds once, as the reference does. Nothing is
// written to dst before every source has been read, so a source may lie anywhere in dst's tensor.
const char* NativeExecutor::plan_dma_compute(const Instruction& inst, const DmaCompute& op,
                                             std::vector<Instruction>& stages, std::vector<Plan>& plans) {
  stages = dma_compute_stages(inst, op);
  const bool buffered = stages.size() > 1;
  if (buffered) {
    Instruction store = inst;
    store.op = TensorCopy{op.dst, op.srcs[0]};  // its source is then replaced by the buffer
    stages.push_back(std::move(store));
  }
  plans.assign(stages.size(), Plan{});
  for (size_t s = 0; s < stages.size(); ++s) {
    if (const char* why = plan(stages[s], plans[s])) return why;
    if (buffered && !plans[s].outer.empty()) return why::walk_dims;  // the buffer is one body's walk
  }
  for (size_t s = 0; s + 1 < stages.size() && buffered; ++s) onto_buffer(plans[s].shape, true, s > 0);
  if (buffered) onto_buffer(plans.back().shape, false, true);
  return nullptr;
}

bool NativeExecutor::run_dma_compute(const Instruction& inst, const DmaCompute& op) {
  const View* ind = op.dst.index_view() ? &op.dst : nullptr;
  for (const View& v : op.srcs) ind = ind ? ind : v.index_view() ? &v : nullptr;
  if (ind) {  // a scatter-add into HBM rows: the chain runs in dst's rows, row by row (run_rows)
    const char* why = nullptr;
    if (op.srcs.size() > 2 && op.dst.dtype != DType::float32) why = why::partial_sums;
    for (size_t k = 2; k < op.srcs.size(); ++k)
      if (op.srcs[k].tensor == op.dst.tensor) why = why::late_source;  // earlier stages would have written it
    if (why) return refuse(inst, {why});
    return run_rows(inst, *ind, dma_compute_stages(inst, op), op.oob_mode, op.unique_indices && op.dst.index_view(),
                    false);
  }
  std::vector<Instruction> stages;  // what the plans point into
  std::vector<Plan> plans;
  if (const char* why = plan_dma_compute(inst, op, stages, plans)) return refuse(inst, {why});
  if (!warm(inst)) return false;
  if (plans.size() == 1) {
    if (const Refusal why = execute(plans[0]); why.reason) return refuse(inst, why);
    ++native;
    return true;
  }
  // Every source is read before anything is written: reads of never-written bytes first.
  for (size_t s = 0; s + 1 < plans.size(); ++s)
    for (size_t o = 0; o < plans[s].ops.size(); ++o) {
      const Operand& src = plans[s].ops[o];
      if (src.written || chained_input(s, o)) continue;
      if (reads_unwritten(*m_.memory_of(*src.view), src)) return refuse(inst, {why::unwritten_read, true});
    }
  auto base = [&](const Operand& o) { return m_.memory_of(*o.view)->bytes.data() + o.layout.base; };
  partial_sums_.resize(static_cast<size_t>(op.dst.num_elements()));
  uint8_t* sums = reinterpret_cast<uint8_t*>(partial_sums_.data());
  for (size_t s = 0; s < plans.size(); ++s) {
    const Plan& p = plans[s];
    const bool store = s + 1 == plans.size();
    const std::array<uint8_t*, 3> bases{store ? base(p.ops[0]) : sums, store || s > 0 ? sums : base(p.ops[1]),
                                        store ? nullptr : base(p.ops[2])};
    dispatch(p.body, p.shape, p.scratch_floats, bases, {nullptr, nullptr, nullptr});
  }
  const Operand& dst = plans.back().ops[0];
  Memory* mem = m_.memory_of(*dst.view);
  mark_written(*mem, dst, false);
  ++native;
  return true;
}

// nc_stream_shuffle: in each quadrant of 32 partitions, dst partition q + i = src partition
// q + mask[i] (255: dst's partition is left alone), bit for bit: a gather of partitions whose
// indices are the mask, one copy of a partition's row compiled once.
bool NativeExecutor::run_shuffle(const Instruction& inst, const NcStreamShuffle& op) {
  const int64_t P = op.dst.dims.empty() ? 0 : op.dst.dims[0].num;
  const int64_t src_p = op.src.dims.empty() ? 0 : op.src.dims[0].num;  // may differ: a broadcast
  const char* why = nullptr;
  if (op.src.dtype != op.dst.dtype) why = why::shuffle_dtypes;
  else if (src_p == 0 || op.shuffle_mask.size() < 32) why = why::partitions;
  Instruction row = inst;
  row.op = TensorCopy{first_row(op.dst), first_row(op.src)};
  std::vector<Plan> plans(1);
  if (!why) why = plan(row, plans[0]);
  std::vector<int64_t> rows(static_cast<size_t>(P));
  std::vector<bool> skipped(static_cast<size_t>(P), false);
  for (int64_t p = 0; p < P && !why; ++p) {
    const int64_t from = op.shuffle_mask[static_cast<size_t>(p % 32)];
    rows[p] = p - p % 32 + from;
    skipped[p] = from == 255;
    if (!skipped[p] && (from < 0 || rows[p] >= src_p)) why = why::partitions;
  }
  // In place (src and dst in one tensor) the rows are read from a snapshot of src's partitions,
  // as the reference reads every named row before writing.
  Operand whole;
  whole.view = &op.src;
  whole.esize = plans[0].ops[1].esize;
  whole.partitioned = true;
  if (!why && !m_.layout_of(op.src, whole.layout)) why = why::spills;
  if (why) return refuse(inst, {why});
  if (!warm(inst)) return false;
  std::vector<std::pair<uint8_t*, int64_t>> copies;
  if (op.src.tensor == op.dst.tensor)
    copies = {{nullptr, 0}, {snapshot(snapshots_[1], whole, *m_.memory_of(op.src)), whole.layout.base}};
  return move_rows(inst, plans, {{false, true}}, rows, skipped, plans[0].ops[1].layout.stride[0], copies);
}

}  // namespace knit::sim
