// The instruction list: one struct per ISA instruction, written once.
//
// KNIT_OPS below is the single list of instructions. From it come the Opcode enum, the
// Instruction variant, the op names, and (through each struct's `fields` method, which lists the
// operands in NKI's dst-first argument order with NKI's defaults) the printer, the parser and the
// generic operand walks used by the verifier and executors. Adding an instruction means: a struct
// here, its entry in KNIT_OPS, its rules in ir/src/verify_*.cpp and its semantics in
// simulator/src/exec_*.cpp. Semantics are documented in docs/architecture.md.
//
// Included from ir.h (needs View, Operand, IntList, Pattern).
#pragma once

#include <cfloat>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace knit::ir {

#define KNIT_FIELDS_EQ(T) bool operator==(const T&) const = default

struct DmaCopy {
  View dst, src;
  OobMode oob_mode = OobMode::error;
  DgeMode dge_mode = DgeMode::unknown;
  Engine engine = Engine::unknown;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("src", src);
    f("oob_mode", oob_mode);
    f("dge_mode", dge_mode);
    f("engine", engine);
  }
  KNIT_FIELDS_EQ(DmaCopy);
};

// dst = srcs[0] + srcs[1] + ... in fp32, one element at a time (DMA engine). With an indirect
// dst (and srcs[0] the same indirect view) it is a scatter-add into HBM rows; unique_indices
// promises no index repeats (checked when executed).
struct DmaCompute {
  View dst;
  ViewList srcs;
  AluOp reduce_op = AluOp::add;
  std::vector<double> scales;
  bool unique_indices = true;
  OobMode oob_mode = OobMode::error;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("srcs", srcs);
    f("reduce_op", reduce_op);
    f("scales", scales);
    f("unique_indices", unique_indices);
    f("oob_mode", oob_mode);
  }
  KNIT_FIELDS_EQ(DmaCompute);
};

// dst[M,N] (PSUM, fp32) = stationary[K,M].T @ moving[K,N]; see Accumulate for overwrite/add.
struct NcMatmul {
  View dst, stationary, moving;
  bool is_stationary_onezero = false, is_moving_onezero = false, is_transpose = false;
  Accumulate accumulate = Accumulate::auto_;
  IntList tile_position, tile_size;
  MatmulPerfMode perf_mode = MatmulPerfMode::none;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("stationary", stationary);
    f("moving", moving);
    f("is_stationary_onezero", is_stationary_onezero);
    f("is_moving_onezero", is_moving_onezero);
    f("is_transpose", is_transpose);
    f("accumulate", accumulate);
    f("tile_position", tile_position);
    f("tile_size", tile_size);
    f("perf_mode", perf_mode);
  }
  KNIT_FIELDS_EQ(NcMatmul);
};

struct NcTranspose {
  View dst, data;
  Engine engine = Engine::unknown;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("data", data);
    f("engine", engine);
  }
  KNIT_FIELDS_EQ(NcTranspose);
};

// dst = op(data * scale + bias); optional free-dim reduction into the ScalarE accumulators.
// `alpha` is the slope used by `prelu` (Knit extension; NKI passes it as activate2's relu_param).
struct Activation {
  View dst;
  ActFunc op = ActFunc::copy;
  View data;
  Operand bias;
  Operand scale = Operand::immediate(1.0);
  AluOp reduce_op = AluOp::bypass;
  std::optional<View> reduce_res;
  ReduceCmd reduce_cmd = ReduceCmd::idle;
  double alpha = 0.0;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("op", op);
    f("data", data);
    f("bias", bias);
    f("scale", scale);
    f("reduce_op", reduce_op);
    f("reduce_res", reduce_res);
    f("reduce_cmd", reduce_cmd);
    f("alpha", alpha);
  }
  KNIT_FIELDS_EQ(Activation);
};

struct ActivationReduce {
  View dst;
  ActFunc op = ActFunc::copy;
  View data;
  AluOp reduce_op = AluOp::add;
  View reduce_res;
  Operand bias;
  Operand scale = Operand::immediate(1.0);
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("op", op);
    f("data", data);
    f("reduce_op", reduce_op);
    f("reduce_res", reduce_res);
    f("bias", bias);
    f("scale", scale);
  }
  KNIT_FIELDS_EQ(ActivationReduce);
};

