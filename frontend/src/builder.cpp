#include "knit/frontend/builder.h"

#include <algorithm>

#include "knit/ir/verifier.h"

namespace knit::frontend {
namespace {
thread_local Builder* current_builder = nullptr;
}

Builder::Builder(std::string kernel_name, ir::Target target) {
  kernel_.name = std::move(kernel_name);
  kernel_.target = target;
}

Builder::~Builder() = default;

template <class Op>
void append_op(Op&& op, const SourceLoc& loc, std::string name) {
  ir::Instruction inst;
  inst.op = std::move(op);
  inst.loc = loc;
  inst.name = std::move(name);
  Builder::current(loc).append(std::move(inst));
}
#define KNIT_X(type, name) template void append_op<ir::type>(ir::type&&, const SourceLoc&, std::string);
KNIT_OPS(KNIT_X)
#undef KNIT_X

int Builder::add_param(std::string name, ir::DType dtype, std::vector<int64_t> shape, SourceLoc loc) {
  ir::TensorDecl t;
  t.name = std::move(name);
  t.buffer = ir::Buffer::hbm;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.is_param = true;
  t.loc = std::move(loc);
  ir::verify_tensor(kernel_, t);
  kernel_.tensors.push_back(std::move(t));
  const int id = static_cast<int>(kernel_.tensors.size()) - 1;
  kernel_.params.push_back(id);
  return id;
}

int Builder::add_tensor(std::string name, ir::Buffer buffer, ir::DType dtype, std::vector<int64_t> shape,
                        std::optional<std::array<int64_t, 2>> address, SourceLoc loc) {
  ir::TensorDecl t;
  const bool automatic = name.empty();
  t.name = automatic ? "t" + std::to_string(auto_names_ + 1) : std::move(name);
  t.buffer = buffer;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.address = address;
  t.loc = std::move(loc);
  ir::verify_tensor(kernel_, t);
  ++auto_names_;
  kernel_.tensors.push_back(std::move(t));
  auto_named_.resize(kernel_.tensors.size() - 1, false);
  auto_named_.push_back(automatic);
  return static_cast<int>(kernel_.tensors.size()) - 1;
}

void Builder::append(ir::Instruction inst) {
  if (!rolled_.empty() || !closed_tensor_.empty()) check_escapes(inst);
  ir::verify_instruction(kernel_, inst);
  kernel_.body.push_back(std::move(inst));
}

void Builder::add_order(size_t consumer, size_t producer, const SourceLoc& loc) {
  if (consumer >= kernel_.body.size() || producer >= kernel_.body.size() || producer == consumer)
    user_error(loc, "schedule",
               "a scheduling edge must order an instruction after another issued one (body index " +
                   std::to_string(consumer) + " after " + std::to_string(producer) + ")");
  std::vector<uint32_t>& after = kernel_.body[consumer].after;
  const auto p = static_cast<uint32_t>(producer);
  if (std::find(after.begin(), after.end(), p) == after.end()) after.push_back(p);
}

void Builder::set_outputs(std::vector<int> tensor_ids, bool share_private_hbm) {
  kernel_.outputs = std::move(tensor_ids);
  if (!share_private_hbm) return;
  for (int id : kernel_.outputs) {
    ir::TensorDecl& t = kernel_.tensors.at(static_cast<size_t>(id));
    if (t.buffer == ir::Buffer::hbm && !t.is_param) t.buffer = ir::Buffer::shared_hbm;
  }
}

ir::Kernel Builder::finish() {
  ir::verify(kernel_);
  return std::move(kernel_);
}

Builder& Builder::current(const SourceLoc& loc) {
  if (!current_builder)
    user_error(loc, "no-kernel",
               "a Knit language or ISA call ran outside a kernel being traced; "
               "call the kernel through knit::trace (C++) or @knit.jit (Python)");
  return *current_builder;
}

Builder::Scope::Scope(Builder& b) : previous_(current_builder) { current_builder = &b; }
Builder::Scope::~Scope() { current_builder = previous_; }

}  // namespace knit::frontend
