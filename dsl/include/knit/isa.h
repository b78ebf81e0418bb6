// knit::isa — the C++ mirror of nki.isa (current, dst-first API). Each call appends one
// instruction to the kernel being traced; it is verified at once, so a broken rule is reported
// at the calling line. Optional NKI keyword arguments are fields of an options struct, set with
// designated initializers:  isa::activation(out, nl::exp, x, {.bias = b, .scale = 0.5});
#pragma once

#include <source_location>

#include "knit/nl.h"

namespace knit::isa {

using engine = ir::Engine;
using reduce_cmd = ir::ReduceCmd;
using dge_mode = ir::DgeMode;
using oob_mode = ir::OobMode;
using matmul_perf_mode = ir::MatmulPerfMode;
inline constexpr engine tensor_engine = engine::tensor;
inline constexpr engine vector_engine = engine::vector;
inline constexpr engine scalar_engine = engine::scalar;
inline constexpr engine gpsimd_engine = engine::gpsimd;
inline constexpr engine unknown_engine = engine::unknown;

// A scalar-or-tile operand: an fp32 immediate or a [P, 1] tile; default-constructed = None.
struct operand {
  ir::Operand value;
  operand() = default;
  operand(double v) : value(ir::Operand::immediate(v)) {}
  operand(const nl::tensor& t) : value(ir::Operand::of(t.view())) {}
};

namespace detail {
template <class Op>
void emit(Op op, const std::string& name, const std::source_location& l) {
  knit::detail::append(std::move(op), loc_of(l), name);
}
inline std::optional<ir::View> view_or_none(const std::optional<nl::tensor>& t) {
  return t ? std::optional<ir::View>(t->view()) : std::nullopt;
}
inline ir::AluOp alu(const nl::Op& op, const std::source_location& l) { return nl::alu_op(op, loc_of(l)); }
inline ir::ActFunc act(const nl::Op& op, const std::source_location& l) { return nl::act_func(op, loc_of(l)); }
}  // namespace detail

#define KNIT_HERE std::source_location l = std::source_location::current()

struct DmaOptions {
  ir::OobMode oob_mode = ir::OobMode::error;
  ir::DgeMode dge_mode = ir::DgeMode::unknown;
  ir::Engine engine = ir::Engine::unknown;
  std::string name;
};
inline void dma_copy(const nl::tensor& dst, const nl::tensor& src, DmaOptions o = {}, KNIT_HERE) {
  detail::emit(ir::DmaCopy{dst.view(), src.view(), o.oob_mode, o.dge_mode, o.engine}, o.name, l);
}

// dst = srcs[0] + srcs[1] + ... in fp32 on a DMA queue (reduce_op combines them). An indirect dst
// with srcs[0] the same view is a scatter-add: isa::dma_compute(rows, {rows, v}, {.unique_indices = false}).
struct DmaComputeOptions {
  nl::Op reduce_op = nl::add;
  std::vector<double> scales;
  bool unique_indices = true;  // a promise that no index repeats (checked when run)
  ir::OobMode oob_mode = ir::OobMode::error;
  std::string name;
};
inline void dma_compute(const nl::tensor& dst, const std::vector<nl::tensor>& srcs, DmaComputeOptions o = {},
                        KNIT_HERE) {
  ir::ViewList views;
  for (const nl::tensor& s : srcs) views.push_back(s.view());
  detail::emit(ir::DmaCompute{dst.view(), std::move(views), detail::alu(o.reduce_op, l), std::move(o.scales),
                              o.unique_indices, o.oob_mode},
               o.name, l);
}

struct DmaTransposeOptions {
  std::vector<int64_t> axes;
  ir::DgeMode dge_mode = ir::DgeMode::unknown;
  ir::OobMode oob_mode = ir::OobMode::error;
  std::string name;
};
inline void dma_transpose(const nl::tensor& dst, const nl::tensor& src, DmaTransposeOptions o = {}, KNIT_HERE) {
  detail::emit(ir::DmaTranspose{dst.view(), src.view(), o.axes, o.dge_mode, o.oob_mode}, o.name, l);
}

struct MatmulOptions {
  std::optional<bool> accumulate;  // None: first write overwrites, later writes add
  bool is_transpose = false;
  std::vector<int64_t> tile_position, tile_size;
  bool is_stationary_onezero = false, is_moving_onezero = false;
  matmul_perf_mode perf_mode = matmul_perf_mode::none;
  std::string name;
};
inline void nc_matmul(const nl::tensor& dst, const nl::tensor& stationary, const nl::tensor& moving,
                      MatmulOptions o = {}, KNIT_HERE) {
  ir::NcMatmul op;
  op.dst = dst.view();
  op.stationary = stationary.view();
  op.moving = moving.view();
  op.accumulate = !o.accumulate ? ir::Accumulate::auto_ : *o.accumulate ? ir::Accumulate::on : ir::Accumulate::off;
  op.is_transpose = o.is_transpose;
  op.tile_position = o.tile_position;
  op.tile_size = o.tile_size;
  op.is_stationary_onezero = o.is_stationary_onezero;
  op.is_moving_onezero = o.is_moving_onezero;
  op.perf_mode = o.perf_mode;
  detail::emit(std::move(op), o.name, l);
}

inline void nc_transpose(const nl::tensor& dst, const nl::tensor& data, engine e = engine::unknown,
                         const std::string& name = "", KNIT_HERE) {
  detail::emit(ir::NcTranspose{dst.view(), data.view(), e}, name, l);
}

struct ActivationOptions {
  operand bias;
  operand scale = 1.0;
  nl::Op reduce_op = nl::bypass;
  std::optional<nl::tensor> reduce_res;
  ir::ReduceCmd reduce_cmd = ir::ReduceCmd::idle;
  double alpha = 0.0;  // slope for nl::prelu
  std::string name;
};
inline void activation(const nl::tensor& dst, const nl::Op& op, const nl::tensor& data, ActivationOptions o = {},
                       KNIT_HERE) {
  detail::emit(ir::Activation{dst.view(), detail::act(op, l), data.view(), o.bias.value, o.scale.value,
                              detail::alu(o.reduce_op, l), detail::view_or_none(o.reduce_res), o.reduce_cmd, o.alpha},
               o.name, l);
}

struct ActivationReduceOptions {
  operand bias;
  operand scale = 1.0;
  std::string name;
};
inline void activation_reduce(const nl::tensor& dst, const nl::Op& op, const nl::tensor& data, const nl::Op& reduce_op,
                              const nl::tensor& reduce_res, ActivationReduceOptions o = {}, KNIT_HERE) {
  detail::emit(ir::ActivationReduce{dst.view(), detail::act(op, l), data.view(), detail::alu(reduce_op, l),
                                    reduce_res.view(), o.bias.value, o.scale.value},
               o.name, l);
}

inline void tensor_tensor(const nl::tensor& dst, const nl::tensor& data1, const nl::tensor& data2, const nl::Op& op,
                          engine e = engine::unknown, const std::string& name = "", KNIT_HERE) {
  detail::emit(ir::TensorTensor{dst.view(), data1.view(), data2.view(), detail::alu(op, l), e}, name, l);
}

struct TensorScalarOptions {
  bool reverse0 = false;
  nl::Op op1 = nl::bypass;
  operand operand1;
  bool reverse1 = false;
  ir::Engine engine = ir::Engine::unknown;
  std::string name;
};
inline void tensor_scalar(const nl::tensor& dst, const nl::tensor& data, const nl::Op& op0, operand operand0,
                          TensorScalarOptions o = {}, KNIT_HERE) {
  detail::emit(ir::TensorScalar{dst.view(), data.view(), detail::alu(op0, l), operand0.value, o.reverse0,
                                detail::alu(o.op1, l), o.operand1.value, o.reverse1, o.engine},
               o.name, l);
}

struct ReverseOptions {
  bool reverse0 = false, reverse1 = false;
  std::string name;
};
inline void scalar_tensor_tensor(const nl::tensor& dst, const nl::tensor& data, const nl::Op& op0, operand operand0,
                                 const nl::Op& op1, const nl::tensor& operand1, ReverseOptions o = {}, KNIT_HERE) {
  detail::emit(ir::ScalarTensorTensor{dst.view(), data.view(), detail::alu(op0, l), operand0.value, detail::alu(op1, l),
                                      operand1.view(), o.reverse0, o.reverse1},
               o.name, l);
}

struct ReduceOptions {
  bool negate = false, keepdims = false;
  std::string name;
};
inline void tensor_reduce(const nl::tensor& dst, const nl::Op& op, const nl::tensor& data, std::vector<int64_t> axis,
                          ReduceOptions o = {}, KNIT_HERE) {
  detail::emit(ir::TensorReduce{dst.view(), detail::alu(op, l), data.view(), std::move(axis), o.negate, o.keepdims},
               o.name, l);
}

inline void tensor_partition_reduce(const nl::tensor& dst, const nl::Op& op, const nl::tensor& data,
                                    const std::string& name = "", KNIT_HERE) {
  detail::emit(ir::TensorPartitionReduce{dst.view(), detail::alu(op, l), data.view()}, name, l);
}

inline void tensor_copy(const nl::tensor& dst, const nl::tensor& src, engine e = engine::unknown,
                        const std::string& name = "", KNIT_HERE) {
  detail::emit(ir::TensorCopy{dst.view(), src.view(), e}, name, l);
}

inline void tensor_copy_predicated(const nl::tensor& dst, operand src, const nl::tensor& predicate,
                                   bool reverse_pred = false, const std::string& name = "", KNIT_HERE) {
  detail::emit(ir::TensorCopyPredicated{dst.view(), src.value, predicate.view(), reverse_pred}, name, l);
}

inline void memset(const nl::tensor& dst, double value, engine e = engine::unknown, const std::string& name = "",
                   KNIT_HERE) {
  detail::emit(ir::Memset{dst.view(), value, e}, name, l);
}

inline void iota(const nl::tensor& dst, std::vector<ir::ApDim> pattern, int64_t offset = 0,
                 int64_t channel_multiplier = 0, const std::string& name = "", KNIT_HERE) {
  detail::emit(ir::Iota{dst.view(), std::move(pattern), offset, channel_multiplier}, name, l);
}

struct AffineSelectOptions {
  nl::Op cmp_op = nl::equal;
  int64_t offset = 0;
  std::string name;
};
inline void affine_select(const nl::tensor& dst, std::vector<ir::ApDim> pattern, int64_t channel_multiplier,
                          const nl::tensor& on_true_tile, double on_false_value, AffineSelectOptions o = {},
                          KNIT_HERE) {
  detail::emit(ir::AffineSelect{dst.view(), std::move(pattern), channel_multiplier, on_true_tile.view(), on_false_value,
                                detail::alu(o.cmp_op, l), o.offset},
               o.name, l);
}

struct SelectReduceOptions {
  std::optional<nl::tensor> reduce_res;
  ir::ReduceCmd reduce_cmd = ir::ReduceCmd::idle;
  nl::Op reduce_op = nl::maximum;
  bool reverse_pred = false;
  std::string name;
};
inline void select_reduce(const nl::tensor& dst, const nl::tensor& predicate, const nl::tensor& on_true,
                          operand on_false, SelectReduceOptions o = {}, KNIT_HERE) {
  detail::emit(
      ir::SelectReduce{dst.view(), predicate.view(), on_true.view(), on_false.value, detail::view_or_none(o.reduce_res),
                       o.reduce_cmd, detail::alu(o.reduce_op, l), o.reverse_pred},
      o.name, l);
}

struct RangeSelectOptions {
  ir::ReduceCmd reduce_cmd = ir::ReduceCmd::reset_reduce;
  std::optional<nl::tensor> reduce_res;
  nl::Op reduce_op = nl::maximum;
  double range_start = 0;
  double on_false_value = -3.4028234663852886e38;
  std::string name;
};
inline void range_select(const nl::tensor& dst, const nl::tensor& on_true_tile, const nl::Op& comp_op0,
                         const nl::Op& comp_op1, const nl::tensor& bound0, const nl::tensor& bound1,
                         RangeSelectOptions o = {}, KNIT_HERE) {
  detail::emit(ir::RangeSelect{dst.view(), on_true_tile.view(), detail::alu(comp_op0, l), detail::alu(comp_op1, l),
                               bound0.view(), bound1.view(), o.reduce_cmd, detail::view_or_none(o.reduce_res),
                               detail::alu(o.reduce_op, l), o.range_start, o.on_false_value},
               o.name, l);
}

inline void reciprocal(const nl::tensor& dst, const nl::tensor& data, const std::string& name = "", KNIT_HERE) {
  detail::emit(ir::Reciprocal{dst.view(), data.view()}, name, l);
}

inline void tensor_tensor_scan(const nl::tensor& dst, const nl::tensor& data0, const nl::tensor& data1, operand initial,
                               const nl::Op& op0, const nl::Op& op1, ReverseOptions o = {}, KNIT_HERE) {
  detail::emit(ir::TensorTensorScan{dst.view(), data0.view(), data1.view(), initial.value, detail::alu(op0, l),
                                    detail::alu(op1, l), o.reverse0, o.reverse1},
               o.name, l);
}

struct TensorScalarReduceOptions {
  std::optional<nl::tensor> reduce_res;
  bool reverse0 = false;
  ir::ReduceCmd reduce_cmd = ir::ReduceCmd::reset_reduce;
  operand reduce_init;
  bool reduce_res_negate = false;
  std::string name;
};
inline void tensor_scalar_reduce(const nl::tensor& dst, const nl::tensor& data, const nl::Op& op0, operand operand0,
                                 const nl::Op& reduce_op, TensorScalarReduceOptions o = {}, KNIT_HERE) {
  detail::emit(ir::TensorScalarReduce{dst.view(), data.view(), detail::alu(op0, l), operand0.value,
                                      detail::alu(reduce_op, l), detail::view_or_none(o.reduce_res), o.reverse0,
                                      o.reduce_cmd, o.reduce_init.value, o.reduce_res_negate},
               o.name, l);
}

// dst = exp(src - max_value) on the Vector Engine (trn3); reduce_cmd sums rows into its accumulators.
struct ExponentialOptions {
  operand max_value = 0.0;
  std::optional<nl::tensor> reduce_res;
  ir::ReduceCmd reduce_cmd = ir::ReduceCmd::idle;
  operand reduce_init = 0.0;
  std::string name;
};
inline void exponential(const nl::tensor& dst, const nl::tensor& src, ExponentialOptions o = {}, KNIT_HERE) {
  detail::emit(ir::Exponential{dst.view(), src.view(), o.max_value.value, detail::view_or_none(o.reduce_res),
                               o.reduce_cmd, o.reduce_init.value},
               o.name, l);
}

// Inclusive row scan on the Vector Engine: reg = op1(op0(src, imm0), reg), dst = reg.
struct TensorScalarCumulativeOptions {
  operand imm1;
  ir::ReduceCmd reduce_cmd = ir::ReduceCmd::reset_reduce;
  std::string name;
};
inline void tensor_scalar_cumulative(const nl::tensor& dst, const nl::tensor& src, const nl::Op& op0, const nl::Op& op1,
                                     const operand& imm0, TensorScalarCumulativeOptions o = {}, KNIT_HERE) {
  detail::emit(ir::TensorScalarCumulative{dst.view(), src.view(), detail::alu(op0, l), detail::alu(op1, l), imm0.value,
                                          o.imm1.value, o.reduce_cmd},
               o.name, l);
}

// vals' 8 slots (last first) claim positions of data: dst = data with them set to imm, dst_idx = where.
inline void nc_match_replace8(const nl::tensor& dst, const nl::tensor& data, const nl::tensor& vals, double imm,
                              const std::optional<nl::tensor>& dst_idx = std::nullopt, const std::string& name = "",
                              KNIT_HERE) {
  detail::emit(ir::NcMatchReplace8{dst.view(), data.view(), vals.view(), imm, detail::view_or_none(dst_idx)}, name, l);
}

// GpSimd (trn2+): nonzero positions, padding and count in partitions 0, 16, .., 112.
inline void nonzero_with_count(const nl::tensor& dst, const nl::tensor& src, int64_t index_offset = 0,
                               int64_t padding_val = -1, const std::string& name = "", KNIT_HERE) {
  detail::emit(ir::NonzeroWithCount{dst.view(), src.view(), index_offset, padding_val}, name, l);
}

// GpSimd: run starts and exclusive ends of segment ids [1, n] into dst [1, 2, n].
inline void sequence_bounds(const nl::tensor& dst, const nl::tensor& segment_ids, const std::string& name = "",
                            KNIT_HERE) {
  detail::emit(ir::SequenceBounds{dst.view(), segment_ids.view()}, name, l);
}

// GpSimd: the K largest of n snake values per 16-partition group, ascending, and their positions.
inline void topk(const nl::tensor& val_dst, const nl::tensor& idx_dst, const nl::tensor& src, int64_t n,
                 const std::string& name = "", KNIT_HERE) {
  detail::emit(ir::Topk{val_dst.view(), idx_dst.view(), src.view(), n}, name, l);
}

// Scalar Engine (trn3): dst = op(op1(op0(data, imm0), imm1)), relu_param the nl::prelu slope.
struct Activate2Options {
  operand relu_param = 0.0;
  bool reverse0 = false, reverse1 = false;
  nl::Op reduce_op = nl::bypass;
  std::optional<nl::tensor> reduce_res;
  ir::ReduceCmd reduce_cmd = ir::ReduceCmd::idle;
  std::string name;
};
inline void activate2(const nl::tensor& dst, const nl::Op& op, const nl::tensor& data, const operand& imm0,
                      const operand& imm1, const nl::Op& op0, const nl::Op& op1, Activate2Options o = {}, KNIT_HERE) {
  detail::emit(ir::Activate2{dst.view(), detail::act(op, l), data.view(), imm0.value, imm1.value, detail::alu(op0, l),
                             detail::alu(op1, l), o.relu_param.value, o.reverse0, o.reverse1,
                             detail::alu(o.reduce_op, l), detail::view_or_none(o.reduce_res), o.reduce_cmd},
               o.name, l);
}

inline void bn_stats(const nl::tensor& dst, const nl::tensor& data, const std::string& name = "", KNIT_HERE) {
  detail::emit(ir::BnStats{dst.view(), data.view()}, name, l);
}
inline void bn_aggr(const nl::tensor& dst, const nl::tensor& data, const std::string& name = "", KNIT_HERE) {
  detail::emit(ir::BnAggr{dst.view(), data.view()}, name, l);
}
inline void max8(const nl::tensor& dst, const nl::tensor& src, const std::string& name = "", KNIT_HERE) {
  detail::emit(ir::Max8{dst.view(), src.view()}, name, l);
}
inline void nc_find_index8(const nl::tensor& dst, const nl::tensor& data, const nl::tensor& vals,
                           const std::string& name = "", KNIT_HERE) {
  detail::emit(ir::NcFindIndex8{dst.view(), data.view(), vals.view()}, name, l);
}
// Random numbers (generator: docs/architecture.md "Random numbers").
// dst = the low bits of one 32-bit draw per element from `e`'s generator (integer dst).
inline void rng(const nl::tensor& dst, engine e = engine::vector, const std::string& name = "", KNIT_HERE) {
  detail::emit(ir::Rng{dst.view(), e}, name, l);
}
// Seeds the Vector Engine generator from the 32-bit value of a [1, 1] tile.
inline void set_rng_seed(const nl::tensor& src_seeds, const std::string& name = "", KNIT_HERE) {
  detail::emit(ir::SetRngSeed{src_seeds.view()}, name, l);
}
// Row p of src_seeds (uint32: 6 words per state, 24 for the trn3 Vector Engine) becomes lane p's state.
inline void rand_set_state(const nl::tensor& src_seeds, engine e = engine::gpsimd, const std::string& name = "",
                           KNIT_HERE) {
  detail::emit(ir::RandSetState{src_seeds.view(), e}, name, l);
}
inline void rand_get_state(const nl::tensor& dst, engine e = engine::gpsimd, const std::string& name = "", KNIT_HERE) {
  detail::emit(ir::RandGetState{dst.view(), e}, name, l);
}
// dst = uniform samples in [min, max] (fp32 scalars or [P, 1] tiles) on the Vector Engine (trn3).
inline void rand2(const nl::tensor& dst, operand min, operand max, const std::string& name = "", KNIT_HERE) {
  detail::emit(ir::Rand2{dst.view(), min.value, max.value}, name, l);
}
// dst = data with each element zeroed with probability prob (scalar or [P, 1] tile); no rescaling.
inline void dropout(const nl::tensor& dst, const nl::tensor& data, operand prob, const std::string& name = "",
                    KNIT_HERE) {
  detail::emit(ir::Dropout{dst.view(), data.view(), prob.value}, name, l);
}
inline void local_gather(const nl::tensor& dst, const nl::tensor& src_buffer, const nl::tensor& index,
                         int64_t num_elem_per_idx = 1, int64_t num_valid_indices = -1, KNIT_HERE) {
  detail::emit(ir::LocalGather{dst.view(), src_buffer.view(), index.view(), num_elem_per_idx, num_valid_indices}, "",
               l);
}
inline void nc_n_gather(const nl::tensor& dst, const nl::tensor& data, const nl::tensor& indices,
                        const std::string& name = "", KNIT_HERE) {
  detail::emit(ir::NcNGather{dst.view(), data.view(), indices.view()}, name, l);
}

inline void nc_stream_shuffle(const nl::tensor& dst, const nl::tensor& src, std::vector<int64_t> shuffle_mask,
                              const std::string& name = "", KNIT_HERE) {
  detail::emit(ir::NcStreamShuffle{dst.view(), src.view(), std::move(shuffle_mask)}, name, l);
}

// trn3 MX (docs/architecture.md, "MX data"): src [P, F] fp16/bf16 -> dst [P, F/4] fp8 x4 words,
// dst_scale [P/8, F/4] e8m0 scales.
inline void quantize_mx(const nl::tensor& dst, const nl::tensor& src, const nl::tensor& dst_scale,
                        std::string name = "", KNIT_HERE) {
  detail::emit(ir::QuantizeMx{dst.view(), src.view(), dst_scale.view()}, name, l);
}

struct MatmulMxOptions {
  std::vector<int64_t> tile_position, tile_size;  // row tiling only: tile_size = (rows, 128)
  std::optional<bool> accumulate;                 // None: first write overwrites, later writes add
  std::string name;
};
inline void nc_matmul_mx(const nl::tensor& dst, const nl::tensor& stationary, const nl::tensor& moving,
                         const nl::tensor& stationary_scale, const nl::tensor& moving_scale, MatmulMxOptions o = {},
                         KNIT_HERE) {
  ir::NcMatmulMx op;
  op.dst = dst.view();
  op.stationary = stationary.view();
  op.moving = moving.view();
  op.stationary_scale = stationary_scale.view();
  op.moving_scale = moving_scale.view();
  op.tile_position = o.tile_position;
  op.tile_size = o.tile_size;
  op.accumulate = !o.accumulate ? ir::Accumulate::auto_ : *o.accumulate ? ir::Accumulate::on : ir::Accumulate::off;
  detail::emit(std::move(op), o.name, l);
}

// ---- registers (NKI's VirtualRegister / NkiScalar; arithmetic on nl::reg is in control.h) ----
using nl::reg;

namespace detail {
// The register a register_* instruction writes: a reg that is exactly one register.
inline ir::Reg target(const reg& r, const char* what, const SourceLoc& loc) {
  if (r.id() < 0)
    user_error(loc, "operand", std::string(what) + " must be a register (isa::register_alloc()), not an expression");
  return ir::Reg{r.id()};
}
}  // namespace detail

// A new register, set to `init` (an int or a reg) when given.
inline reg register_alloc(std::optional<reg> init = std::nullopt, const std::string& name = "", KNIT_HERE) {
  const SourceLoc loc = loc_of(l);
  const int id = knit::detail::new_register(loc);
  if (init) detail::emit(ir::RegisterMove{ir::Reg{id}, init->operand(loc)}, name, l);
  return reg::of(id);
}
// dst = src (an int or a reg).
inline void register_move(const reg& dst, const reg& src, const std::string& name = "", KNIT_HERE) {
  const SourceLoc loc = loc_of(l);
  detail::emit(ir::RegisterMove{detail::target(dst, "dst", loc), src.operand(loc)}, name, l);
}
// dst = the single element of the integer tensor `src`.
inline void register_load(const reg& dst, const nl::tensor& src, const std::string& name = "", KNIT_HERE) {
  detail::emit(ir::RegisterLoad{detail::target(dst, "dst", loc_of(l)), src.view()}, name, l);
}
// The single element of the integer tensor `dst` = src (an int or a reg; an expression is
// computed into a register first).
inline void register_store(const nl::tensor& dst, const reg& src, const std::string& name = "", KNIT_HERE) {
  detail::emit(ir::RegisterStore{dst.view(), ir::Reg{src.materialize(loc_of(l))}}, name, l);
}
// The NkiScalar (G3) spelling: a new register holding the single element of `src`, and its store.
inline reg scalar_load(const nl::tensor& src, KNIT_HERE) {
  const reg r = reg::of(knit::detail::new_register(loc_of(l)));
  register_load(r, src, "", l);
  return r;
}
inline void scalar_store(const nl::tensor& dst, const reg& value, KNIT_HERE) { register_store(dst, value, "", l); }

#undef KNIT_HERE

}  // namespace knit::isa