struct TensorTensor {
  View dst, data1, data2;
  AluOp op = AluOp::add;
  Engine engine = Engine::unknown;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("data1", data1);
    f("data2", data2);
    f("op", op);
    f("engine", engine);
  }
  KNIT_FIELDS_EQ(TensorTensor);
};

// dst = (data op0 operand0) op1 operand1; op1 = bypass means "no second stage".
struct TensorScalar {
  View dst, data;
  AluOp op0 = AluOp::add;
  Operand operand0;
  bool reverse0 = false;
  AluOp op1 = AluOp::bypass;
  Operand operand1;
  bool reverse1 = false;
  Engine engine = Engine::unknown;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("data", data);
    f("op0", op0);
    f("operand0", operand0);
    f("reverse0", reverse0);
    f("op1", op1);
    f("operand1", operand1);
    f("reverse1", reverse1);
    f("engine", engine);
  }
  KNIT_FIELDS_EQ(TensorScalar);
};

struct ScalarTensorTensor {
  View dst, data;
  AluOp op0 = AluOp::add;
  Operand operand0;
  AluOp op1 = AluOp::add;
  View operand1;
  bool reverse0 = false, reverse1 = false;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("data", data);
    f("op0", op0);
    f("operand0", operand0);
    f("op1", op1);
    f("operand1", operand1);
    f("reverse0", reverse0);
    f("reverse1", reverse1);
  }
  KNIT_FIELDS_EQ(ScalarTensorTensor);
};

struct TensorReduce {
  View dst;
  AluOp op = AluOp::add;
  View data;
  IntList axis;
  bool negate = false, keepdims = false;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("op", op);
    f("data", data);
    f("axis", axis);
    f("negate", negate);
    f("keepdims", keepdims);
  }
  KNIT_FIELDS_EQ(TensorReduce);
};

struct TensorPartitionReduce {
  View dst;
  AluOp op = AluOp::add;
  View data;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("op", op);
    f("data", data);
  }
  KNIT_FIELDS_EQ(TensorPartitionReduce);
};

struct TensorCopy {
  View dst, src;
  Engine engine = Engine::unknown;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("src", src);
    f("engine", engine);
  }
  KNIT_FIELDS_EQ(TensorCopy);
};

struct TensorCopyPredicated {
  View dst;
  Operand src;
  View predicate;
  bool reverse_pred = false;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("src", src);
    f("predicate", predicate);
    f("reverse_pred", reverse_pred);
  }
  KNIT_FIELDS_EQ(TensorCopyPredicated);
};

struct Memset {
  View dst;
  double value = 0;
  Engine engine = Engine::unknown;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("value", value);
    f("engine", engine);
  }
  KNIT_FIELDS_EQ(Memset);
};

// value(p, i...) = offset + p * channel_multiplier + sum_k i_k * pattern[k].step (int32).
struct Iota {
  View dst;
  Pattern pattern;
  int64_t offset = 0, channel_multiplier = 0;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("pattern", pattern);
    f("offset", offset);
    f("channel_multiplier", channel_multiplier);
  }
  KNIT_FIELDS_EQ(Iota);
};

struct AffineSelect {
  View dst;
  Pattern pattern;
  int64_t channel_multiplier = 0;
  View on_true_tile;
  double on_false_value = 0;
  AluOp cmp_op = AluOp::equal;
  int64_t offset = 0;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("pattern", pattern);
    f("channel_multiplier", channel_multiplier);
    f("on_true_tile", on_true_tile);
    f("on_false_value", on_false_value);
    f("cmp_op", cmp_op);
    f("offset", offset);
  }
  KNIT_FIELDS_EQ(AffineSelect);
};

struct SelectReduce {
  View dst, predicate, on_true;
  Operand on_false;
  std::optional<View> reduce_res;
  ReduceCmd reduce_cmd = ReduceCmd::idle;
  AluOp reduce_op = AluOp::maximum;
  bool reverse_pred = false;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("predicate", predicate);
    f("on_true", on_true);
    f("on_false", on_false);
    f("reduce_res", reduce_res);
    f("reduce_cmd", reduce_cmd);
    f("reduce_op", reduce_op);
    f("reverse_pred", reverse_pred);
  }
  KNIT_FIELDS_EQ(SelectReduce);
};

