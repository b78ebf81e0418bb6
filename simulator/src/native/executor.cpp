#include "executor.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <optional>

#include "../alu.h"
#include "../exec_compute.h"
#include "../machine.h"
#include "../matmul.h"
#include "forwarding.h"
#include "knit/ir/indirect.h"
#include "knit/ir/op_traits.h"
#include "knit/ir/view.h"
#include "knit/jit/specializer.h"
#include "knit/sim/native.h"
#include "plan.h"
#include "shapes.h"
#include "tiering.h"
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

namespace {

// The key of a compiled body in NativeExecutor::compiled_.
std::string compiled_key(const std::string& body, const std::string& shape) { return body + '\0' + shape; }

}  // namespace

NativeExecutor::NativeExecutor(Machine& m) : m_(m), jit_(native_specializer()) {
  if (const char* env = std::getenv("KNIT_JIT_THRESHOLD"); env && *env) {
    fixed_threshold_ = true;
    threshold_ = std::max<int64_t>(0, std::atoll(env));
  }
  if (m_.backend() == Backend::jit_strict) {  // strict: every instruction natively
    fixed_threshold_ = true;
    threshold_ = 0;
  }
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

// An instruction touching at least this many elements splits across the worker threads, into
// kPartsPerThread parts per thread, which the threads take as they come free (WorkerPool::run):
// on a shared machine, a thread the OS has not scheduled then delays only its last part.
constexpr int64_t kSplitElements = int64_t{1} << 16;
constexpr int kPartsPerThread = 4;

int64_t walk_elements(const Walk& w) { return w.n[0] * w.n[1] * w.n[2] * w.n[3]; }
const Walk& walk_of(const MapShape& s) { return s.walk; }
const Walk& walk_of(const ReduceShape& s) { return s.walk; }
const Walk& walk_of(const RowShape& s) { return s.data_walk; }
int64_t touched_elements(const MapShape& s) { return walk_elements(s.walk); }
int64_t touched_elements(const ReduceShape& s) { return walk_elements(s.walk) * s.runs * s.group; }
int64_t touched_elements(const RowShape& s) { return walk_elements(s.data_walk); }
// The walk dim a shape splits along: dim 0 (partitions, for on-chip operands), which every
// body's per-row state (columns, folds, scans) is indexed by. A map whose dim 0 is a single row
// (an HBM operand's walk, say a DMA's [1, 1, partitions, columns]) splits along its outermost
// dim of more than one index instead, when its elements are independent of one another.
int split_dim(const MapShape& s) {
  const bool elements_apart = s.fold_op < 0 && s.kind != MapKind::scan && s.kind != MapKind::cumulative &&
                              s.kind != MapKind::gather;
  if (s.walk.n[0] > 1 || !elements_apart) return 0;
  for (int d = 1; d < kWalkDims; ++d)
    if (s.walk.n[d] > 1) return d;
  return 0;
}
int split_dim(const ReduceShape&) { return 0; }
int split_dim(const RowShape&) { return 0; }

// Each index of the split dim writes its own dst elements unless dst does not move along it (a
// stride-0 dim): then they overwrite one another in order, and that must stay on one thread.
template <class Shape>
bool rows_write_apart(const Shape& s, int d) {
  return s.dst.step[d] != 0;
}

// Splits a shape by its walk's split_dim into up to kPartsPerThread x `threads` parts of whole
// indices of that dim (at most two distinct part shapes to compile). `piece(shape, d, r0, n,
// offsets)` returns the part's shape and its operands' byte offsets. Only for bodies whose split
// indices are independent: then the bytes are the same for any split. Splitting the innermost
// dim keeps parts a multiple of kInnerChunk elements, so each part's loop stays whole vectors.
constexpr int64_t kInnerChunk = 256;
template <class Shape, class Piece>
std::vector<Part> row_parts(const std::string& bytes, int threads, int64_t scratch_floats, Piece&& piece) {
  Shape s;
  std::memcpy(&s, bytes.data(), sizeof s);
  const Walk& w = walk_of(s);
  const int d = split_dim(s);
  const int64_t rows = w.n[d];
  const int64_t count = touched_elements(s) < kSplitElements || !rows_write_apart(s, d) || threads <= 1
                            ? 1
                            : std::min<int64_t>(int64_t{threads} * kPartsPerThread, rows);
  if (count <= 1) return {Part{bytes, {0, 0, 0}, scratch_floats}};
  int64_t chunk = (rows + count - 1) / count;
  if (d == kWalkDims - 1) chunk = (chunk + kInnerChunk - 1) / kInnerChunk * kInnerChunk;
  std::vector<Part> parts;
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    Part part{{}, {0, 0, 0}, scratch_floats, d == 0 ? r0 : 0};
    Shape p = piece(s, d, r0, std::min(chunk, rows - r0), part.offset);
    part.shape = bytes_of(p);
    parts.push_back(std::move(part));
  }
  return parts;
}

