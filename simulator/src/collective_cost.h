// The collective cost model: where a replica group's ranks sit (one chip, one node over
// NeuronLink, several nodes over EFA), and the ring algorithm's steps of latency + bytes over
// the slowest hop's bandwidth. The topology facts are one table (collective_cost.cpp, each with
// its source); docs/collectives.md gives the formulas.
#pragma once

#include <cstdint>
#include <vector>

#include "knit/ir/ir.h"

namespace knit::sim {

struct CollectiveCost {
  const char* path = "none";  // "chip", "neuronlink", "efa" or "none" (a single rank)
  int64_t steps = 0;          // ring steps
  double step_bytes = 0;      // bytes each rank sends per step
  double step_latency_ns = 0;
  double bytes_per_ns = 0;  // per rank, on the slowest hop
  double ns = 0;            // steps * (step_latency_ns + step_bytes / bytes_per_ns)
};

// The cost of `op` among `members` (world ranks, in position order) on `target`, for a src of
// src_bytes and a dst of dst_bytes on each rank, with `lnc` physical cores per rank (0: the
// target's default, 1 on trn1 and 2 on trn2 / trn3).
CollectiveCost collective_cost(const ir::Collective& op, const std::vector<int64_t>& members, int64_t src_bytes,
                               int64_t dst_bytes, ir::Target target, int lnc = 0);

// The target's default logical-core size (physical cores per rank).
int default_lnc(ir::Target target);

}  // namespace knit::sim
