// The verifier: every rule of the nki.isa docs that can be checked without running the
// kernel. A broken rule is a user error naming the rule, the limit and the kernel source line.
#pragma once

#include "knit/ir/ir.h"

namespace knit::ir {

// Per-target memory facts the rules need (bytes per partition; the NKI architecture guides).
struct TargetInfo {
  int64_t sbuf_partition_bytes;
  int64_t psum_partition_bytes;
  int64_t psum_bank_bytes;
  int64_t matmul_max_n;  // moving free size limit (one PSUM bank of fp32 on v2/v3)
  int64_t hbm_bytes;     // the device's HBM: no tensor is larger
};
TargetInfo target_info(Target t);

// A tensor declaration: rank >= 1, dims >= 1, partition dim <= 128, per-partition size within
// the target's SBUF/PSUM partition, address pins inside the buffer.
void verify_tensor(const Kernel& k, const TensorDecl& t);
// One instruction: its operands' views are in bounds and its ISA rules hold.
void verify_instruction(const Kernel& k, const Instruction& inst);
// The engine an nc_transpose runs on: its engine=, else TensorE for SBUF -> PSUM and VectorE
// (32 x 32 blocks) otherwise.
Engine nc_transpose_engine(const Kernel& k, const NcTranspose& op);
// The whole kernel: declarations, outputs (shared_hbm, declared), and every instruction.
void verify(const Kernel& k);

}  // namespace knit::ir