struct RangeSelect {
  View dst, on_true_tile;
  AluOp comp_op0 = AluOp::greater_equal, comp_op1 = AluOp::less;
  View bound0, bound1;
  ReduceCmd reduce_cmd = ReduceCmd::reset_reduce;
  std::optional<View> reduce_res;
  AluOp reduce_op = AluOp::maximum;
  double range_start = 0;
  double on_false_value = -static_cast<double>(FLT_MAX);
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("on_true_tile", on_true_tile);
    f("comp_op0", comp_op0);
    f("comp_op1", comp_op1);
    f("bound0", bound0);
    f("bound1", bound1);
    f("reduce_cmd", reduce_cmd);
    f("reduce_res", reduce_res);
    f("reduce_op", reduce_op);
    f("range_start", range_start);
    f("on_false_value", on_false_value);
  }
  KNIT_FIELDS_EQ(RangeSelect);
};

struct Reciprocal {
  View dst, data;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("data", data);
  }
  KNIT_FIELDS_EQ(Reciprocal);
};

struct TensorTensorScan {
  View dst, data0, data1;
  Operand initial = Operand::immediate(0.0);
  AluOp op0 = AluOp::multiply, op1 = AluOp::add;
  bool reverse0 = false, reverse1 = false;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("data0", data0);
    f("data1", data1);
    f("initial", initial);
    f("op0", op0);
    f("op1", op1);
    f("reverse0", reverse0);
    f("reverse1", reverse1);
  }
  KNIT_FIELDS_EQ(TensorTensorScan);
};

struct TensorScalarReduce {
  View dst, data;
  AluOp op0 = AluOp::add;
  Operand operand0;
  AluOp reduce_op = AluOp::add;
  std::optional<View> reduce_res;
  bool reverse0 = false;
  ReduceCmd reduce_cmd = ReduceCmd::reset_reduce;
  Operand reduce_init;
  bool reduce_res_negate = false;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("data", data);
    f("op0", op0);
    f("operand0", operand0);
    f("reduce_op", reduce_op);
    f("reduce_res", reduce_res);
    f("reverse0", reverse0);
    f("reduce_cmd", reduce_cmd);
    f("reduce_init", reduce_init);
    f("reduce_res_negate", reduce_res_negate);
  }
  KNIT_FIELDS_EQ(TensorScalarReduce);
};

struct BnStats {
  View dst, data;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("data", data);
  }
  KNIT_FIELDS_EQ(BnStats);
};

struct BnAggr {
  View dst, data;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("data", data);
  }
  KNIT_FIELDS_EQ(BnAggr);
};

struct Max8 {
  View dst, src;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("src", src);
  }
  KNIT_FIELDS_EQ(Max8);
};

struct NcFindIndex8 {
  View dst, data, vals;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("data", data);
    f("vals", vals);
  }
  KNIT_FIELDS_EQ(NcFindIndex8);
};

struct DmaTranspose {
  View dst, src;
  IntList axes;
  DgeMode dge_mode = DgeMode::unknown;
  OobMode oob_mode = OobMode::error;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("src", src);
    f("axes", axes);
    f("dge_mode", dge_mode);
    f("oob_mode", oob_mode);
  }
  // dst dim k is src dim resolved_axes()[k]; no axes means NKI's default for the rank.
  IntList resolved_axes() const {
    if (!axes.empty()) return axes;
    const size_t rank = src.dims.size();
    return rank == 2 ? IntList{1, 0} : rank == 3 ? IntList{2, 1, 0} : IntList{3, 1, 2, 0};
  }
  KNIT_FIELDS_EQ(DmaTranspose);
};

// num_valid_indices = -1 means "all indices".
struct LocalGather {
  View dst, src_buffer, index;
  int64_t num_elem_per_idx = 1, num_valid_indices = -1;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("src_buffer", src_buffer);
    f("index", index);
    f("num_elem_per_idx", num_elem_per_idx);
    f("num_valid_indices", num_valid_indices);
  }
  KNIT_FIELDS_EQ(LocalGather);
};

