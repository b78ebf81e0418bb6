// Scalar semantics of the ALU operators and activation functions, shared by every executor.
// All arithmetic is fp32 (nki-api.md §3.0); bit-vector ops work on 32-bit integer patterns.
#pragma once

#include <cstdint>

#include "knit/ir/types.h"

namespace knit::sim {

// a op b for an Arith or Unary op (Unary ops ignore b). Comparisons and logical ops give 1.0/0.0.
float alu(ir::AluOp op, float a, float b);
// a op b on bit patterns for a Bitvec/BitvecUnary op (shifts are logical; invert ignores b).
uint32_t alu_bits(ir::AluOp op, uint32_t a, uint32_t b);
// The activation function f(x), computed in fp32 (`alpha` is prelu's slope).
float activate(ir::ActFunc f, float x, float alpha = 0.0f);

}  // namespace knit::sim
