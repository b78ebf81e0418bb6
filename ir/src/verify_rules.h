// Shared machinery for the per-instruction verifier rules (verify_*.cpp). Each rule file defines
// `check(Checker&, const Op&)` for its instructions; verifier.cpp dispatches on the opcode.
#pragma once

#include <initializer_list>
#include <string>

#include "knit/ir/ir.h"
#include "knit/ir/verifier.h"
#include "knit/ir/view.h"

namespace knit::ir {

class Checker {
 public:
  Checker(const Kernel& k, const Instruction& inst) : k_(k), inst_(inst) {}

  const Kernel& kernel() const { return k_; }
  Target target() const { return k_.target; }
  const TensorDecl& tensor(const View& v) const { return k_.tensor(v.tensor); }

  // Throws a user error "<op>: <message>" with the instruction's location.
  [[noreturn]] void fail(const std::string& rule, const std::string& message) const;

  int64_t partitions(const View& v) const { return view_partitions(tensor(v), v); }
  int64_t free_size(const View& v) const { return view_free_size(tensor(v), v); }
  Buffer buffer(const View& v) const { return tensor(v).buffer; }
  // On-chip: the tensor's partition size counted in elements of the view's dtype.
  int64_t partition_size(const View& v) const;
  // On-chip: the absolute first partition a view touches (its address= pin included).
  int64_t start_partition(const View& v) const;
  bool in_psum(const View& v) const { return buffer(v) == Buffer::psum; }

  // Operand `what` must live in one of `allowed`.
  void buffer_in(const View& v, const char* what, std::initializer_list<Buffer> allowed) const;
  // Operand must be on-chip (SBUF or PSUM).
  void on_chip(const View& v, const char* what) const { buffer_in(v, what, {Buffer::sbuf, Buffer::psum}); }
  void not_psum(const View& v, const char* what, const char* why) const;
  // Operands a and b have equal partition counts / elements per partition.
  void same_partitions(const View& a, const char* an, const View& b, const char* bn) const;
  void same_free_size(const View& a, const char* an, const View& b, const char* bn) const;
  // Both at once: the usual element-wise operand match.
  void same_tile(const View& a, const char* an, const View& b, const char* bn) const {
    same_partitions(a, an, b, bn);
    same_free_size(a, an, b, bn);
  }
  // A [P, 1] column operand (one value per partition) matching `like`'s partitions.
  void column(const View& v, const char* what, const View& like) const;
  // Operand's dtype must be one of `allowed`.
  void dtype_in(const View& v, const char* what, std::initializer_list<DType> allowed) const;
  void integer_dtype(const View& v, const char* what) const;
  // Operands a and b must have the same dtype (the instruction moves bits, it cannot convert).
  void same_dtype(const View& a, const char* an, const View& b, const char* bn) const;
  // Engine choice must be one of `allowed` (unknown is always accepted).
  void engine_in(Engine e, std::initializer_list<Engine> allowed) const;
  // The instruction needs at least nc_version `min_gen` (2 = trn1, 3 = trn2, 4 = trn3).
  void requires_gen(int min_gen) const;
  void alu_class_in(AluOp op, const char* what, std::initializer_list<AluClass> allowed) const;
  void reduction_op(AluOp op, const char* what) const;

 private:
  const Kernel& k_;
  const Instruction& inst_;
};

// Rules shared by nc_matmul and nc_matmul_mx (verify_data.cpp).
// The PE-array tile an instruction may use (rows bound the contraction partitions, cols the
// stationary free size): 128x128 unless tile_position/tile_size select a smaller one.
struct MatmulTile {
  int64_t rows = 128, cols = 128;
};
MatmulTile check_matmul_tiling(Checker& c, const IntList& position, const IntList& size);
// dst: PSUM, [M, N], N within the target's limit, fp32 (or bf16 on trn3), within one bank on v2/v3.
void check_matmul_dst(Checker& c, const View& dst, int64_t M, int64_t N);

std::string list_text(std::initializer_list<std::string_view> items);

// Rules of an indirect view `what` of `inst` (verify_control.cpp).
void check_indirect(const Kernel& k, const Instruction& inst, const View& v, const char* what);
// Rules of the instruction's .indirect() operands, if any (verify_indirect.cpp).
void check_column_indirection(const Checker& c, const Instruction& inst);
// Every loop / while / if is closed by an end, every else belongs to an if.
void verify_blocks(const Kernel& k);
// Grid instances appear in order; core_barrier / sendrecv name cores that exist.
void verify_programs(const Kernel& k);

#define KNIT_X(type, name) void check(Checker& c, const type& op);
KNIT_OPS(KNIT_X)
#undef KNIT_X

}  // namespace knit::ir