struct NcNGather {
  View dst, data, indices;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("data", data);
    f("indices", indices);
  }
  KNIT_FIELDS_EQ(NcNGather);
};

// Cross-partition move inside each 32-partition quadrant: dst partition q*32+i <- src partition
// q*32+shuffle_mask[i]; 255 leaves dst partition i untouched.
struct NcStreamShuffle {
  View dst, src;
  IntList shuffle_mask;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("src", src);
    f("shuffle_mask", shuffle_mask);
  }
  KNIT_FIELDS_EQ(NcStreamShuffle);
};

// MX quantization (trn3, VectorE): src [P, F] fp16/bf16 -> dst [P, F/4] fp8 x4 words plus one
// e8m0 scale per group of 8 partitions x 4 elements in dst_scale [P/8, F/4] (docs/architecture.md).
struct QuantizeMx {
  View dst, src, dst_scale;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("src", src);
    f("dst_scale", dst_scale);
  }
  KNIT_FIELDS_EQ(QuantizeMx);
};

// MX matmul (trn3, TensorE): dst[M,N] = sum over k < 4P of A[k,m] * B[k,n], A and B the stationary
// [P, M] and moving [P, N] x4 words dequantized with their [P/8, *] scales, k = 4p + sub-element.
struct NcMatmulMx {
  View dst, stationary, moving, stationary_scale, moving_scale;
  IntList tile_position, tile_size;
  Accumulate accumulate = Accumulate::auto_;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("stationary", stationary);
    f("moving", moving);
    f("stationary_scale", stationary_scale);
    f("moving_scale", moving_scale);
    f("tile_position", tile_position);
    f("tile_size", tile_size);
    f("accumulate", accumulate);
  }
  KNIT_FIELDS_EQ(NcMatmulMx);
};

// dst = exp(src - max_value) in fp32 (VectorE, trn3; max_value an fp32 scalar or [P, 1] column).
// With reduce_cmd, each row's sum of the fp32 results goes into the Vector Engine accumulators
// (reset_reduce: the sum; reduce: added; load_reduce: reduce_init plus the sum); reduce_res
// receives them.
struct Exponential {
  View dst, src;
  Operand max_value = Operand::immediate(0.0);
  std::optional<View> reduce_res;
  ReduceCmd reduce_cmd = ReduceCmd::idle;
  Operand reduce_init = Operand::immediate(0.0);
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("src", src);
    f("max_value", max_value);
    f("reduce_res", reduce_res);
    f("reduce_cmd", reduce_cmd);
    f("reduce_init", reduce_init);
  }
  KNIT_FIELDS_EQ(Exponential);
};

// The random-number instructions (docs/architecture.md "Random numbers": the generator, its per-lane
// states and how each instruction consumes them).
// dst[p, j] = the low bits of one 32-bit draw of `engine`'s generator (vector or gpsimd).
struct Rng {
  View dst;
  Engine engine = Engine::vector;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("engine", engine);
  }
  KNIT_FIELDS_EQ(Rng);
};

// Seeds every lane of the Vector Engine generator from the 32-bit value in src_seeds[0, 0].
struct SetRngSeed {
  View src_seeds;
  template <class F> void fields(F&& f) { f("src_seeds", src_seeds); }
  KNIT_FIELDS_EQ(SetRngSeed);
};

// Row p of src_seeds (uint32: 6 words per state) becomes lane p's generator state on `engine`.
struct RandSetState {
  View src_seeds;
  Engine engine = Engine::gpsimd;
  template <class F> void fields(F&& f) {
    f("src_seeds", src_seeds);
    f("engine", engine);
  }
  KNIT_FIELDS_EQ(RandSetState);
};

// Row p of dst (uint32) receives lane p's generator state on `engine`.
struct RandGetState {
  View dst;
  Engine engine = Engine::gpsimd;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("engine", engine);
  }
  KNIT_FIELDS_EQ(RandGetState);
};

