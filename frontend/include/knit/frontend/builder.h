// The one IR builder both front ends trace into. Each ISA call of a C++ (dsl/) or Python
// (python/knit) kernel appends one instruction here; the instruction is verified as it is
// appended, so a rule violation is reported at the kernel line that caused it, while tracing.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "knit/ir/ir.h"

namespace knit::frontend {

class Builder {
 public:
  Builder(std::string kernel_name, ir::Target target);
  ~Builder();  // out of line, like append_op: see there

  // Declares a kernel parameter (an HBM tensor supplied by the caller); returns its tensor id.
  int add_param(std::string name, ir::DType dtype, std::vector<int64_t> shape, SourceLoc loc);
  // Declares a tensor (nl.ndarray); verified at once. Returns its tensor id. An empty name gets
  // an automatic one, t<n> for the n-th add_tensor call (rolled loops' iterations included).
  int add_tensor(std::string name, ir::Buffer buffer, ir::DType dtype, std::vector<int64_t> shape,
                 std::optional<std::array<int64_t, 2>> address, SourceLoc loc);
  // Verifies and appends one instruction.
  void append(ir::Instruction inst);
  // Scheduling edge: body instruction `consumer` runs after `producer` (another body index; a
  // later one is checked by lowering, codegen's add_backward_edges); a bad index is a user error
  // at `loc`. Repeated edges are kept once.
  void add_order(size_t consumer, size_t producer, const SourceLoc& loc);
  // The kernel's results. `share_private_hbm` (G1 kernels, whose outputs were private HBM before
  // NKI 0.3 required shared_hbm): a result declared in private HBM becomes shared_hbm.
  void set_outputs(std::vector<int> tensor_ids, bool share_private_hbm = false);
  // A fresh register id. Registers r0, r1, ... are numbered per kernel in the order the front
  // end asks for them, so both front ends number a kernel's registers alike.
  int new_register() { return register_count_++; }
  // Rolled host loops (docs/architecture.md, "Rolled loops"): a front end traces the body of
  // `for i in affine_range(start, stop, step)` once, between begin_rolled and end_rolled, with i
  // a symbol: the returned id, used as a register term of views (RegTerm.reg, never a kernel
  // register). end_rolled expands the body into every iteration, exactly the tensors,
  // registers and instructions an unrolled trace would have produced, in the same order.
  // A later instruction that uses what only the traced iteration made (a tensor declared in the
  // body, the symbol) cannot be expanded faithfully: append then fails with rule
  // kRolledEscapeRule, message = the loop's serial, and the front end traces again with that
  // loop unrolled (it never reaches the user).
  int begin_rolled(int64_t start, int64_t stop, int64_t step);
  void end_rolled();
  // Whether an instruction at body index `first` or later names tensor `id` in a view.
  bool uses_tensor_since(size_t first, int id) const;
  // Serial of a rolled loop's symbol (the loops' begin order), or -1 for a kernel register.
  static int rolled_serial(int reg);

  const ir::Kernel& kernel() const { return kernel_; }
  const ir::TensorDecl& tensor(int id) const { return kernel_.tensor(id); }
  // Verifies the whole kernel and hands it over.
  ir::Kernel finish();

  // The builder that ISA calls on this thread append to (set by Scope); throws a user error
  // when no kernel is being traced.
  static Builder& current(const SourceLoc& loc);

  // Makes `b` the current builder for its lifetime (nests; restores the previous one).
  class Scope {
   public:
    explicit Scope(Builder& b);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    Builder* previous_;
  };

 private:
  struct RolledLoop {
    int serial;
    int64_t start, stop, step;
    size_t first_instruction, first_tensor;
    int first_register;
  };
  void check_escapes(const ir::Instruction& inst) const;

  ir::Kernel kernel_;
  int register_count_ = 0;
  int auto_names_ = 0;
  std::vector<bool> auto_named_;    // per tensor id: its name is an automatic one
  std::vector<RolledLoop> rolled_;  // open rolled loops, innermost last
  int rolled_serials_ = 0;
  // Per tensor id / register id: 1 + serial of the closed rolled loop whose traced iteration
  // made it (0: none). Empty until a loop with two or more iterations closes.
  std::vector<int> closed_tensor_, closed_register_;
};

inline constexpr const char* kRolledEscapeRule = "rolled-loop-escape";
// Rolled loops' symbols are register ids from here up, far above any kernel register (the
// verifier allows r0..r65535), so a symbol that reaches a register operand is rejected.
inline constexpr int kRolledSymbolBase = 1 << 28;

// Appends `op` (one of ir::OpVariant's types), issued at the kernel line `loc`, to the current
// builder's kernel. Defined for each op type in builder.cpp, not inline, so that a C++ kernel
// file compiles calls to it instead of the std::variant code of every instruction kind: that
// code was most of what Clang generated for a kernel file.
template <class Op>
void append_op(Op&& op, const SourceLoc& loc, std::string name);

}  // namespace knit::frontend
