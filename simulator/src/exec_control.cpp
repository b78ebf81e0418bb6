// Semantics: registers and the multi-core markers. The control-flow instructions (loop, while, if, else, end) move the
// program counter and are executed by Machine::control, never through exec.
#include <cstdint>

#include "exec_state.h"

namespace knit::sim {

using namespace knit::ir;

namespace {

// Floor division and modulo (Python's // and %), as the register arithmetic of NkiScalar
// kernels written in Python expects. Division by zero is a kernel error.
int64_t floor_div(ExecState& m, int64_t a, int64_t b) {
  if (b == 0) m.fail("register-divide-by-zero", "register division by zero");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t register_alu(ExecState& m, AluOp op, int64_t a, int64_t b) {
  switch (op) {
    case AluOp::add: return a + b;
    case AluOp::subtract: return a - b;
    case AluOp::multiply: return a * b;
    case AluOp::divide: return floor_div(m, a, b);
    case AluOp::mod: return a - floor_div(m, a, b) * b;
    case AluOp::maximum: return a > b ? a : b;
    case AluOp::minimum: return a < b ? a : b;
    case AluOp::equal: return a == b;
    case AluOp::not_equal: return a != b;
    case AluOp::less: return a < b;
    case AluOp::less_equal: return a <= b;
    case AluOp::greater: return a > b;
    case AluOp::greater_equal: return a >= b;
    case AluOp::bitwise_and: return a & b;
    case AluOp::bitwise_or: return a | b;
    case AluOp::bitwise_xor: return a ^ b;
    // Shift counts use the low 5 bits, as a 32-bit machine does.
    case AluOp::left_shift: return static_cast<int64_t>(static_cast<uint32_t>(a) << (b & 31));
    case AluOp::right_shift: return static_cast<int32_t>(a) >> (b & 31);
    case AluOp::logical_and: return a != 0 && b != 0;
    case AluOp::logical_or: return a != 0 || b != 0;
    default: internal_error("register_alu: op passed the verifier but has no semantics");
  }
}

}  // namespace

void exec(ExecState& m, const RegisterMove& op) { m.set_reg(op.dst.id, m.value(op.src)); }

void exec(ExecState& m, const RegisterLoad& op) {
  Tile src = m.tile(op.src, "src");
  m.set_reg(op.dst.id, src.read_int(0));
}

void exec(ExecState& m, const RegisterStore& op) {
  Tile dst = m.tile(op.dst, "dst");
  dst.write_int(0, m.reg(op.src.id));
}

void exec(ExecState& m, const RegisterAlu& op) {
  m.set_reg(op.dst.id, register_alu(m, op.op, m.value(op.a), m.value(op.b)));
}

void exec(ExecState&, const Loop&) { internal_error("loop executed as data"); }
void exec(ExecState&, const While&) { internal_error("while executed as data"); }
void exec(ExecState&, const If&) { internal_error("if executed as data"); }
void exec(ExecState&, const Else&) { internal_error("else executed as data"); }
void exec(ExecState&, const End&) { internal_error("end executed as data"); }

// Grid-instance marker and synchronization: Machine::run_cores schedules the cores and moves
// sendrecv's data before stepping past these.
void exec(ExecState&, const Program&) {}
void exec(ExecState&, const CoreBarrier&) {}
void exec(ExecState&, const Collective&) {}
void exec(ExecState&, const SendRecv&) {}

}  // namespace knit::sim