// dst = uniform fp32 samples in [min, max] (fp32 scalars or [P, 1] columns) from the Vector
// Engine generator, cast to dst's dtype (trn3).
struct Rand2 {
  View dst;
  Operand min, max;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("min", min);
    f("max", max);
  }
  KNIT_FIELDS_EQ(Rand2);
};

// dst = data with each element replaced by zero with probability prob (an fp32 scalar or a
// [P, 1] column), drawn from the Vector Engine generator; kept elements keep their bits.
struct Dropout {
  View dst, data;
  Operand prob;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("data", data);
    f("prob", prob);
  }
  KNIT_FIELDS_EQ(Dropout);
};

// Inclusive scan of each partition's row in row-major order (VectorE): t = op0(src, imm0[p]),
// reg = op1(t, reg) (the new term first, as the NKI pseudo-code), dst = reg; reg starts at
// op1's identity (reset_reduce), the Vector Engine accumulator (reduce) or imm1[p]
// (load_reduce), and the accumulator keeps the last reg of each row.
struct TensorScalarCumulative {
  View dst, src;
  AluOp op0 = AluOp::add, op1 = AluOp::add;
  Operand imm0 = Operand::immediate(0.0);
  Operand imm1;
  ReduceCmd reduce_cmd = ReduceCmd::reset_reduce;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("src", src);
    f("op0", op0);
    f("op1", op1);
    f("imm0", imm0);
    f("imm1", imm1);
    f("reduce_cmd", reduce_cmd);
  }
  KNIT_FIELDS_EQ(TensorScalarCumulative);
};

// Per partition, vals' 8 slots in reverse order (7 .. 0) each claim the first unclaimed position
// of data (free dims flattened) holding that value: dst_idx[p, i] = the position (all ones when
// none), and dst = data with every claimed position set to imm (VectorE).
struct NcMatchReplace8 {
  View dst, data, vals;
  double imm = 0;
  std::optional<View> dst_idx;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("data", data);
    f("vals", vals);
    f("imm", imm);
    f("dst_idx", dst_idx);
  }
  KNIT_FIELDS_EQ(NcMatchReplace8);
};

// GpSimd (trn2+): in partitions 0, 16, .., 112 of the tile only, dst[p, 0:N] = the positions j
// (+ index_offset) where src[p, j] != 0, ascending, then padding_val up to T, and dst[p, T] = N.
struct NonzeroWithCount {
  View dst, src;
  int64_t index_offset = 0, padding_val = -1;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("src", src);
    f("index_offset", index_offset);
    f("padding_val", padding_val);
  }
  KNIT_FIELDS_EQ(NonzeroWithCount);
};

// GpSimd: for segment_ids [1, n], dst [1, 2, n] = the start and exclusive end of the run of equal
// neighbouring ids holding each element; id 0 (padding) gives start n, end -1.
struct SequenceBounds {
  View dst, segment_ids;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("segment_ids", segment_ids);
  }
  KNIT_FIELDS_EQ(SequenceBounds);
};

// GpSimd: each group of 16 partitions holds a snake of n bf16 values (position s at partition
// s % 16, column s / 16); the K = val_dst free size largest, ascending (ties by ascending s), go to
// val_dst and their positions to idx_dst, in every partition of the group.
struct Topk {
  View val_dst, idx_dst, src;
  int64_t n = 8;
  template <class F> void fields(F&& f) {
    f("val_dst", val_dst);
    f("idx_dst", idx_dst);
    f("src", src);
    f("n", n);
  }
  KNIT_FIELDS_EQ(Topk);
};

