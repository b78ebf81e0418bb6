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

}  // namespace knit::ir
