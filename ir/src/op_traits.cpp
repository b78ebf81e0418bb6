#include "knit/ir/op_traits.h"

#include "knit/ir/verifier.h"

namespace knit::ir {

Engine explicit_engine(const Instruction& inst) {
  Engine e = Engine::unknown;
  for_each_field(inst, [&](const char* name, const auto& value) {
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, Engine>)
      if (std::string_view(name) == "engine") e = value;
  });
  return e;
}

Engine nc_transpose_engine_of(const Kernel& k, const Instruction& inst) {
  return nc_transpose_engine(k, std::get<NcTranspose>(inst.op));
}

// NKI places the power ALU op on GpSimd and every other tensor_tensor op on the Vector Engine.
Engine tensor_tensor_engine_of(const Kernel&, const Instruction& inst) {
  return std::get<TensorTensor>(inst.op).op == AluOp::power ? Engine::gpsimd : Engine::vector;
}

bool scalar_engine_runs(Target target, AluOp op0, AluOp op1) {
  if (nc_version(target) >= 4) return true;
  return (op0 == AluOp::multiply && (op1 == AluOp::add || op1 == AluOp::bypass)) ||
         (op0 == AluOp::add && op1 == AluOp::bypass);
}

namespace {

// The ALU ops an engine runs (the engine table of nki.isa's ALU operators): add and multiply on
// VectorE, ScalarE and GpSimd; rsqrt on ScalarE and GpSimd; reciprocal and abs on VectorE and
// ScalarE; power on GpSimd only; every other op on VectorE only.
bool alu_runs_on(AluOp op, Engine e) {
  switch (op) {
    case AluOp::bypass:
    case AluOp::add:
    case AluOp::multiply: return true;
    case AluOp::rsqrt: return e != Engine::vector;
    case AluOp::reciprocal:
    case AluOp::abs: return e != Engine::gpsimd;
    case AluOp::power: return e == Engine::gpsimd;
    default: return e == Engine::vector;
  }
}

struct OperandFacts {
  bool psum = false, all_float = true, indirect = false;
};

OperandFacts operand_facts(const Kernel& k, const Instruction& inst) {
  OperandFacts f;
  for_each_view(inst, [&](const char*, const View& v) {
    f.psum |= k.tensor(v.tensor).buffer == Buffer::psum;
    f.all_float &= is_float(v.dtype);
    f.indirect |= !v.indirect.empty();
  });
  return f;
}

}  // namespace

EngineChoice open_engines(const Kernel& k, const Instruction& inst) {
  const OpTraits& t = op_traits(inst.opcode());
  EngineChoice choice;
  if (const Engine named = explicit_engine(inst); named != Engine::unknown) {
    choice.engines[choice.count++] = named;
    return choice;
  }
  choice.engines[choice.count++] = t.engine_rule ? t.engine_rule(k, inst) : Engine(t.engine);
  if (choice.engines[0] != Engine::vector) return choice;
  bool scalar = false, gpsimd = false;
  if (const auto* op = std::get_if<TensorScalar>(&inst.op)) {
    scalar = alu_runs_on(op->op0, Engine::scalar) && alu_runs_on(op->op1, Engine::scalar) &&
             scalar_engine_runs(k.target, op->op0, op->op1);
    gpsimd = alu_runs_on(op->op0, Engine::gpsimd) && alu_runs_on(op->op1, Engine::gpsimd);
  } else if (const auto* op = std::get_if<TensorTensor>(&inst.op)) {
    gpsimd = op->op != AluOp::power && alu_runs_on(op->op, Engine::gpsimd);
  } else if (std::holds_alternative<TensorCopy>(inst.op)) {
    scalar = nc_version(k.target) >= 3;  // tensor_copy on ScalarE from NC-v3
    gpsimd = true;
  } else if (std::holds_alternative<Memset>(inst.op)) {
    gpsimd = true;
  } else {
    return choice;
  }
  const OperandFacts f = operand_facts(k, inst);
  if (!f.all_float || f.indirect) return choice;
  if (scalar) choice.engines[choice.count++] = Engine::scalar;
  if (gpsimd && !f.psum) choice.engines[choice.count++] = Engine::gpsimd;  // GpSimd cannot access PSUM
  return choice;
}

}  // namespace knit::ir
