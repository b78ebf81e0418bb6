// Verifier rules: selects, statistics, top-8, affine index generation, cross-partition reduce and
// the GpSimd gathers (NKI ISA docs of each instruction). Semantics live in simulator/src/exec_select.cpp.
#include <cfloat>
#include <cstdint>

#include "verify_rules.h"

namespace knit::ir {

namespace {

// GpSimd never touches PSUM (NKI architecture guides), and compute operands live on-chip, so every
// GpSimd operand must be in SBUF.
void gpsimd_sbuf(const Checker& c, const View& v, const char* what) {
  c.not_psum(v, what, "the GpSimd engine cannot access PSUM");
  c.buffer_in(v, what, {Buffer::sbuf});
}

// The reduce_op/reduce_cmd pair of a VectorE accumulator reduction. load_reduce seeds the
// accumulators from an initial-value operand, which select_reduce and range_select do not have.
void vector_reduction(const Checker& c, AluOp op, ReduceCmd cmd, std::initializer_list<AluOp> allowed) {
  bool ok = false;
  for (AluOp a : allowed) ok = ok || a == op;
  if (!ok) {
    std::string names;
    for (AluOp a : allowed) names += (names.empty() ? "" : ", ") + std::string(to_string(a));
    c.fail("alu-op", "reduce_op '" + std::string(to_string(op)) + "' is not supported here; use " + names);
  }
  if (cmd == ReduceCmd::load_reduce)
    c.fail("reduce-cmd",
           "reduce_cmd=load_reduce needs an initial value operand, which this instruction does not "
           "take; use reset_reduce (or reset, then reduce)");
}

// reduce_res: an optional fp32-ish [P, 1] column next to dst.
void reduce_result(const Checker& c, const std::optional<View>& res, const View& dst) {
  if (!res) return;
  c.column(*res, "reduce_res", dst);
  if (!is_float(res->dtype))
    c.fail("dtype", "reduce_res has dtype " + std::string(to_string(res->dtype)) + " but must be a float type");
}

bool is_comparison(AluOp op) {
  return op == AluOp::equal || op == AluOp::not_equal || op == AluOp::less || op == AluOp::less_equal ||
         op == AluOp::greater || op == AluOp::greater_equal;
}

// iota / affine_select: the pattern enumerates dst's free elements (outermost first), and every
// affine value offset + p * channel_multiplier + sum_k i_k * step_k must fit the int32 the
// engine computes in (so the simulator's int64 arithmetic never differs from the hardware's).
void affine_pattern(const Checker& c, const View& dst, const Pattern& pattern, int64_t offset,
                    int64_t channel_multiplier) {
  if (pattern.size() > 4)
    c.fail("operand-shape", "pattern has " + std::to_string(pattern.size()) + " dims; at most 4 are allowed");
  __int128 count = 1, lo = offset, hi = offset;
  for (const ApDim& d : pattern) {
    if (d.num < 1) c.fail("operand-shape", "pattern dims need num >= 1, got " + std::to_string(d.num));
    count *= d.num;
    const __int128 span = static_cast<__int128>(d.step) * (d.num - 1);
    (span < 0 ? lo : hi) += span;
  }
  const __int128 pspan = static_cast<__int128>(channel_multiplier) * (c.partitions(dst) - 1);
  (pspan < 0 ? lo : hi) += pspan;
  if (count != c.free_size(dst))
    c.fail("free-size-mismatch", "the pattern covers " + std::to_string(static_cast<int64_t>(count)) +
                                     " elements per partition but dst has " + std::to_string(c.free_size(dst)));
  if (lo < INT32_MIN || hi > INT32_MAX)
    c.fail("operand",
           "the affine values offset + p * channel_multiplier + sum(i * step) leave the int32 range "
           "the GpSimd engine computes in; use smaller steps or offsets");
}

// First partition a view touches, counting an address= pin: GpSimd cores own 16-partition groups.
// nc_find_index8 / max8 read 8..16384 elements per partition.
void top8_free_size(const Checker& c, const View& v, const char* what) {
  const int64_t n = c.free_size(v);
  if (n < 8 || n > 16384)
    c.fail("free-size-limit",
           std::string(what) + " has " + std::to_string(n) + " elements per partition; the hardware needs 8 to 16384");
}

void eight_wide(const Checker& c, const View& v, const char* what, const View& like) {
  c.on_chip(v, what);
  c.same_partitions(v, what, like, "data");
  if (c.free_size(v) != 8)
    c.fail("operand-shape",
           std::string(what) + " must be [P, 8]; it has " + std::to_string(c.free_size(v)) + " elements per partition");
}

}  // namespace

void check(Checker& c, const SelectReduce& op) {
  c.on_chip(op.dst, "dst");
  c.on_chip(op.predicate, "predicate");
  c.on_chip(op.on_true, "on_true");
  c.same_tile(op.dst, "dst", op.predicate, "predicate");
  c.same_tile(op.dst, "dst", op.on_true, "on_true");
  if (c.in_psum(op.on_true) && c.in_psum(op.predicate))
    c.fail("buffer", "on_true and predicate cannot both be in psum");
  // bool (one byte, nonzero = true) as the other predicates of NKI's kernels.
  c.dtype_in(op.predicate, "predicate", {DType::bool_, DType::int8, DType::uint8, DType::int16, DType::uint16});
  if (op.on_true.dtype == DType::tfloat32 || op.on_true.dtype == DType::int32 || op.on_true.dtype == DType::uint32)
    c.fail("dtype", "on_true has dtype " + std::string(to_string(op.on_true.dtype)) +
                        "; select_reduce does not accept tfloat32, int32 or uint32");
  if (op.on_false.is_none()) c.fail("operand", "on_false is required (an fp32 scalar or a [P, 1] tile)");
  if (op.on_false.is_tile()) c.column(op.on_false.tile, "on_false", op.dst);
  reduce_result(c, op.reduce_res, op.dst);
  vector_reduction(c, op.reduce_op, op.reduce_cmd, {AluOp::maximum, AluOp::minimum, AluOp::add});
}

void check(Checker& c, const RangeSelect& op) {
  c.requires_gen(3);
  c.on_chip(op.dst, "dst");
  c.on_chip(op.on_true_tile, "on_true_tile");
  c.same_tile(op.dst, "dst", op.on_true_tile, "on_true_tile");
  if (!is_float(op.on_true_tile.dtype))
    c.fail("dtype",
           "on_true_tile has dtype " + std::string(to_string(op.on_true_tile.dtype)) + " but must be a float type");
  c.column(op.bound0, "bound0", op.dst);
  c.column(op.bound1, "bound1", op.dst);
  c.dtype_in(op.bound0, "bound0", {DType::float32});
  c.dtype_in(op.bound1, "bound1", {DType::float32});
  for (AluOp cmp : {op.comp_op0, op.comp_op1})
    if (!is_comparison(cmp) || cmp == AluOp::not_equal)
      c.fail("alu-op", "comparison '" + std::string(to_string(cmp)) +
                           "' is not supported; use equal, less, less_equal, greater or greater_equal");
  if (static_cast<float>(op.on_false_value) != -FLT_MAX)
    c.fail("operand",
           "on_false_value must be -3.4028235e38 (the most negative fp32), got " + std::to_string(op.on_false_value));
  reduce_result(c, op.reduce_res, op.dst);
  vector_reduction(c, op.reduce_op, op.reduce_cmd, {AluOp::maximum});
}

void check(Checker& c, const BnStats& op) {
  c.on_chip(op.dst, "dst");
  c.on_chip(op.data, "data");
  c.same_partitions(op.dst, "dst", op.data, "data");
  if (c.free_size(op.data) > tile_size::bn_stats_fmax)
    c.fail("free-size-limit",
           "data has " + std::to_string(c.free_size(op.data)) + " elements per partition; bn_stats takes at most " +
               std::to_string(tile_size::bn_stats_fmax) + " (nl.tile_size.bn_stats_fmax). Run bn_stats per " +
               std::to_string(tile_size::bn_stats_fmax) + "-element chunk and combine them with one bn_aggr");
  if (c.free_size(op.dst) != 6)
    c.fail("operand-shape",
           "dst must have 6 elements per partition (count, mean, var*count for the even- then "
           "the odd-indexed elements); it has " +
               std::to_string(c.free_size(op.dst)));
}

void check(Checker& c, const BnAggr& op) {
  c.on_chip(op.dst, "dst");
  c.on_chip(op.data, "data");
  c.same_partitions(op.dst, "dst", op.data, "data");
  if (c.free_size(op.data) % 3 != 0)
    c.fail("operand-shape", "data has " + std::to_string(c.free_size(op.data)) +
                                " elements per partition; bn_aggr needs (count, mean, var*count) triples");
  if (c.free_size(op.dst) != 2)
    c.fail("operand-shape",
           "dst must have 2 elements per partition (mean, variance); it has " + std::to_string(c.free_size(op.dst)));
}

void check(Checker& c, const Max8& op) {
  c.on_chip(op.src, "src");
  top8_free_size(c, op.src, "src");
  eight_wide(c, op.dst, "dst", op.src);
}

void check(Checker& c, const NcFindIndex8& op) {
  c.on_chip(op.data, "data");
  top8_free_size(c, op.data, "data");
  eight_wide(c, op.vals, "vals", op.data);
  eight_wide(c, op.dst, "dst", op.data);
  c.dtype_in(op.dst, "dst", {DType::uint32, DType::uint16});
}

void check(Checker& c, const Iota& op) {
  gpsimd_sbuf(c, op.dst, "dst");
  affine_pattern(c, op.dst, op.pattern, op.offset, op.channel_multiplier);
}

void check(Checker& c, const AffineSelect& op) {
  gpsimd_sbuf(c, op.dst, "dst");
  gpsimd_sbuf(c, op.on_true_tile, "on_true_tile");
  c.same_tile(op.dst, "dst", op.on_true_tile, "on_true_tile");
  if (!is_comparison(op.cmp_op))
    c.fail("alu-op", "cmp_op '" + std::string(to_string(op.cmp_op)) +
                         "' is not a comparison; use equal, not_equal, less, less_equal, greater or greater_equal");
  affine_pattern(c, op.dst, op.pattern, op.offset, op.channel_multiplier);
}

void check(Checker& c, const TensorPartitionReduce& op) {
  gpsimd_sbuf(c, op.dst, "dst");
  gpsimd_sbuf(c, op.data, "data");
  const AluOp o = op.op;
  if (o != AluOp::add && o != AluOp::average && o != AluOp::maximum && o != AluOp::bitwise_or &&
      o != AluOp::bitwise_and)
    c.fail("alu-op", "op '" + std::string(to_string(o)) +
                         "' cannot reduce across partitions; use add, average, maximum, bitwise_or or bitwise_and");
  if (c.partitions(op.dst) != 1)
    c.fail("operand-shape", "dst must have 1 partition (the reduction of all of data's partitions); it has " +
                                std::to_string(c.partitions(op.dst)));
  c.same_free_size(op.dst, "dst", op.data, "data");
  if (alu_class(o) == AluClass::Bitvec) {
    c.integer_dtype(op.data, "data");
    c.integer_dtype(op.dst, "dst");
  }
}

void check(Checker& c, const LocalGather& op) {
  gpsimd_sbuf(c, op.dst, "dst");
  gpsimd_sbuf(c, op.src_buffer, "src_buffer");
  gpsimd_sbuf(c, op.index, "index");
  c.dtype_in(op.index, "index", {DType::uint16});
  c.same_dtype(op.dst, "dst", op.src_buffer, "src_buffer");
  c.same_partitions(op.src_buffer, "src_buffer", op.index, "index");
  c.same_partitions(op.dst, "dst", op.src_buffer, "src_buffer");
  const int64_t P = c.partitions(op.src_buffer);
  if (P % 16 != 0 || c.start_partition(op.src_buffer) % 16 != 0 || c.start_partition(op.index) % 16 != 0 ||
      c.start_partition(op.dst) % 16 != 0)
    c.fail("operand-shape",
           "operands must cover whole 16-partition GpSimd core groups (start on a multiple of 16, "
           "span a multiple of 16 partitions); src_buffer has " +
               std::to_string(P) + " partitions");
  const int64_t E = op.num_elem_per_idx;
  if (E != 1 && E != 2 && E != 4 && E != 8 && E != 16 && E != 32)
    c.fail("operand", "num_elem_per_idx must be 1, 2, 4, 8, 16 or 32, got " + std::to_string(E));
  const int64_t per_core = 16 * c.free_size(op.index);
  const int64_t valid = op.num_valid_indices < 0 ? per_core : op.num_valid_indices;
  if (valid < 1 || valid > per_core)
    c.fail("operand", "num_valid_indices must be between 1 and the " + std::to_string(per_core) +
                          " indices each core's 16-partition index slice holds, got " + std::to_string(valid));
  if (valid > 4096)
    c.fail("free-size-limit",
           "each GpSimd core gathers at most 4096 indices; this gather uses " + std::to_string(valid) + " per core");
  if (c.free_size(op.dst) != valid * E)
    c.fail("free-size-mismatch",
           "dst has " + std::to_string(c.free_size(op.dst)) +
               " elements per partition but num_valid_indices * num_elem_per_idx = " + std::to_string(valid * E));
}

void check(Checker& c, const NcNGather& op) {
  gpsimd_sbuf(c, op.dst, "dst");
  gpsimd_sbuf(c, op.data, "data");
  gpsimd_sbuf(c, op.indices, "indices");
  c.dtype_in(op.indices, "indices", {DType::uint32});
  c.same_dtype(op.dst, "dst", op.data, "data");
  c.same_partitions(op.dst, "dst", op.data, "data");
  c.same_partitions(op.indices, "indices", op.data, "data");
  c.same_free_size(op.dst, "dst", op.indices, "indices");
}

void check(Checker& c, const NcMatchReplace8& op) {
  c.on_chip(op.data, "data");
  if (op.data.dims.size() > 3)
    c.fail("operand-shape", "data has " + std::to_string(op.data.dims.size()) + " dims; at most 3 are allowed");
  top8_free_size(c, op.data, "data");
  c.on_chip(op.dst, "dst");
  c.same_tile(op.dst, "dst", op.data, "data");
  eight_wide(c, op.vals, "vals", op.data);
  if (op.dst_idx) {
    eight_wide(c, *op.dst_idx, "dst_idx", op.data);
    c.dtype_in(*op.dst_idx, "dst_idx", {DType::uint32, DType::uint16});
  }
}

namespace {

// The GpSimd instructions that work in 16-partition core groups see partition p of a tile as
// lane p % 16 of its core only when the tile starts at a core's first partition.
void core_aligned(const Checker& c, const View& v, const char* what) {
  if (c.start_partition(v) % 16 != 0)
    c.fail("partition-offset", std::string(what) + " starts at partition " + std::to_string(c.start_partition(v)) +
                                   "; the GpSimd cores own 16-partition groups, so start it at a multiple of 16");
}

void int32_immediate(const Checker& c, int64_t value, const char* what) {
  if (value < INT32_MIN || value > INT32_MAX)
    c.fail("operand", std::string(what) + " = " + std::to_string(value) + " does not fit the int32 it is stored as");
}

}  // namespace

void check(Checker& c, const NonzeroWithCount& op) {
  c.requires_gen(3);  // NeuronCore-v3 (trn2) and newer
  gpsimd_sbuf(c, op.src, "src");
  gpsimd_sbuf(c, op.dst, "dst");
  c.dtype_in(op.src, "src", {DType::float32, DType::int32});
  c.dtype_in(op.dst, "dst", {DType::int32});
  c.same_partitions(op.dst, "dst", op.src, "src");
  if (c.free_size(op.dst) != c.free_size(op.src) + 1)
    c.fail("operand-shape", "dst must have one element more per partition than src (the count goes last): src has " +
                                std::to_string(c.free_size(op.src)) + ", dst " + std::to_string(c.free_size(op.dst)));
  core_aligned(c, op.src, "src");
  core_aligned(c, op.dst, "dst");
  int32_immediate(c, op.index_offset, "index_offset");
  int32_immediate(c, op.padding_val, "padding_val");
}

void check(Checker& c, const SequenceBounds& op) {
  gpsimd_sbuf(c, op.segment_ids, "segment_ids");
  gpsimd_sbuf(c, op.dst, "dst");
  for (const auto& [v, what] : {std::pair{&op.segment_ids, "segment_ids"}, {&op.dst, "dst"}}) {
    c.dtype_in(*v, what, {DType::float32, DType::int32});
    if (c.partitions(*v) != 1)
      c.fail("operand-shape", std::string(what) + " has " + std::to_string(c.partitions(*v)) +
                                  " partitions; sequence_bounds works on one partition");
  }
  const int64_t n = c.free_size(op.segment_ids);
  const auto& d = op.dst.dims;
  if (d.size() != 3 || d[1].num != 2 || d[2].num != n)
    c.fail("operand-shape", "dst must have shape (1, 2, " + std::to_string(n) +
                                "): the starts, then the ends, of segment_ids' " + std::to_string(n) + " elements");
}

void check(Checker& c, const Topk& op) {
  gpsimd_sbuf(c, op.src, "src");
  gpsimd_sbuf(c, op.val_dst, "val_dst");
  gpsimd_sbuf(c, op.idx_dst, "idx_dst");
  c.dtype_in(op.src, "src", {DType::bfloat16});
  c.dtype_in(op.val_dst, "val_dst", {DType::bfloat16});
  c.dtype_in(op.idx_dst, "idx_dst", {DType::uint32});
  const int64_t P = c.partitions(op.src);
  if (P % 16 != 0)
    c.fail("operand-shape",
           "src has " + std::to_string(P) + " partitions; topk reads groups of 16, so use a multiple of 16");
  core_aligned(c, op.src, "src");
  if (op.src.dims.size() != 2) c.fail("operand-shape", "src must be a 2-D [P, src_x] tile");
  if (op.n < 8 || op.n >= 65536) c.fail("operand", "n = " + std::to_string(op.n) + " is outside 8 <= n < 65536");
  const int64_t columns = (op.n + 15) / 16;
  if (c.free_size(op.src) < columns)
    c.fail("operand-shape", "src has " + std::to_string(c.free_size(op.src)) + " columns but n = " +
                                std::to_string(op.n) + " snake positions need " + std::to_string(columns));
  c.same_tile(op.val_dst, "val_dst", op.idx_dst, "idx_dst");
  c.same_partitions(op.val_dst, "val_dst", op.src, "src");
  const int64_t K = c.free_size(op.val_dst);
  if (K >= 32768 || K > op.n)
    c.fail("operand-shape", "val_dst / idx_dst keep K = " + std::to_string(K) +
                                " values per partition; K must be below 32768 and at most n = " + std::to_string(op.n));
}

}  // namespace knit::ir
