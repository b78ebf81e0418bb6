#include "knit/ir/op_traits.h"

#include "knit/ir/verifier.h"

namespace knit::ir {

Engine nc_transpose_engine_of(const Kernel& k, const Instruction& inst) {
  return nc_transpose_engine(k, std::get<NcTranspose>(inst.op));
}

// NKI places the power ALU op on GpSimd and every other tensor_tensor op on the Vector Engine.
Engine tensor_tensor_engine_of(const Kernel&, const Instruction& inst) {
  return std::get<TensorTensor>(inst.op).op == AluOp::power ? Engine::gpsimd : Engine::vector;
}

}  // namespace knit::ir