// Element-wise (every element alone; row folds per row), reductions (every dst element alone)
// and per-partition row statistics (every partition alone) split by rows.
std::vector<Part> row_parts_of(const std::string& body, const std::string& shape, int64_t scratch_floats, int threads) {
  if (body == std::string_view("knit_map_body"))
    return row_parts<MapShape>(shape, threads, scratch_floats,
                               [](MapShape s, int d, int64_t r0, int64_t n, int64_t* off) {
                                 off[0] = r0 * s.dst.step[d], off[1] = r0 * s.a.step[d], off[2] = r0 * s.b.step[d];
                                 s.affine_offset += r0 * s.affine_step[d];
                                 s.walk.n[d] = n;
                                 return s;
                               });
  if (body == std::string_view("knit_reduce_body"))
    return row_parts<ReduceShape>(shape, threads, scratch_floats,
                                  [](ReduceShape s, int, int64_t r0, int64_t n, int64_t* off) {
                                    off[0] = r0 * s.dst.step[0], off[1] = r0 * s.data.step[0];
                                    s.walk.n[0] = n;
                                    return s;
                                  });
  if (body == std::string_view("knit_row_body"))
    return row_parts<RowShape>(
        shape, threads, scratch_floats, [](RowShape s, int, int64_t r0, int64_t n, int64_t* off) {
          off[0] = r0 * s.dst.step[0], off[1] = r0 * s.data.step[0], off[2] = r0 * s.vals.step[0];
          s.data_walk.n[0] = s.dst_walk.n[0] = n;
          s.first_row += r0;
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
    parts.push_back({bytes_of(piece),
                     {n0 * mm.dst.step[1], 0, n0 * mm.moving.step[1]},
                     matmul_scratch_floats(piece.K, piece.M, piece.N)});
  }
  return parts;
}

}  // namespace

bool NativeExecutor::warm(const Instruction& inst) {
  if (hot_) return true;
  for_each_view(inst, [&](const char*, const View& v) { work_ += v.num_elements(); });
  if (work_ < threshold_) {
    ++interpreted;  // the reference executors run it
    return false;
  }
  hot_ = true;
  prepare();
  return true;
}

bool NativeExecutor::run(const Instruction& inst) {
  if (bool ran = false; run_forwarding(inst, m_.current_pc(), ran)) return ran;
  // By design, not a fallback: which columns an .indirect() view touches is read per element.
  if (has_column_indirection(inst)) {
    ++interpreted;
    ++indirect_compute;
    return false;
  }
  if (const auto* op = std::get_if<NcMatmulMx>(&inst.op)) {
    if (!warm(inst)) return false;
    matmul_mx(*op);
    ++native;
    return true;
  }
  // The random-number instructions advance each lane's generator one draw at a time: the
  // reference executors run them on every backend (plan_random.cpp), so both give the same bytes.
  if (ir::draws_random(inst.opcode())) {
    ++interpreted;
    return false;
  }
  if (const auto* op = std::get_if<DmaCompute>(&inst.op)) return run_dma_compute(inst, *op);
  if (const auto* op = std::get_if<NcStreamShuffle>(&inst.op)) return run_shuffle(inst, *op);
  if (const auto* op = std::get_if<NcMatchReplace8>(&inst.op); op && op->dst_idx) return run_match_replace8(inst, *op);
  if (const auto* op = std::get_if<DmaCopy>(&inst.op); op && (op->src.index_view() || op->dst.index_view()))
    return run_rows(inst, op->dst.index_view() ? op->dst : op->src, {inst}, op->oob_mode, false, true);
  Plan p;
  if (const char* why = plan(inst, p)) {
    // Register, grid and multi-core synchronization instructions move no tensor data of their own
    // (Machine::run_cores moves sendrecv's between the cores): nothing to compile, nothing to report.
    if (!moves_tensor_data(inst.opcode())) {
      ++interpreted;
      return false;
    }
    return refuse(inst, {why});
  }
  if (std::holds_alternative<SequenceBounds>(inst.op) && !segment_ids_valid(p))
    return refuse(inst, {"a segment id is not a non-negative integer up to 2^24", true});  // the reference raises
  if (!warm(inst)) return false;
  if (const Refusal why = execute(p); why.reason) return refuse(inst, why);
  ++native;
  return true;
}

