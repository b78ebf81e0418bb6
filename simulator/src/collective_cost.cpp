#include "collective_cost.h"

#include <algorithm>
#include <map>

#include "knit/sim/machine_config.h"

namespace knit::sim {

using namespace knit::ir;

namespace {

// Where ranks sit and how fast the links between them are. Sources, all pages of AWS's Neuron
// documentation: [chip] the Trainium / Trainium2 / Trainium3 architecture pages (NeuronLink
// bandwidth per chip: "Inter-chip Interconnect" 384 and 1280 GB/s per chip, NeuronLink-v4
// 2.56 TB/s per device); [inst] the Trn1 and Trn2 instance pages (16 chips per instance; EFA
// 800 Gbps per trn1.32xlarge, 200 Gbps per Trainium2 chip; about 15 us minimal inter-server
// latency); [lnc] the Logical NeuronCore page (trn2 and trn3 default to LNC=2, two of a chip's 8
// cores per rank). "estimated" = Knit's estimate, no published figure.
struct Topology {
  Target target;
  int cores_per_chip;        // trn1: 2, trn2/trn3: 8 [arch]
  int default_lnc;           // physical cores per rank: trn1 1, trn2/trn3 2 [lnc]
  int chips_per_node;        // [inst]
  double link_bytes_per_ns;  // NeuronLink, per chip, all links together [chip]
  double efa_bytes_per_ns;   // EFA, per chip [inst]
  double link_latency_ns;    // per ring step over NeuronLink (estimated: a DMA's fixed cost + a hop)
  double efa_latency_ns;     // per ring step across nodes [inst]
};

constexpr Topology kTopologies[] = {
    {Target::trn1, 2, 1, 16, 384, 800.0 / 8 / 16, 2000, 15000},  // EFA: 800 Gbps per 16-chip instance
    {Target::trn2, 8, 2, 16, 1280, 200.0 / 8, 2000, 15000},
    {Target::trn3, 8, 2, 16, 2560, 200.0 / 8, 2000, 15000},  // EFA as trn2 (estimated: no trn3 figure)
};

const Topology& topology(Target t) {
  for (const Topology& topo : kTopologies)
    if (topo.target == t) return topo;
  return kTopologies[1];
}

// The most members on one chip: they share its links.
int64_t busiest_chip(const std::vector<int64_t>& members, int per_chip) {
  std::map<int64_t, int64_t> on_chip;
  int64_t most = 0;
  for (int64_t r : members) most = std::max(most, ++on_chip[r / per_chip]);
  return most;
}

// Ring steps and the bytes each rank sends per step (src / dst: one rank's sizes).
void ring_shape(const Collective& op, int64_t n, double src, double dst, CollectiveCost& c) {
  switch (op.kind) {
    case CollectiveKind::all_reduce:  // reduce-scatter then all-gather of 1/n chunks
      c.steps = 2 * (n - 1), c.step_bytes = src / n;
      break;
    case CollectiveKind::all_gather: c.steps = n - 1, c.step_bytes = src; break;
    case CollectiveKind::reduce_scatter:
    case CollectiveKind::all_to_all: c.steps = n - 1, c.step_bytes = src / n; break;
    case CollectiveKind::all_gather_v:
    case CollectiveKind::all_to_all_v:  // at most a receive slot per step
      c.steps = n - 1, c.step_bytes = dst / n;
      break;
    default:  // the permutes: one step
      c.steps = 1, c.step_bytes = src;
      break;
  }
}

}  // namespace

int default_lnc(Target target) { return topology(target).default_lnc; }

CollectiveCost collective_cost(const Collective& op, const std::vector<int64_t>& members, int64_t src_bytes,
                               int64_t dst_bytes, Target target, int lnc) {
  CollectiveCost c;
  const int64_t n = static_cast<int64_t>(members.size());
  if (n < 2) return c;
  const Topology& topo = topology(target);
  const int ranks_per_chip = topo.cores_per_chip / (lnc > 0 ? lnc : topo.default_lnc);
  const int64_t per_node = int64_t{ranks_per_chip} * topo.chips_per_node;
  auto same = [&](int64_t unit) {
    return std::all_of(members.begin(), members.end(), [&](int64_t r) { return r / unit == members[0] / unit; });
  };
  const double sharing = static_cast<double>(busiest_chip(members, ranks_per_chip));
  if (same(ranks_per_chip)) {  // cores of one chip: through HBM by DMA
    const MachineConfig& config = machine_config(target);
    c.path = "chip", c.step_latency_ns = config.dma_fixed_ns;
    c.bytes_per_ns = config.hbm_bytes_per_ns;
  } else if (same(per_node)) {
    c.path = "neuronlink", c.step_latency_ns = topo.link_latency_ns;
    c.bytes_per_ns = topo.link_bytes_per_ns / sharing;
  } else {
    c.path = "efa", c.step_latency_ns = topo.efa_latency_ns;
    c.bytes_per_ns = topo.efa_bytes_per_ns / sharing;
  }
  ring_shape(op, n, static_cast<double>(src_bytes), static_cast<double>(dst_bytes), c);
  c.ns = static_cast<double>(c.steps) * (c.step_latency_ns + c.step_bytes / c.bytes_per_ns);
  return c;
}

}  // namespace knit::sim
