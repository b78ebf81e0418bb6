// What each instruction is to the passes that schedule, time and run it: one row per KNIT_OPS
// entry, in the same order. The lowering (engine queues, barriers), liveness, the machine
// (control flow, whole-tile writes), the timing replay, the cost model and the native planner read
// these columns instead of switching on opcodes.
//
// Adding an instruction adds its row here. A missing row, a row out of order or a row that leaves
// out a column is a build error (the static_asserts below and the Required<> columns).
#pragma once

#include <array>

#include "knit/ir/ir.h"

namespace knit::ir {

// A column every row must give: it has no default, so leaving it out of a row does not compile.
template <class T>
struct Required {
  T value;
  constexpr Required(T v) : value(v) {}  // NOLINT(google-explicit-constructor): rows read as data
  constexpr operator T() const { return value; }
};

// How the sequencer treats an instruction.
enum class OpRole : uint8_t {
  compute,    // moves tensor data on a compute engine's queue
  dma,        // moves tensor data on a DMA queue
  block,      // opens, splits or closes a loop / while / if block
  scalar,     // register work and grid starts: the sequencer runs it between queue drains
  core_sync,  // synchronizes cores (core_barrier, sendrecv) or ranks (collective)
};

// Where a block instruction stands in its block (match_blocks pairs them).
enum class BlockPart : uint8_t { none, open, middle, close };

// The cost formula family (codegen/src/cost.cpp documents each formula and its source). The
// engine an instruction runs on picks the formulas; a rule that engine does not know counts there
// as `stream` (an `engine=` operand may move an instruction to another engine).
enum class CostRule : uint8_t {
  stream,          // elements x per_element cycles (halved when all 16-bit if halves_16bit), MIN_II floor if floored
  tensor_tensor,   // VectorE two-input: 1/elem for fast 16-bit or mixed PSUM/SBUF inputs, else 2/elem
  perf_mode,       // VectorE one-input: DVE perf modes on 16-bit data (2x, 4x when contiguous SBUF)
  predicated,      // VectorE predicated copy: 1/elem from PSUM, 2/elem otherwise, no floor
  matmul,          // TensorE: moving free size per pass, fp32 at fp32_factor
  pe_transpose,    // TensorE transpose: one pass per partition
  partition_fold,  // GpSimd fold across partitions: scales with the partitions folded
  index_stream,    // GpSimd index generation and gathers: one 32-bit lane per element
  snake_topk,      // GpSimd topk: 4 cycles per snake value read (its n operand) plus one per kept value
  dma,             // DMA: bytes over descriptor-size-dependent bandwidth
  dma_transpose,   // DMA through the transpose path (a fraction of the DMA bandwidth)
  none,            // sequencer work, timed as a barrier
};

struct OpCost {
  Required<CostRule> rule;
  int per_element_num = 1, per_element_den = 1;  // stream: cycles per element, as a ratio
  bool halves_16bit = false;                     // stream: twice as fast when every operand is 16-bit
  bool floored = true;                           // stream: at least MIN_II cycles
  int extra_cycles = 0;                          // stream: added after the floor (accumulator read-out)
};

// Which elements of an instruction's outputs (dst, reduce_res, dst_scale) a poisoned input element
// poisons: an element computed from never-written memory is itself undefined (the simulator's
// poison, docs/simulator.md "Never-written memory"). Operands are seen as the executors see them,
// P partitions x F elements, partition-major; where an operand's shape does not fit the rule, the
// whole output is poisoned. An output read as an input (matmul accumulation) maps element i to i.
enum class PoisonRule : uint8_t {
  whole,        // any poisoned input element poisons every output element (the safe default)
  elementwise,  // same-sized operands: element i -> element i; a [P, 1] column, or a [P, 1]
                // output (reduce_res): its partition's row; a [1, F] row: its column
  row,          // within a partition: a poisoned element poisons its partition's whole output row
  column,       // across partitions: a poisoned element poisons its free position in every partition
  contract,     // matmul: stationary[k, m] -> dst row m, moving[k, n] -> dst column n
  transpose,    // dst[f, p] from data[p, f]
};

// Chooses the engine from the operands when the opcode alone does not decide it.
using EngineRule = Engine (*)(const Kernel&, const Instruction&);

struct OpTraits {
  Required<Opcode> opcode;
  Required<OpRole> role;
  Required<Engine> engine;  // default engine (an `engine=` operand overrides it); sync for sequencer work
  EngineRule engine_rule;   // or null
  BlockPart block;
  // Stores every element of dst unconditionally (no predicate, no accumulation state, no skipped
  // rows), so a dst written whole before any read needs no NaN fill.
  Required<bool> writes_whole_dst;
  OpCost cost;  // its rule is required, so a row cannot leave the cost out
  PoisonRule poison = PoisonRule::whole;
  // Draws from or sets the engines' random-number generators (simulator/src/random.h): its
  // result depends on the order of every earlier such instruction, so it runs on the reference
  // executors under every backend.
  bool draws_random = false;
};

// The engine an instruction names (its engine= operand), or unknown.
Engine explicit_engine(const Instruction& inst);
Engine nc_transpose_engine_of(const Kernel& k, const Instruction& inst);   // by dtype and size
Engine tensor_tensor_engine_of(const Kernel& k, const Instruction& inst);  // pow runs on GpSimd

// Whether the Scalar Engine runs tensor_scalar's (op0, op1) on `target`: before NC-v4 only
// (multiply, add), (multiply, bypass) and (add, bypass) (nki.isa.tensor_scalar).
bool scalar_engine_runs(Target target, AluOp op0, AluOp op1);

// The engines an instruction may run on, its default engine first.
// NKI leaves the engine of element-wise ALU work (tensor_scalar, tensor_tensor, tensor_copy,
// memset) to the compiler, which may place it on VectorE, ScalarE or GpSimd within each engine's
// documented limits (ALU ops per engine, ScalarE's tensor_scalar pairs and tensor_copy from
// NC-v3, no PSUM on GpSimd); Knit offers the other engines only for floating-point operands
// without indirect access. Every other instruction has one engine: its engine= operand's, else
// its default.
struct EngineChoice {
  std::array<Engine, 3> engines{};
  int count = 0;
};
EngineChoice open_engines(const Kernel& k, const Instruction& inst);

namespace op_traits_detail {
using enum OpRole;
using C = CostRule;
constexpr Engine tensor = Engine::tensor, vector = Engine::vector, act = Engine::scalar, pool = Engine::gpsimd,
                 dma_engine = Engine::dma, seq = Engine::sync;
constexpr BlockPart no_block = BlockPart::none, open = BlockPart::open, middle = BlockPart::middle,
                    close = BlockPart::close;
constexpr OpCost sequencer{C::none};
constexpr EngineRule by_opcode = nullptr;
constexpr PoisonRule elementwise = PoisonRule::elementwise, by_row = PoisonRule::row, by_column = PoisonRule::column,
                     contract = PoisonRule::contract, transposed = PoisonRule::transpose,
                     poison_all = PoisonRule::whole;
constexpr bool rng_state = true;  // draws_random

// clang-format off
inline constexpr OpTraits kTable[] = {
  // opcode                         role       engine      engine_rule              block     whole  cost  poison
  {Opcode::dma_copy,                dma,       dma_engine, by_opcode,               no_block, true,  {C::dma}, elementwise},
  {Opcode::dma_compute,             dma,       dma_engine, by_opcode,               no_block, false, {C::dma}, elementwise},
  {Opcode::nc_matmul,               compute,   tensor,     by_opcode,               no_block, false, {C::matmul}, contract},
  {Opcode::nc_transpose,            compute,   tensor,     nc_transpose_engine_of,  no_block, true,  {C::pe_transpose}, transposed},
  {Opcode::activation,              compute,   act,        by_opcode,               no_block, true,  {C::stream}, elementwise},
  {Opcode::activation_reduce,       compute,   act,        by_opcode,               no_block, true,  {C::stream}, elementwise},
  {Opcode::tensor_tensor,           compute,   vector,     tensor_tensor_engine_of, no_block, true,  {C::tensor_tensor}, elementwise},
  {Opcode::tensor_scalar,           compute,   vector,     by_opcode,               no_block, true,  {C::perf_mode}, elementwise},
  {Opcode::scalar_tensor_tensor,    compute,   vector,     by_opcode,               no_block, true,  {C::stream, 2, 1, false, false}, elementwise},
  {Opcode::tensor_reduce,           compute,   vector,     by_opcode,               no_block, true,  {C::stream, 1, 1, true, false}, by_row},
  {Opcode::tensor_partition_reduce, compute,   pool,       by_opcode,               no_block, false, {C::partition_fold}, by_column},
  {Opcode::tensor_copy,             compute,   vector,     by_opcode,               no_block, true,  {C::perf_mode}, elementwise},
  {Opcode::tensor_copy_predicated,  compute,   vector,     by_opcode,               no_block, false, {C::predicated}, elementwise},
  {Opcode::memset,                  compute,   vector,     by_opcode,               no_block, true,  {C::stream, 1, 1, true}},
  {Opcode::iota,                    compute,   pool,       by_opcode,               no_block, true,  {C::index_stream}},
  {Opcode::affine_select,           compute,   pool,       by_opcode,               no_block, true,  {C::index_stream}, elementwise},
  {Opcode::select_reduce,           compute,   vector,     by_opcode,               no_block, true,  {C::stream}, elementwise},
  {Opcode::range_select,            compute,   vector,     by_opcode,               no_block, true,  {C::stream}, elementwise},
  {Opcode::reciprocal,              compute,   vector,     by_opcode,               no_block, true,  {C::stream, 8}, elementwise},
  {Opcode::tensor_tensor_scan,      compute,   vector,     by_opcode,               no_block, true,  {C::stream, 2}, by_row},
  {Opcode::tensor_scalar_reduce,    compute,   vector,     by_opcode,               no_block, true,  {C::stream, 1, 1, false, true, 64}, elementwise},
  {Opcode::bn_stats,                compute,   vector,     by_opcode,               no_block, false, {C::stream}, by_row},
  {Opcode::bn_aggr,                 compute,   vector,     by_opcode,               no_block, false, {C::stream, 13, 3}, by_row},
  {Opcode::max8,                    compute,   vector,     by_opcode,               no_block, false, {C::stream}, by_row},
  {Opcode::nc_find_index8,          compute,   vector,     by_opcode,               no_block, false, {C::stream}, by_row},
  {Opcode::dma_transpose,           dma,       dma_engine, by_opcode,               no_block, false, {C::dma_transpose}},
  {Opcode::register_move,           scalar,    seq,        by_opcode,               no_block, false, sequencer},
  {Opcode::register_load,           scalar,    seq,        by_opcode,               no_block, false, sequencer},
  {Opcode::register_store,          scalar,    seq,        by_opcode,               no_block, false, sequencer},
  {Opcode::register_alu,            scalar,    seq,        by_opcode,               no_block, false, sequencer},
  {Opcode::loop,                    block,     seq,        by_opcode,               open,     false, sequencer},
  {Opcode::while_,                  block,     seq,        by_opcode,               open,     false, sequencer},
  {Opcode::if_,                     block,     seq,        by_opcode,               open,     false, sequencer},
  {Opcode::else_,                   block,     seq,        by_opcode,               middle,   false, sequencer},
  {Opcode::end,                     block,     seq,        by_opcode,               close,    false, sequencer},
  {Opcode::program,                 scalar,    seq,        by_opcode,               no_block, false, sequencer},
  {Opcode::core_barrier,            core_sync, seq,        by_opcode,               no_block, false, sequencer},
  {Opcode::sendrecv,                core_sync, seq,        by_opcode,               no_block, false, sequencer},
  {Opcode::local_gather,            compute,   pool,       by_opcode,               no_block, false, {C::index_stream}},
  {Opcode::nc_n_gather,             compute,   pool,       by_opcode,               no_block, false, {C::index_stream}},
  {Opcode::nc_stream_shuffle,       compute,   vector,     by_opcode,               no_block, false, {C::stream}},
  {Opcode::quantize_mx,             compute,   vector,     by_opcode,               no_block, false, {C::stream, 1, 4}},
  {Opcode::nc_matmul_mx,            compute,   tensor,     by_opcode,               no_block, false, {C::matmul}, contract},
  {Opcode::exponential,             compute,   vector,     by_opcode,               no_block, true,  {C::stream}, elementwise},
  {Opcode::rng,                     compute,   vector,     by_opcode,               no_block, true,  {C::stream}, poison_all, rng_state},
  {Opcode::set_rng_seed,            compute,   vector,     by_opcode,               no_block, false, {C::stream}, poison_all, rng_state},
  {Opcode::rand_set_state,          compute,   pool,       by_opcode,               no_block, false, {C::stream}, poison_all, rng_state},
  {Opcode::rand_get_state,          compute,   pool,       by_opcode,               no_block, true,  {C::stream}, poison_all, rng_state},
  {Opcode::rand2,                   compute,   vector,     by_opcode,               no_block, true,  {C::stream}, poison_all, rng_state},
  {Opcode::dropout,                 compute,   vector,     by_opcode,               no_block, true,  {C::stream}, elementwise, rng_state},
  {Opcode::tensor_scalar_cumulative, compute,  vector,     by_opcode,               no_block, true,  {C::stream}, by_row},
  {Opcode::nc_match_replace8,       compute,   vector,     by_opcode,               no_block, true,  {C::stream}, by_row},
  {Opcode::nonzero_with_count,      compute,   pool,       by_opcode,               no_block, false, {C::index_stream}, by_row},
  {Opcode::sequence_bounds,         compute,   pool,       by_opcode,               no_block, true,  {C::index_stream}},
  {Opcode::topk,                    compute,   pool,       by_opcode,               no_block, false, {C::snake_topk}},
  {Opcode::activate2,               compute,   act,        by_opcode,               no_block, true,  {C::stream}, elementwise},
  {Opcode::collective,              core_sync, seq,        by_opcode,               no_block, false, sequencer},
};
// clang-format on

constexpr bool rows_in_order() {
  for (size_t i = 0; i < std::size(kTable); ++i)
    if (static_cast<size_t>(static_cast<Opcode>(kTable[i].opcode)) != i) return false;
  return true;
}
static_assert(std::size(kTable) == kNumOpcodes, "op_traits.h: every KNIT_OPS entry needs a row");
static_assert(rows_in_order(), "op_traits.h: rows must follow the KNIT_OPS order");
}  // namespace op_traits_detail

constexpr const OpTraits& op_traits(Opcode op) { return op_traits_detail::kTable[static_cast<size_t>(op)]; }

// The opcode of an op struct, at compile time (its index in the instruction variant).
template <class Op, size_t I = 0>
constexpr Opcode opcode_of() {
  if constexpr (std::is_same_v<std::variant_alternative_t<I, OpVariant>, Op>) return static_cast<Opcode>(I);
  else return opcode_of<Op, I + 1>();
}

constexpr bool moves_tensor_data(Opcode op) {
  const OpRole r = op_traits(op).role;
  return r == OpRole::compute || r == OpRole::dma;
}
constexpr CostRule cost_rule(Opcode op) { return op_traits(op).cost.rule; }
constexpr bool is_dma(Opcode op) { return op_traits(op).role == OpRole::dma; }
constexpr bool is_core_sync(Opcode op) { return op_traits(op).role == OpRole::core_sync; }
constexpr bool is_block(Opcode op) { return op_traits(op).role == OpRole::block; }
constexpr bool draws_random(Opcode op) { return op_traits(op).draws_random; }

}  // namespace knit::ir