bool NativeExecutor::run_forwarding(const Instruction& inst, size_t pc, bool& ran) {
  // Machine::execute_at's instruction (concrete): the body's at `pc`, same opcode.
  if (forward_to_.empty() || inst.opcode() != m_.kernel().body[pc].opcode()) return false;
  if (auto it = forward_to_.find(pc); hot_ && it != forward_to_.end()) {
    const auto& op = std::get<DmaCopy>(inst.op);
    Plan p;
    if (plan(inst, p) || !m_.memory_of(op.src)->bytes.borrowed()) return false;
    if (execute(p, /*move_data=*/false).reason) return false;  // nothing touched: run it as usual
    auto skipped = std::make_shared<SkippedCopy>(SkippedCopy{inst});
    for (size_t reader : it->second) pending_[reader].push_back(skipped);
    ++forwarded;
    ++native;
    return ran = true;
  }
  auto waiting = pending_.find(pc);
  if (waiting == pending_.end()) return false;
  if (has_column_indirection(inst)) {  // the reference executors run it: they read the tile
    copy_pending(pc);
    return false;
  }
  Instruction reader = inst;
  bool substituted = true;
  for (const auto& copy : waiting->second) {
    const auto& op = std::get<DmaCopy>(copy->inst.op);
    substituted = substituted && substitute_view(reader, op.dst, op.src);
  }
  Plan p;
  if (substituted && !plan(reader, p) && !execute(p).reason) {
    pending_.erase(waiting);
    ++native;
    return ran = true;
  }
  copy_pending(pc);  // then the reader runs as it is
  return false;
}

void NativeExecutor::copy_pending(size_t pc) {
  auto waiting = pending_.find(pc);
  if (waiting == pending_.end()) return;
  const auto copies = std::move(waiting->second);
  pending_.erase(waiting);
  for (const auto& copy : copies) {
    if (copy->copied) continue;
    Plan p;
    if (plan(copy->inst, p) || execute(p).reason) internal_error("a forwarded dma_copy could not run after all");
    copy->copied = true;
    --forwarded;
  }
}

bool NativeExecutor::refuse(const Instruction& inst, Refusal why) {
  if (!why.diagnostic) {
    if (m_.backend() != Backend::jit_fallback)
      m_.fail("jit-unsupported", std::string(inst.opcode_name()) + " cannot run on the native path: " + why.reason +
                                     ". KNIT_BACKEND=jit-fallback runs such instructions on the reference executors "
                                     "(with a warning; listed in Compiled.last_run[\"fallbacks\"]), "
                                     "KNIT_BACKEND=reference runs every instruction there");
    std::string line = inst.loc.file + ":" + std::to_string(inst.loc.line) + ": " + std::string(inst.opcode_name()) +
                       ": " + why.reason;
    if (std::find(fallbacks.begin(), fallbacks.end(), line) == fallbacks.end()) fallbacks.push_back(std::move(line));
  }
  ++interpreted;
  return false;
}

namespace {

// The shape of a call after the first when a map with a row fold or a scan walks outer dims: its
// fold or carry goes on from the row's so far (MapShape::fold_continues); empty when there is none.
std::string continued_fold(const char* body, const std::string& shape, const std::vector<OuterDim>& outer) {
  if (outer.empty() || body != std::string_view("knit_map_body")) return {};
  MapShape s;
  std::memcpy(&s, shape.data(), sizeof s);
  if (s.fold_op < 0 && s.kind != MapKind::scan && s.kind != MapKind::cumulative) return {};
  s.fold_continues = 1;
  return bytes_of(s);
}

// Calls f(offset) once per index of the outer dims (offset: each operand's byte offset there),
// the innermost fastest; once with zeros when there are none.
template <class F>
void for_each_outer(const std::vector<OuterDim>& outer, F&& f) {
  const size_t ops = outer.empty() ? 0 : outer[0].step.size();
  std::vector<int64_t> index(outer.size(), 0), offset(ops, 0);
  while (true) {
    f(offset);
    size_t d = 0;
    for (; d < outer.size(); ++d) {
      for (size_t i = 0; i < ops; ++i) offset[i] += outer[d].step[i];
      if (++index[d] < outer[d].n) break;
      for (size_t i = 0; i < ops; ++i) offset[i] -= outer[d].step[i] * outer[d].n;
      index[d] = 0;
    }
    if (d == outer.size()) return;
  }
}

}  // namespace

