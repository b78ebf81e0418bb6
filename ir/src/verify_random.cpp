// Verifier rules: the random-number instructions (rng, set_rng_seed, rand_set_state,
// rand_get_state, rand2, dropout; nki-0.6-additions.md §1.2, §1.7-§1.11). Targets: rng on GpSimd
// and the state instructions need trn2 (GpSimd) or trn3 (Vector Engine); rand2 is trn3 only.
// A state is 6 uint32 words; the trn3 Vector Engine keeps 4 per lane (24 words), GpSimd one.
#include <string>

#include "verify_rules.h"

namespace knit::ir {

namespace {

Engine engine_or(Engine e, Engine fallback) { return e == Engine::unknown ? fallback : e; }

// The engine of a state instruction: GpSimd from trn2, the Vector Engine from trn3, never trn1.
void check_state_engine(Checker& c, Engine e) {
  c.engine_in(e, {Engine::gpsimd, Engine::vector});
  if (nc_version(c.target()) < 3)
    c.fail("target",
           "the random-number state instructions need trn2 (GpSimd) or trn3 (GpSimd or Vector Engine); "
           "on trn1 seed the Vector Engine with nisa.set_rng_seed");
  if (engine_or(e, Engine::gpsimd) == Engine::vector && nc_version(c.target()) < 4)
    c.fail("engine",
           "engine=vector needs trn3 (before it only GpSimd's state can be set or read); "
           "use engine=nisa.engine.gpsimd");
}

// A state tile: 2-D uint32, one row per lane, 6 words (GpSimd) or 24 (trn3 Vector Engine).
void check_state_tile(Checker& c, const View& v, const char* what, Engine e) {
  c.dtype_in(v, what, {DType::uint32});
  if (v.dims.size() != 2)
    c.fail("operand-shape",
           std::string(what) + " must be a 2-D [P, words] tile; it has " + std::to_string(v.dims.size()) + " dims");
  const int64_t words = engine_or(e, Engine::gpsimd) == Engine::vector ? 24 : 6;
  if (c.free_size(v) != words)
    c.fail("operand-shape", std::string(what) + " must hold " + std::to_string(words) +
                                " uint32 words per partition (" +
                                (words == 24 ? "4 XORWOW states of 6 on the trn3 Vector Engine" : "one XORWOW state") +
                                "); it has " + std::to_string(c.free_size(v)));
}

// A bound or probability: an fp32 immediate or a [P, 1] column of `dtypes`.
void scalar_or_column(Checker& c, const Operand& o, const char* what, const View& dst,
                      std::initializer_list<DType> dtypes) {
  if (o.is_none()) c.fail("operand", std::string(what) + " is required (an fp32 scalar or a [P, 1] tile)");
  if (!o.is_tile()) return;
  c.column(o.tile, what, dst);
  c.dtype_in(o.tile, what, dtypes);
}

}  // namespace

void check(Checker& c, const Rng& op) {
  c.engine_in(op.engine, {Engine::vector, Engine::gpsimd});
  c.on_chip(op.dst, "dst");
  using enum DType;
  c.dtype_in(op.dst, "dst", {int8, int16, int32, uint8, uint16, uint32});
  if (op.engine == Engine::gpsimd) {
    if (nc_version(c.target()) < 3)
      c.fail("engine", "engine=gpsimd needs trn2 or newer; on trn1 use engine=nisa.engine.vector");
    c.not_psum(op.dst, "dst", "the GpSimd engine cannot access PSUM");
  }
}

void check(Checker& c, const SetRngSeed& op) {
  c.on_chip(op.src_seeds, "src_seeds");
  c.dtype_in(op.src_seeds, "src_seeds", {DType::int32, DType::uint32});
  if (c.partitions(op.src_seeds) != 1 || c.free_size(op.src_seeds) != 1)
    c.fail("operand-shape", "src_seeds must be a [1, 1] tile holding one 32-bit seed; it has " +
                                std::to_string(c.partitions(op.src_seeds)) + " partitions of " +
                                std::to_string(c.free_size(op.src_seeds)) + " elements");
}

void check(Checker& c, const RandSetState& op) {
  check_state_engine(c, op.engine);
  c.buffer_in(op.src_seeds, "src_seeds", {Buffer::sbuf});
  check_state_tile(c, op.src_seeds, "src_seeds", op.engine);
}

void check(Checker& c, const RandGetState& op) {
  check_state_engine(c, op.engine);
  if (engine_or(op.engine, Engine::gpsimd) == Engine::gpsimd || nc_version(c.target()) < 4)
    c.buffer_in(op.dst, "dst", {Buffer::sbuf});
  else c.on_chip(op.dst, "dst");
  check_state_tile(c, op.dst, "dst", op.engine);
}

void check(Checker& c, const Rand2& op) {
  c.requires_gen(4);  // NeuronCore-v4 (trn3) and newer
  c.on_chip(op.dst, "dst");
  using enum DType;
  c.dtype_in(
      op.dst, "dst",
      {float8_e4m3, float8_e5m2, float16, bfloat16, float32, tfloat32, int8, int16, int32, uint8, uint16, uint32});
  scalar_or_column(c, op.min, "min", op.dst, {float32});
  scalar_or_column(c, op.max, "max", op.dst, {float32});
  if (op.min.is_imm() && op.max.is_imm() && !(op.min.imm < op.max.imm))
    c.fail("operand",
           "needs min < max; it has min " + std::to_string(op.min.imm) + " and max " + std::to_string(op.max.imm));
}

void check(Checker& c, const Dropout& op) {
  c.on_chip(op.dst, "dst");
  c.on_chip(op.data, "data");
  c.same_tile(op.dst, "dst", op.data, "data");
  c.same_dtype(op.dst, "dst", op.data, "data");
  using enum DType;
  if (is_integer(op.data.dtype)) scalar_or_column(c, op.prob, "prob", op.dst, {float32});
  else scalar_or_column(c, op.prob, "prob", op.dst, {float8_e4m3, float8_e5m2, float16, bfloat16, float32, tfloat32});
}

}  // namespace knit::ir
