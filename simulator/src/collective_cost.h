// The collective cost model: where a replica group's ranks sit (one chip, one node over
// NeuronLink, several nodes over EFA), and the ring algorithm's steps of latency + bytes over
// the slowest hop's bandwidth (two-level rings for reductions and gathers across nodes). The topology facts are one
// table (collective_cost.cpp, each with its source); docs/collectives.md gives the formulas.
#pragma once

#include <cstdint>
#include <vector>

#include "knit/ir/ir.h"

namespace knit::sim {

struct CollectiveCost {
  // "chip", "neuronlink", "efa", a two-level "chip+efa" / "neuronlink+efa" (all_reduce,
  // all_gather, reduce_scatter across nodes with as many of the group's ranks on each), or "none"
  // (a single rank)
  const char* path = "none";
  int64_t steps = 0;      // ring steps, every phase's
  double step_bytes = 0;  // bytes each rank sends per step, on average over the steps
  double step_latency_ns = 0;
  double bytes_per_ns = 0;  // per rank, on the slowest hop
  double ns = 0;            // the sum over phases of steps * (latency + bytes / bandwidth)
};

// The cost of `op` among `members` (world ranks, in position order) on `target`, for a src of
// src_bytes and a dst of dst_bytes on each rank, with `lnc` physical cores per rank (0: the
// target's default, 1 on trn1 and 2 on trn2 / trn3).
CollectiveCost collective_cost(const ir::Collective& op, const std::vector<int64_t>& members, int64_t src_bytes,
                               int64_t dst_bytes, ir::Target target, int lnc = 0);

// The target's default logical-core size (physical cores per rank).
int default_lnc(ir::Target target);

}  // namespace knit::sim