namespace {

// Which inputs an output overlaps other than element for element (those are read from a snapshot
// taken before anything is written, as the reference reads every input before writing); an
// output may be an input exactly (element-wise in place). Returns why not natively, or null.
const char* overlapped_inputs(const NativeExecutor::Plan& p, Memory* const* mem, std::array<bool, 3>& overlapped) {
  for (size_t i = 0; i < p.ops.size(); ++i)
    for (size_t j = 0; j < p.ops.size(); ++j) {
      const Operand& w = p.ops[i];
      const Operand& r = p.ops[j];
      if (!w.written || r.written || mem[i] != mem[j]) continue;
      if (!may_overlap(w, r)) continue;
      bool same = w.layout.base == r.layout.base && w.esize == r.esize &&
                  std::equal(w.step, w.step + kWalkDims, r.step) && std::equal(w.n, w.n + kWalkDims, r.n);
      for (const OuterDim& d : p.outer) same = same && d.step[i] == d.step[j];
      if (same && p.body == std::string_view("knit_map_body")) continue;
      if (j >= overlapped.size()) return "its output overlaps an input other than element for element";
      overlapped[j] = true;
    }
  return nullptr;
}

std::vector<float> bits_as_floats(const std::vector<uint32_t>& bits) {
  std::vector<float> v(bits.size());
  std::memcpy(v.data(), bits.data(), bits.size() * 4);
  return v;
}

}  // namespace

NativeExecutor::Refusal NativeExecutor::check_gather_indices(const Plan& p) {
  const Instruction& inst = *p.inst;
  if (const auto* op = std::get_if<NcNGather>(&inst.op)) {
    // Every index inside data's free elements, or the reference raises naming the first that is not.
    Tile indices = m_.tile(op->indices, "indices");
    const int64_t F = op->data.num_elements() / std::max<int64_t>(1, p.partitions);
    for (int64_t i = 0; i < indices.size(); ++i)
      if (const int64_t ix = indices.read_int(i); ix < 0 || ix >= F) return {"an index is out of range", true};
  }
  if (const auto* op = std::get_if<LocalGather>(&inst.op)) {
    // Each group of 16 partitions' index list (the index slice read partition-fastest), expanded to
    // the element every dst element reads; an index reaching past src_buffer's free elements goes
    // to the reference to raise.
    Tile index = m_.tile(op->index, "index");
    const int64_t P = p.partitions, E = op->num_elem_per_idx;
    const int64_t row = p.ops[0].n[1] * p.ops[0].n[2] * p.ops[0].n[3], valid = row / std::max<int64_t>(1, E);
    const int64_t F = op->src_buffer.num_elements() / std::max<int64_t>(1, P);
    gather_index_.resize(static_cast<size_t>(P * row));
    for (int64_t c = 0; c < P / 16; ++c)
      for (int64_t k = 0; k < valid; ++k) {
        const int64_t ix = index.read_int(index.at(16 * c + k % 16, k / 16));
        if (ix < 0 || ix + E > F) return {"an index is out of range", true};
        for (int64_t q = 16 * c; q < 16 * (c + 1); ++q)
          for (int64_t e = 0; e < E; ++e) gather_index_[q * row + k * E + e] = static_cast<int32_t>(ix + e);
      }
  }
  return {};
}