// ScalarE (trn3): v = op1(op0(data, imm0[p]), imm1[p]) (reverse flags swap an op's operands,
// bypass skips a stage), dst = op(v) with prelu's slope relu_param[p]; the fp32 results fold with
// reduce_op into the Scalar Engine accumulators per reduce_cmd, read into reduce_res.
struct Activate2 {
  View dst;
  ActFunc op = ActFunc::copy;
  View data;
  Operand imm0 = Operand::immediate(0.0), imm1 = Operand::immediate(0.0);
  AluOp op0 = AluOp::bypass, op1 = AluOp::bypass;
  Operand relu_param = Operand::immediate(0.0);
  bool reverse0 = false, reverse1 = false;
  AluOp reduce_op = AluOp::bypass;
  std::optional<View> reduce_res;
  ReduceCmd reduce_cmd = ReduceCmd::idle;
  template <class F> void fields(F&& f) {
    f("dst", dst);
    f("op", op);
    f("data", data);
    f("imm0", imm0);
    f("imm1", imm1);
    f("op0", op0);
    f("op1", op1);
    f("relu_param", relu_param);
    f("reverse0", reverse0);
    f("reverse1", reverse1);
    f("reduce_op", reduce_op);
    f("reduce_res", reduce_res);
    f("reduce_cmd", reduce_cmd);
  }
  KNIT_FIELDS_EQ(Activate2);
};

#undef KNIT_FIELDS_EQ
}  // namespace knit::ir

#include "knit/ir/ops_control.h"

namespace knit::ir {

// The instruction list. (struct, text name)
#define KNIT_OPS(X)                                   \
  X(DmaCopy, dma_copy)                                \
  X(DmaCompute, dma_compute)                          \
  X(NcMatmul, nc_matmul)                              \
  X(NcTranspose, nc_transpose)                        \
  X(Activation, activation)                           \
  X(ActivationReduce, activation_reduce)              \
  X(TensorTensor, tensor_tensor)                      \
  X(TensorScalar, tensor_scalar)                      \
  X(ScalarTensorTensor, scalar_tensor_tensor)         \
  X(TensorReduce, tensor_reduce)                      \
  X(TensorPartitionReduce, tensor_partition_reduce)   \
  X(TensorCopy, tensor_copy)                          \
  X(TensorCopyPredicated, tensor_copy_predicated)     \
  X(Memset, memset)                                   \
  X(Iota, iota)                                       \
  X(AffineSelect, affine_select)                      \
  X(SelectReduce, select_reduce)                      \
  X(RangeSelect, range_select)                        \
  X(Reciprocal, reciprocal)                           \
  X(TensorTensorScan, tensor_tensor_scan)             \
  X(TensorScalarReduce, tensor_scalar_reduce)         \
  X(BnStats, bn_stats)                                \
  X(BnAggr, bn_aggr)                                  \
  X(Max8, max8)                                       \
  X(NcFindIndex8, nc_find_index8)                     \
  X(DmaTranspose, dma_transpose)                      \
  X(RegisterMove, register_move)                      \
  X(RegisterLoad, register_load)                      \
  X(RegisterStore, register_store)                    \
  X(RegisterAlu, register_alu)                        \
  X(Loop, loop)                                       \
  X(While, while_)                                    \
  X(If, if_)                                          \
  X(Else, else_)                                      \
  X(End, end)                                         \
  X(Program, program)                                 \
  X(CoreBarrier, core_barrier)                        \
  X(SendRecv, sendrecv)                               \
  X(LocalGather, local_gather)                        \
  X(NcNGather, nc_n_gather)                           \
  X(NcStreamShuffle, nc_stream_shuffle)               \
  X(QuantizeMx, quantize_mx)                          \
  X(NcMatmulMx, nc_matmul_mx)                         \
  X(Exponential, exponential)                         \
  X(Rng, rng)                                         \
  X(SetRngSeed, set_rng_seed)                         \
  X(RandSetState, rand_set_state)                     \
  X(RandGetState, rand_get_state)                     \
  X(Rand2, rand2)                                     \
  X(Dropout, dropout)                                 \
  X(TensorScalarCumulative, tensor_scalar_cumulative) \
  X(NcMatchReplace8, nc_match_replace8)               \
  X(NonzeroWithCount, nonzero_with_count)             \
  X(SequenceBounds, sequence_bounds)                  \
  X(Topk, topk)                                       \
  X(Activate2, activate2)                             \
  X(Collective, collective)

enum class Opcode : uint8_t {
#define KNIT_X(type, name) name,
  KNIT_OPS(KNIT_X)
#undef KNIT_X
};

using OpVariant = std::variant<
#define KNIT_X(type, name) type,
    KNIT_OPS(KNIT_X)
#undef KNIT_X
        std::monostate>;

std::string_view opcode_name(Opcode op);
std::optional<Opcode> parse_opcode(std::string_view name);
// A default-constructed op of that opcode: every field at its NKI default, views unset.
OpVariant default_op(Opcode op);
constexpr size_t kNumOpcodes = std::variant_size_v<OpVariant> - 1;  // less the monostate

struct Instruction {
  OpVariant op;
  SourceLoc loc;
  std::string name;  // optional user label (name= of the ISA call)
  // Scheduling edges (kernel.with_schedule, nl.no_reorder, NkiInstruction.depends_on): body
  // indices of earlier instructions this one must run after, beyond its data dependences.
  std::vector<uint32_t> after;

