// Rules for registers, control-flow blocks and DMA compute; the block-structure check of a whole
// kernel; and the rules every indirect view obeys.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "verify_rules.h"

namespace knit::ir {
namespace {

// Registers are virtual: any number a kernel names up to this bound (far beyond what any kernel
// uses; it keeps a corrupted IR from making the interpreter allocate gigabytes).
constexpr int kMaxRegisters = 1 << 16;

void register_id(const Checker& c, int id, const char* what) {
  if (id < 0 || id >= kMaxRegisters)
    c.fail("register", std::string(what) + " names register r" + std::to_string(id) + "; registers are r0..r" +
                           std::to_string(kMaxRegisters - 1));
}

void int_value(const Checker& c, const IntValue& v, const char* what) {
  if (v.is_reg()) register_id(c, v.reg, what);
  else if (v.imm < INT32_MIN || v.imm > UINT32_MAX)
    c.fail("register", std::string(what) + " = " + std::to_string(v.imm) + " does not fit in 32 bits");
}

// A register's tensor side: exactly one integer element (NKI: a 1-element tensor, 32-bit).
void scalar_tensor(const Checker& c, const View& v, const char* what) {
  if (v.num_elements() != 1)
    c.fail("register", std::string(what) + " must be a single element (e.g. t[0:1, 0:1]); it has " +
                           std::to_string(v.num_elements()));
  if (!is_integer(v.dtype))
    c.fail("dtype", std::string(what) + " has dtype " + std::string(to_string(v.dtype)) +
                        "; registers hold 32-bit integers, so use an int32/uint32 tensor");
}

}  // namespace

void check(Checker& c, const RegisterMove& op) {
  register_id(c, op.dst.id, "dst");
  int_value(c, op.src, "src");
}

void check(Checker& c, const RegisterLoad& op) {
  register_id(c, op.dst.id, "dst");
  scalar_tensor(c, op.src, "src");
}

void check(Checker& c, const RegisterStore& op) {
  register_id(c, op.src.id, "src");
  scalar_tensor(c, op.dst, "dst");
}

void check(Checker& c, const RegisterAlu& op) {
  register_id(c, op.dst.id, "dst");
  int_value(c, op.a, "a");
  int_value(c, op.b, "b");
  switch (op.op) {
    case AluOp::add:
    case AluOp::subtract:
    case AluOp::multiply:
    case AluOp::divide:
    case AluOp::mod:
    case AluOp::maximum:
    case AluOp::minimum:
    case AluOp::equal:
    case AluOp::not_equal:
    case AluOp::less:
    case AluOp::less_equal:
    case AluOp::greater:
    case AluOp::greater_equal:
    case AluOp::bitwise_and:
    case AluOp::bitwise_or:
    case AluOp::bitwise_xor:
    case AluOp::left_shift:
    case AluOp::right_shift:
    case AluOp::logical_and:
    case AluOp::logical_or: return;
    default:
      c.fail("alu-op", "register arithmetic has no '" + std::string(to_string(op.op)) +
                           "'; use add, subtract, multiply, divide, mod, maximum, minimum, a comparison, a bitwise or "
                           "a logical op");
  }
}

void check(Checker& c, const Loop& op) {
  register_id(c, op.iv.id, "iv");
  int_value(c, op.start, "start");
  int_value(c, op.stop, "stop");
  if (op.step < 1 || op.step > INT32_MAX)
    c.fail("loop-step", "step is " + std::to_string(op.step) + " but must be a positive 32-bit integer");
}

void check(Checker& c, const While& op) { register_id(c, op.cond.id, "cond"); }
void check(Checker& c, const If& op) { register_id(c, op.cond.id, "cond"); }
void check(Checker&, const Else&) {}
void check(Checker&, const End&) {}

void check(Checker& c, const DmaCompute& op) {
  if (op.srcs.empty() || op.srcs.size() > 16)
    c.fail("dma-compute", "takes 1 to 16 srcs; got " + std::to_string(op.srcs.size()));
  if (op.reduce_op != AluOp::add) c.fail("alu-op", "reduce_op must be add (the only DMA compute operation)");
  for (double s : op.scales)
    if (s != 1.0) c.fail("dma-compute", "scales must all be 1.0 (DMA compute only adds)");
  if (!op.scales.empty() && op.scales.size() != op.srcs.size())
    c.fail("dma-compute", "scales has " + std::to_string(op.scales.size()) + " entries for " +
                              std::to_string(op.srcs.size()) + " srcs");
  if (c.in_psum(op.dst)) c.fail("buffer", "dst must be in HBM or SBUF");
  for (const View& src : op.srcs) {
    if (c.in_psum(src)) c.fail("buffer", "srcs must be in HBM or SBUF; copy PSUM results out with tensor_copy");
    if (src.num_elements() != op.dst.num_elements())
      c.fail("dma-size", "dst has " + std::to_string(op.dst.num_elements()) + " elements but a src has " +
                             std::to_string(src.num_elements()));
  }
  const bool indirect = !op.dst.is_static() || std::any_of(op.srcs.begin(), op.srcs.end(),
                                                           [](const View& v) { return v.index_view() != nullptr; });
  if (indirect && op.dst.index_view() && op.srcs.size() != 2)
    c.fail("dma-compute", "an indirect (scatter-add) dma_compute takes exactly 2 srcs: the dst rows and the values");
}

void check(Checker& c, const Program& op) {
  if (op.id < 0) c.fail("program", "program ids start at 0");
}

void check(Checker& c, const CoreBarrier& op) {
  c.requires_gen(3);
  if (op.cores.empty()) c.fail("core-barrier", "cores must name the participating cores, e.g. (0, 1)");
  std::vector<int64_t> sorted = op.cores;
  std::sort(sorted.begin(), sorted.end());
  if (sorted.front() < 0 || std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    c.fail("core-barrier", "cores must be distinct non-negative core ranks");
  c.engine_in(op.engine, {Engine::gpsimd, Engine::vector, Engine::scalar, Engine::sync});
}

void check(Checker& c, const SendRecv& op) {
  c.requires_gen(3);
  c.buffer_in(op.src, "src", {Buffer::sbuf});
  c.buffer_in(op.dst, "dst", {Buffer::sbuf});
  c.same_dtype(op.dst, "dst", op.src, "src");
  c.same_tile(op.dst, "dst", op.src, "src");
  if (op.send_to_rank < 0 || op.recv_from_rank < 0) c.fail("sendrecv", "ranks must be non-negative");
  if (op.pipe_id < 0) c.fail("sendrecv", "pipe_id must be non-negative");
}

void verify_programs(const Kernel& k) {
  int64_t programs = 0;
  for (const Instruction& inst : k.body)
    if (const auto* p = std::get_if<Program>(&inst.op)) {
      if (p->id != programs)
        user_error(inst.loc, "program",
                   "program " + std::to_string(p->id) + " follows program " + std::to_string(programs - 1) +
                       "; instances must appear in order");
      ++programs;
    }
  const int64_t cores = std::max<int64_t>(programs, 1);
  int64_t rank = 0;
  auto check_rank = [&](const Instruction& inst, int64_t r, const char* what) {
    if (r >= cores)
      user_error(inst.loc, "lnc",
                 std::string(inst.opcode_name()) + ": " + what + " " + std::to_string(r) +
                     " does not exist: the kernel runs on " + std::to_string(cores) +
                     " core(s); launch it on a grid, e.g. kernel[2](...), for LNC2");
  };
  for (const Instruction& inst : k.body) {
    if (const auto* p = std::get_if<Program>(&inst.op)) rank = p->id;
    if (const auto* b = std::get_if<CoreBarrier>(&inst.op)) {
      for (int64_t c : b->cores) check_rank(inst, c, "core");
      if (std::find(b->cores.begin(), b->cores.end(), rank) == b->cores.end())
        user_error(inst.loc, "core-barrier",
                   "core " + std::to_string(rank) + " waits at a barrier whose cores do not include it");
    }
    if (const auto* s = std::get_if<SendRecv>(&inst.op)) {
      check_rank(inst, s->send_to_rank, "send_to_rank");
      check_rank(inst, s->recv_from_rank, "recv_from_rank");
      if (s->send_to_rank == rank || s->recv_from_rank == rank)
        user_error(inst.loc, "sendrecv", "core " + std::to_string(rank) + " cannot send to or receive from itself");
    }
  }
}

void check_indirect(const Kernel& k, const Instruction& inst, const View& v, const char* what) {
  const View& index = *v.index_view();
  auto fail = [&](const std::string& message) {
    user_error(inst.loc, "indirect", std::string(inst.opcode_name()) + ": " + what + ": " + message);
  };
  if (index.tensor < 0 || index.tensor >= static_cast<int>(k.tensors.size()))
    fail("the vector_offset index refers to undeclared tensor %" + std::to_string(index.tensor));
  if (inst.opcode() != Opcode::dma_copy && inst.opcode() != Opcode::dma_compute)
    fail("indirect (vector_offset) access is a DMA feature; only dma_copy and dma_compute take such views");
  if (!is_hbm(k.tensor_of(v).buffer)) fail("vector_offset indexes rows of an HBM tensor; this view is on-chip");
  if (v.indirect_dim < 0 || v.indirect_dim >= static_cast<int>(v.dims.size()))
    fail("indirect_dim " + std::to_string(v.indirect_dim) + " is not a dim of the " + std::to_string(v.dims.size()) +
         "-D access pattern");
  if (k.tensor_of(index).buffer != Buffer::sbuf) fail("the vector_offset index tensor must be in SBUF");
  if (index.dtype != DType::int32 && index.dtype != DType::uint32)
    fail("the vector_offset index tensor has dtype " + std::string(to_string(index.dtype)) + "; use int32 or uint32");
  if (!index.is_static()) fail("the vector_offset index view must itself be static");
  const int64_t want = v.dims[v.indirect_dim].num;
  if (index.num_elements() != want)
    fail("the index view has " + std::to_string(index.num_elements()) + " elements but the indirect dim has " +
         std::to_string(want) + " (one index per row)");
}

void verify_blocks(const Kernel& k) {
  struct Open {
    Opcode op;
    const Instruction* inst;
    bool has_else = false;
  };
  std::vector<Open> open;
  for (const Instruction& inst : k.body) {
    switch (inst.opcode()) {
      case Opcode::loop:
      case Opcode::while_:
      case Opcode::if_: open.push_back({inst.opcode(), &inst}); break;
      case Opcode::else_:
        if (open.empty() || open.back().op != Opcode::if_ || open.back().has_else)
          user_error(inst.loc, "block", "else without a matching if");
        open.back().has_else = true;
        break;
      case Opcode::end:
        if (open.empty()) user_error(inst.loc, "block", "end without an open loop / while / if");
        open.pop_back();
        break;
      case Opcode::program:
        if (!open.empty()) user_error(inst.loc, "block", "a program (grid instance) starts inside an open block");
        break;
      default: break;
    }
  }
  if (!open.empty())
    user_error(open.back().inst->loc, "block", std::string(opcode_name(open.back().op)) + " block is never closed");
}

}  // namespace knit::ir