// A predicated copy writes only the selected elements, which alone change state. When the bulk
// flag update would not be exact for the whole dst (part of it never written, or holding matmul
// results), the selected elements are found first (before anything is written, as the reference
// does) into `selected`, to be marked one by one afterwards; returns whether they were.
bool NativeExecutor::select_predicated(const Plan& p, const Memory& dst, std::vector<int64_t>& selected) {
  if (const auto* nz = std::get_if<NonzeroWithCount>(&p.inst->op)) {  // writes partitions 0, 16, .. only
    if (!dst.tracks_init() || all_flags_are(dst.init, p.ops[0], 1)) return false;
    const Tile out = m_.tile(nz->dst, "dst");
    for (int64_t q = 0; q < out.P; q += 16)
      for (int64_t j = 0; j < out.F; ++j) selected.push_back(out.at(q, j));
    return true;
  }
  const auto* op = std::get_if<TensorCopyPredicated>(&p.inst->op);
  if (!op) return false;
  const bool mark_selected = (dst.tracks_init() && !all_flags_are(dst.init, p.ops[0], 1)) ||
                             (dst.tracks_matmul() && !all_flags_are(dst.mm_written, p.ops[0], 0)) ||
                             holds_poison(dst, p.ops[0]);
  if (mark_selected) {
    const Tile predicate = m_.tile(op->predicate, "predicate");
    for (int64_t i = 0; i < predicate.size(); ++i)
      if ((predicate.read(i) != 0.0f) != op->reverse_pred) selected.push_back(i);
  }
  return mark_selected;
}

// A matmul's accumulation is decided per element by the PSUM state. When it is not the same for
// the whole dst (or adds to PSUM no matmul wrote, which warns), `per_element`: the K-sum runs
// natively into a dense buffer and the reference's own write_matmul_result adds or stores each
// element. Otherwise `add_flag` is the body's run-time accumulate flag (shapes.h).
NativeExecutor::Refusal NativeExecutor::matmul_accumulation(const Plan& p, const Memory& dst,
                                                            std::vector<float>& add_flag, bool& per_element) {
  const auto& op = std::get<NcMatmul>(p.inst->op);
  if (!dst.tracks_matmul()) return {"its dst is not in PSUM"};
  const bool written = all_flags_are(dst.mm_written, p.ops[0], 1);
  const bool fresh = all_flags_are(dst.mm_written, p.ops[0], 0);
  bool add = false;
  if (op.accumulate == Accumulate::on) add = true;
  else if (op.accumulate == Accumulate::auto_) add = written;
  // Adding to poison: the reference's per-element write reads it, and the sum is poison.
  per_element = (add && !written) || (op.accumulate == Accumulate::auto_ && !written && !fresh) ||
                (op.accumulate != Accumulate::off && holds_poison(dst, p.ops[0]));
  add_flag = {add && !per_element ? 1.0f : 0.0f};
  return {};
}

// The per-partition operand columns of the instruction's body, read after its tiles as the
// reference executors read them.
void NativeExecutor::scalar_columns(const Instruction& inst, int64_t P, std::vector<float> (&col)[2]) {
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
  } else if (const auto* op = std::get_if<TensorScalarCumulative>(&inst.op)) {
    col[0] = m_.column(op->imm0, P, "imm0");
    col[1] = cumulative_start(m_, *op, P);
  } else if (const auto* op = std::get_if<Activate2>(&inst.op)) {
    activate2_affine(m_, *op, P, col);
  } else if (const auto* op = std::get_if<Exponential>(&inst.op)) {
    col[0] = std::vector<float>(static_cast<size_t>(P), 1.0f);  // unit scale
    col[1] = exponential_bias(m_, *op, P);
  } else if (const std::optional<Activation> activation = activation_of(inst)) {
    col[0] = m_.column(activation->scale, P, "scale");
    col[1] = activation->bias.is_none() ? std::vector<float>(P, 0.0f) : m_.column(activation->bias, P, "bias");
  }
}

// The accumulator updates and reduce_res read-outs of the instructions with row folds.
void NativeExecutor::finish_folds(const Instruction& inst, const std::vector<float>& folds, int64_t P) {
  if (const std::optional<Activation> activation = activation_of(inst))
    finish_activation(m_, *activation, folds.data(), P);
  if (const auto* op = std::get_if<TensorScalarReduce>(&inst.op)) finish_tensor_scalar_reduce(m_, *op, folds.data(), P);
  if (const auto* op = std::get_if<Exponential>(&inst.op)) finish_exponential(m_, *op, folds.data(), P);
  if (std::holds_alternative<TensorScalarCumulative>(inst.op)) finish_cumulative(m_, folds.data(), P);
  if (const auto* op = std::get_if<Activate2>(&inst.op)) finish_activate2(m_, *op, folds.data(), P);
  if (const auto* op = std::get_if<SelectReduce>(&inst.op))
    finish_vector_reduce(m_, op->reduce_cmd, op->reduce_op, folds.data(), P, op->reduce_res);
  if (const auto* op = std::get_if<RangeSelect>(&inst.op))
    finish_vector_reduce(m_, op->reduce_cmd, op->reduce_op, folds.data(), P, op->reduce_res);
}

