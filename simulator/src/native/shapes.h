// Instruction shapes of the native (JIT) path: plain structs whose bytes are both the key of a
// compiled body and the constant the JIT specializes that body on (native/bodies.cpp, compiled
// to LLVM bitcode at build time). Everything here is static per instruction shape: extents,
// byte steps, dtypes, operators. Only base addresses and per-partition scalar columns are
// passed at run time, so one compiled body serves every dynamic instance of an instruction.
//
// Iteration: a walk over kWalkDims nested dims (outermost first, unused leading dims have
// extent 1), dim 0 being the partition dim for compute instructions. Each operand steps through
// memory by its own byte step per walk dim (0 = the same element, a broadcast).
#pragma once

#include <cstdint>

namespace knit::sim::native {

constexpr int kWalkDims = 4;

struct Walk {
  int64_t n[kWalkDims];
};

struct Access {
  int32_t dtype;  // ir::DType
  int32_t unused;
  int64_t step[kWalkDims];  // bytes per index of each walk dim
};

// Element-wise instructions: dst = f(a, b, column0[p], column1[p]), optionally with a row fold.
enum class MapKind : int32_t {
  copy,                // dst = a (raw bits when the dtypes match, else decode / encode)
  tensor_tensor,       // dst = a op0 b (fp32)
  tensor_tensor_bits,  // bit-vector op0 on 32-bit patterns
  tensor_tensor_int,   // GpSimd's exact int32/uint32 path
  tensor_scalar,       // dst = (a op0 col0) op1 col1, reverse flags swap operands
  tensor_scalar_bits,
  scalar_tensor_tensor,  // dst = (a op0 col0) op1 b
  activation,            // dst = act0(a * col0 [+ col1]), row fold of the fp32 results with fold_op
  activation_slope,      // activation with prelu's slope per partition: b's element (p, 0) (activate2)
  tensor_scalar_fold,    // dst = a op0 col0, row fold with fold_op (tensor_scalar_reduce)
  fill,                  // dst = fill_bits (memset; no input)
  iota,                  // dst = the affine value, stored like an integer (no input)
  affine_select,         // dst = op0(float(affine value), 0) ? a : imm (op0 a comparison)
  copy_predicated,       // where (a != 0) xor reverse0: dst = b; elsewhere dst is not written
  fill_predicated,       // where (a != 0) xor reverse0: dst = imm; elsewhere dst is not written
  select_reduce,         // dst = (a != 0) xor reverse0 ? b : col0, row fold with fold_op
  range_select,          // i = alpha + float(affine value); dst = op0(i, col0) && op1(i, col1) ? a : imm,
                         // row fold with fold_op
  scan,                  // carry = col0 at each row's start; dst = carry = (a op0 carry) op1 b, with the
                         // reverse flags (tensor_tensor_scan: a left scan along each partition's row)
  cumulative,            // carry = col1 at each row's start; dst = carry = (a op0 col0) op1 carry
                         // (tensor_scalar_cumulative); each row's last carry is left in columns[2]
  gather,                // dst = the bits of b's element number a (an integer) in the walk row's
                         // partition: b + i0 * b.step[0] + a * gather_step (nc_n_gather; the executor
                         // checks every index first)
};

struct MapShape {
  Walk walk;
  Access dst, a, b;
  MapKind kind;
  int32_t op0, op1;  // ir::AluOp, or ir::ActFunc for activation's op0
  int32_t reverse0, reverse1;
  int32_t has_bias;    // activation: add column1
  int32_t fold_op;     // ir::AluOp of the row fold, or -1 for none
  float alpha;         // activation's prelu slope; range_select's range_start
  uint32_t fill_bits;  // fill: the bit pattern of every dst element
  float imm;           // affine_select's value of the elements not selected, fill_predicated's, range_select's on_false
  // A row fold (or a scan's carry) that goes on from columns[2][p], the row's so far, instead of
  // starting at the row's first value (or `initial`): the executor calls the body once per index
  // of walk dims beyond its four (Plan::outer), and every call after the first continues.
  int32_t fold_continues;
  // A DMA into HBM: its contiguous rows are stored with non-temporal stores (copy_rows). Also
  // keeps the struct free of padding (its bytes are a cache key).
  int32_t stream_dst;
  // iota / affine_select: value(i0..i3) = affine_offset + sum_d i_d * affine_step[d], the GpSimd
  // engine's int32 index (offset + p * channel_multiplier + the pattern's steps), walked like an
  // operand whose "bytes" are index units.
  int64_t affine_offset;
  int64_t affine_step[kWalkDims];
  int64_t gather_step;  // gather: bytes between b's consecutive free elements
};
// Run-time arguments: data[0] = dst, data[1] = a, data[2] = b (or null);
// columns[0], columns[1] = per-partition scalars (fp32 values, or bit patterns for the bit-vector
// kinds), columns[2] = per-partition row folds out (fp32), each indexed by walk dim 0.

// Reductions: each dst element folds `group` data elements (tensor_reduce: over trailing free
// dims).
struct ReduceShape {
  Walk walk;  // the kept dims (dst's walk)
  Access dst, data;
  int64_t group;       // elements of one run of a group
  int64_t group_step;  // data byte step inside a run
  int64_t runs;        // runs per group (the reduced dims merge into at most two), folded in order
  int64_t run_step;    // data byte step between runs
  int32_t op;          // ir::AluOp
  int32_t bits;        // bit-vector fold
  int32_t negate;
  int32_t average;  // divide the fold by its element count (tensor_partition_reduce's average)
};
// data[0] = dst, data[1] = data. tensor_partition_reduce is one too: the walk is the free dims,
// a group is one element's column across the partitions (group_step = the partition stride).

// Per-partition row statistics: each partition's data row (its free dims, row-major) is decoded
// to fp32 into scratch, reduced to a few values, and those are stored to dst's free elements.
// bn_stats decodes this many partitions' rows into scratch at a time and sums them side by side.
constexpr int64_t kMomentRows = 8;

enum class RowKind : int32_t {
  bn_stats,            // (count, mean, m2) of the even-, then of the odd-indexed elements: 6 values
  bn_aggr,             // (mean, variance) combining the row's (count, mean, m2) triples: 2 values
  max8,                // the 8 values that rank first (top8): 8 values
  find_index8,         // where each of the partition's 8 vals occurs (find_index8): 8 integers, all ones
                       // when missing
  match_index8,        // nc_match_replace8's dst_idx (search.h's match_replace8): 8 integers, all ones
                       // when missing
  match_replace8,      // nc_match_replace8's dst: data with the positions vals claims set to imm
  nonzero_with_count,  // the nonzero positions, padding and count, in partitions first_row + p = 0 mod 16
  sequence_bounds,     // one partition's run starts, then ends (dst [1, 2, n])
  topk,                // per 16-partition group (walk row): the K largest of n snake values
};

struct RowShape {
  Walk data_walk;  // n[0] = partitions, n[1..3] = data's free dims
  Walk dst_walk;   // n[0] = partitions, n[1..3] = dst's free dims
  Access data, dst;
  RowKind kind;
  int32_t unused;
  Access vals;           // find_index8: step[0] per partition, step[3] per value (the first 8 are read)
  int64_t first_row;     // the instruction's row of walk row 0 (a part split off at row r0 starts there)
  int64_t imm_a, imm_b;  // nonzero_with_count: index_offset, padding_val; topk: n
  float imm;             // match_replace8: the value claimed positions get
  int32_t unused2;
};
// data[0] = dst, data[1] = data, data[2] = vals, data[3] = scratch of the data free size in floats
// (one row; more for the kinds that need it, sized by the planner). topk: data[0] = val_dst, data[1]
// = idx_dst (walked by dst_walk, addressed by `data`), data[2] = src (walked by data_walk over
// [groups, 1, columns, 16], addressed by `vals`).

// One Tensor Engine matmul: dst[M, N] (=|+=) stationary[K, M].T @ moving[K, N], each output
// the fp32 sum over k in order 0..K-1 of the fp32 products, starting from +0 (each product
// rounded before it is added: an FMA only where that is the same, bodies.cpp).
struct MatmulShape {
  int64_t K, M, N;
  Access stationary;         // step[0] per k (per k / k_rows), step[1] per m, step[2] per k % k_rows
  Access moving;             // step[0] per k (per k / k_rows), step[1] per n, step[2] per k % k_rows
  Access dst;                // step[0] per m, step[1] per n
  int32_t skip_zero_moving;  // is_transpose: products with a zero moving element are skipped
  int32_t k_rows;            // contraction rows per partition: 1, or 2 for perf_mode double_row, whose
                             // [P, 2, M] operand is the [2P, M] matrix with row 2p + j = (p, j)
};
// data[0] = dst, data[1] = stationary, data[2] = moving, data[3] = scratch of
// matmul_scratch_floats(K, M, N) floats (operands packed into padded panels, the sums, and one
// decoded operand row). columns[0][0] is nonzero to add to dst's current fp32 values, zero to
// overwrite them: the PSUM state decides this per run, so it is not compiled into the shape.
constexpr int64_t matmul_scratch_floats(int64_t K, int64_t M, int64_t N) {
  return K * (M + 8) + K * (N + 16) + M * N + (M > N ? M : N);
}

// quantize_mx: for each group of 8 partitions x 4 elements (g, w), src's 32 values become 8 packed
// words of dst (column w of partitions 8g..8g+7) and one scale (element [g, w]), by alu.cpp's
// quantize_mx_group.
struct QuantizeMxShape {
  int64_t groups;  // partitions / 8
  int64_t words;   // dst words per partition (src elements / 4)
  Access dst;      // step[0] per partition, step[1] per word
  Access scale;    // step[0] per group, step[1] per word
  Access src;      // step[0] per partition, step[1] per element
};
// data[0] = dst, data[1] = scale, data[2] = src.

}  // namespace knit::sim::native
