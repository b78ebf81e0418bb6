// The semantics of nki.collectives, independent of where the ranks run: which ranks meet at a
// collective, and what each of them receives. The machine (machine_collectives.cpp) gathers the
// operands of every rank of a group, in-process or through a CollectiveTransport (a
// torch.distributed job), and writes what receive() returns, so both give the same bytes.
//
// Rounding model: a reduction (all_reduce, reduce_scatter) combines the ranks' values in
// rank-position order (position 0 first, then 1, ...), in fp32 for floating-point dtypes (each
// step rounded to fp32) and in 64-bit integers for integer dtypes, and rounds once to the dst
// dtype when it is written (integers saturate). Whatever order the ranks arrive in, the result
// has the same bits.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "knit/ir/ir.h"
#include "knit/sim/interpreter.h"

namespace knit::sim {

// Whether the kernel calls any collective (it then runs as ranks).
bool has_collectives(const ir::Kernel& k);

// The ranks that meet at `op` when `rank` calls it, in position order: its replica sub-list;
// for collective_permute, every rank the pairs name (empty when no pair names `rank`).
std::vector<int64_t> collective_members(const ir::Collective& op, int64_t rank);

// What the rank at position `receiver` gets: dst elements (bits, in dst's dtype) where covered
// is set; the others stay as they were. recv_counts: the *_v variants' metadata row 2.
struct Received {
  std::vector<uint32_t> bits;
  std::vector<uint8_t> covered, poisoned;
  std::vector<uint32_t> recv_counts;
};

struct CollectiveShapes {
  ir::DType dtype = ir::DType::float32;
  std::vector<int64_t> src_shape;  // the calling rank's (all ranks' are equal: checked before)
  int64_t dst_size = 0;
};

// Raises a run-time error (a *_v count beyond its buffer) with the rule name.
using CollectiveFail = std::function<void(const std::string& rule, const std::string& message)>;

// `members` are collective_members(op, any member), `ranks` their operands, in the same order.
Received receive(const ir::Collective& op, const CollectiveShapes& shapes, const std::vector<int64_t>& members,
                 const std::vector<RankOperands>& ranks, size_t receiver, const CollectiveFail& fail);

}  // namespace knit::sim