NativeExecutor::Refusal NativeExecutor::execute(const Plan& p, bool move_data) {
  const Instruction& inst = *p.inst;
  Memory* mem[4] = {};
  for (size_t i = 0; i < p.ops.size(); ++i) mem[i] = m_.memory_of(*p.ops[i].view);
  // Reads of never-written bytes: the reference executor names the element (or warns).
  for (size_t i = 0; i < p.ops.size(); ++i)
    if (!p.ops[i].written && reads_unwritten(*mem[i], p.ops[i])) return {why::unwritten_read, true};
  std::array<bool, 3> overlapped{};
  if (const char* why = overlapped_inputs(p, mem, overlapped)) return {why};
  if (const Refusal why = check_gather_indices(p); why.reason) return why;
  std::vector<int64_t> selected;
  const bool mark_selected = select_predicated(p, *mem[0], selected);
  std::vector<float> col[2];  // per-partition operand columns (the matmul body: its accumulate flag)
  const bool by_matmul = std::holds_alternative<NcMatmul>(inst.op);
  bool per_element = false;
  if (by_matmul)
    if (const Refusal why = matmul_accumulation(p, *mem[0], col[0], per_element); why.reason) return why;
  const int64_t P = p.partitions;
  std::vector<float> folds(static_cast<size_t>(P), 0.0f);
  scalar_columns(inst, P, col);
  std::array<uint8_t*, 3> bases{};
  for (size_t i = 0; i < p.ops.size() && i < bases.size(); ++i)
    bases[i] = overlapped[i] ? snapshot(snapshots_[i], p.ops[i], *mem[i]) : mem[i]->bytes.data() + p.ops[i].layout.base;
  if (std::holds_alternative<LocalGather>(inst.op)) bases[1] = reinterpret_cast<uint8_t*>(gather_index_.data());
  if (!move_data) {
    // A forwarded copy (forward_note): its reader reads the source instead.
  } else if (per_element) {
    MatmulShape mm;
    std::memcpy(&mm, p.shape.data(), sizeof mm);
    sum_into_psum(mm, bases[1], bases[2], *p.ops[0].view, std::get<NcMatmul>(inst.op).accumulate);
  } else {
    const std::string continued = continued_fold(p.body, p.shape, p.outer);
    bool first = true;
    for_each_outer(p.outer, [&](const std::vector<int64_t>& offset) {
      std::array<uint8_t*, 3> at = bases;
      for (size_t i = 0; i < at.size() && i < offset.size(); ++i)
        if (at[i]) at[i] += offset[i];
      dispatch(p.body, first || continued.empty() ? p.shape : continued, p.scratch_floats, at,
               {&col[0], &col[1], &folds});
      first = false;
    });
  }
  if (mark_selected) {
    Tile dst = m_.tile(*p.ops[0].view, "dst");
    for (int64_t i : selected) dst.mark_written(i, false);
  }
  for (size_t i = 0; i < p.ops.size() && !mark_selected && !per_element; ++i) {  // written ones first
    if (!p.ops[i].written) break;
    mark_written(*mem[i], p.ops[i], by_matmul);
  }
  finish_folds(inst, folds, P);
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
  mm.k_rows = 1;
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
  std::vector<float> s = dequantize_mx(stat, stat_scale), v = dequantize_mx(mov, mov_scale);
  sum_into_psum(mx_sum_shape(op), reinterpret_cast<uint8_t*>(s.data()), reinterpret_cast<uint8_t*>(v.data()), op.dst,
                op.accumulate);
}

void NativeExecutor::sum_into_psum(MatmulShape mm, uint8_t* stationary, uint8_t* moving, const View& dst,
                                   Accumulate accumulate) {
  mm.dst = Access{static_cast<int32_t>(DType::float32), 0, {4 * mm.N, 4, 0, 0}};  // dense [M, N]
  std::vector<float> partial(static_cast<size_t>(mm.M * mm.N)), overwrite{0.0f};
  dispatch("knit_matmul_body", bytes_of(mm), matmul_scratch_floats(mm.K, mm.M, mm.N),
           {reinterpret_cast<uint8_t*>(partial.data()), stationary, moving}, {&overwrite, nullptr, nullptr});
  Tile psum = m_.tile(dst, "dst");
  write_matmul_result(m_, psum, partial, accumulate);
}