  Opcode opcode() const { return static_cast<Opcode>(op.index()); }
  std::string_view opcode_name() const { return ir::opcode_name(opcode()); }
  bool operator==(const Instruction&) const = default;
};

// Calls f(name, const-field&) for each operand of the instruction's op, in declaration order.
template <class F>
void for_each_field(const Instruction& inst, F&& f) {
  std::visit(
      [&](const auto& op) {
        if constexpr (!std::is_same_v<std::decay_t<decltype(op)>, std::monostate>) {
          // fields() is written once, non-const, for both reading and parsing; walking it
          // through a const_cast is safe because f only receives const references.
          auto& mutable_op = const_cast<std::decay_t<decltype(op)>&>(op);
          mutable_op.fields([&](const char* name, auto& value) { f(name, std::as_const(value)); });
        }
      },
      inst.op);
}

// Calls f(name, view) for every view operand (dst included), skipping absent optional ones and
// non-tile Operands. The index view of an indirect view is visited after it, as "vector_offset"
// (DMA rows) or "indirect_index" (an .indirect() view).
template <class F>
void for_each_view(const Instruction& inst, F&& f) {
  auto visit = [&](const char* name, const View& v) {
    if (!v.valid()) return;
    f(name, v);
    if (const View* index = v.index_view()) f(v.indexes_columns() ? "indirect_index" : "vector_offset", *index);
  };
  for_each_field(inst, [&](const char* name, const auto& value) {
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<T, View>) {
      visit(name, value);
    } else if constexpr (std::is_same_v<T, std::optional<View>>) {
      if (value) visit(name, *value);
    } else if constexpr (std::is_same_v<T, Operand>) {
      if (value.is_tile()) visit(name, value.tile);
    } else if constexpr (std::is_same_v<T, ViewList>) {
      for (const View& v : value) visit(name, v);
    }
  });
}

// Calls f(view&) for every view operand (not index views), mutably: used to fold a view's
// dynamic terms into its offset before executing an instruction.
template <class F>
void for_each_view_mut(Instruction& inst, F&& f) {
  std::visit(
      [&](auto& op) {
        if constexpr (!std::is_same_v<std::decay_t<decltype(op)>, std::monostate>) {
          op.fields([&](const char*, auto& value) {
            using T = std::decay_t<decltype(value)>;
            if constexpr (std::is_same_v<T, View>) {
              if (value.valid()) f(value);
            } else if constexpr (std::is_same_v<T, std::optional<View>>) {
              if (value && value->valid()) f(*value);
            } else if constexpr (std::is_same_v<T, Operand>) {
              if (value.is_tile()) f(value.tile);
            } else if constexpr (std::is_same_v<T, ViewList>) {
              for (View& v : value) f(v);
            }
          });
        }
      },
      inst.op);
}

// Registers an instruction reads (IntValue / Reg sources, a view's dynamic terms) and writes.
template <class F>
void for_each_register(const Instruction& inst, F&& f) {
  for_each_field(inst, [&](const char* name, const auto& value) {
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<T, Reg>) {
      if (value.valid()) f(name, value.id);
    } else if constexpr (std::is_same_v<T, IntValue>) {
      if (value.is_reg()) f(name, value.reg);
    }
  });
  for_each_view(inst, [&](const char*, const View& v) {
    for (const RegTerm& t : v.dynamic) f("offset", t.reg);
  });
}

}  // namespace knit::ir