void NativeExecutor::start() {
  forward_to_ = forwarded_copies(m_.kernel());
  // The kernel's static element work (each data instruction once; loops traced into the body
  // count once per trace-time iteration): above the threshold, compile everything now.
  int64_t estimate = 0;
  for (const Instruction& inst : m_.kernel().body)
    for_each_view(inst, [&](const char*, const View& v) { estimate += v.num_elements(); });
  // The bodies it needs (planning every instruction): for the cost model, or to compile now.
  std::vector<codegen::SpecializeRequest> requests;
  const int64_t dynamic = !fixed_threshold_ || estimate >= threshold_ ? static_requests(requests) : 0;
  if (!fixed_threshold_) {
    const codegen::Specializer::Pending pending = jit_.pending(requests);
    std::string shapes = std::to_string(dynamic);
    for (const codegen::SpecializeRequest& r : requests) shapes += '\0' + r.body + '\0' + r.constant;
    const uint64_t key = std::hash<std::string>{}(shapes);
    // Dynamic instances' bodies are unknown until they run: counted as built.
    threshold_ = std::max<int64_t>(
        0, break_even_work(requests, pending, dynamic, codegen::knit_threads()) - interpreted_work(key));
    if (estimate < threshold_) add_interpreted_work(key, estimate);
  }
  work_estimate = estimate;
  break_even = threshold_;
  if (estimate >= threshold_) {
    hot_ = true;
    compile(requests);
  }
}

void NativeExecutor::prepare() {
  std::vector<codegen::SpecializeRequest> requests;
  static_requests(requests);
  compile(requests);
}

int64_t NativeExecutor::static_requests(std::vector<codegen::SpecializeRequest>& requests) {
  int64_t dynamic_instructions = 0;
  auto request = [&](const Plan& p) {
    for (const std::string& shape : {p.shape, continued_fold(p.body, p.shape, p.outer)})
      if (!shape.empty())
        for (const Part& part : parts_of(p.body, shape, p.scratch_floats, WorkerPool::instance().threads()))
          requests.push_back({p.body, part.shape});
  };
  for (const Instruction& inst : m_.kernel().body) {
    bool dynamic = false;
    for_each_view(inst, [&](const char*, const View& v) { dynamic = dynamic || !v.is_static(); });
    if (dynamic) {
      dynamic_instructions += moves_tensor_data(inst.opcode());
      continue;
    }
    Plan p;
    if (const auto* dc = std::get_if<DmaCompute>(&inst.op)) {
      std::vector<Instruction> stages;
      std::vector<Plan> plans;
      if (!plan_dma_compute(inst, *dc, stages, plans))
        for (const Plan& sp : plans) request(sp);
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
  // A forwarded copy's reader runs on the copies' sources (forward_note).
  std::map<size_t, Instruction> readers;
  for (const auto& [copy_at, readers_at] : forward_to_) {
    const auto& op = std::get<DmaCopy>(m_.kernel().body[copy_at].op);
    for (size_t reader_at : readers_at) {
      Instruction& reader = readers.try_emplace(reader_at, m_.kernel().body[reader_at]).first->second;
      substitute_view(reader, op.dst, op.src);
    }
  }
  for (const auto& [at, reader] : readers) {
    bool dynamic = false;
    for_each_view(reader, [&](const char*, const View& v) { dynamic = dynamic || !v.is_static(); });
    Plan p;
    if (!dynamic && !plan(reader, p)) request(p);
  }
  std::sort(requests.begin(), requests.end(),
            [](const auto& a, const auto& b) { return std::tie(a.body, a.constant) < std::tie(b.body, b.constant); });
  requests.erase(std::unique(requests.begin(), requests.end(),
                             [](const auto& a, const auto& b) { return a.body == b.body && a.constant == b.constant; }),
                 requests.end());
  return dynamic_instructions;
}

void NativeExecutor::compile(const std::vector<codegen::SpecializeRequest>& requests) {
  if (requests.empty()) return;
  const auto fns = jit_.compile(requests);
  for (size_t i = 0; i < requests.size(); ++i)
    compiled_.emplace(compiled_key(requests[i].body, requests[i].constant), reinterpret_cast<void*>(fns[i]));
}

}  // namespace knit::sim
