#include "collective_cost.h"

#include <algorithm>
#include <map>
#include <string_view>

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

}  // namespace

int default_lnc(Target target) { return topology(target).default_lnc; }

namespace {

struct Hop {
  const char* name;
  double latency_ns, bytes_per_ns;
};

struct Placement {
  const Topology& topo;
  int ranks_per_chip;
  int64_t per_node;
  bool same(const std::vector<int64_t>& ranks, int64_t unit) const {
    return std::all_of(ranks.begin(), ranks.end(), [&](int64_t r) { return r / unit == ranks[0] / unit; });
  }
  // The slowest hop a ring over `ranks` crosses, with the bandwidth share of one rank (the ranks
  // of `ranks` on one chip share its links).
  Hop hop(const std::vector<int64_t>& ranks, Target target) const {
    const double sharing = static_cast<double>(busiest_chip(ranks, ranks_per_chip));
    if (same(ranks, ranks_per_chip)) {  // cores of one chip: through HBM by DMA
      const MachineConfig& config = machine_config(target);
      return {"chip", config.dma_fixed_ns, config.hbm_bytes_per_ns};
    }
    if (same(ranks, per_node)) return {"neuronlink", topo.link_latency_ns, topo.link_bytes_per_ns / sharing};
    return {"efa", topo.efa_latency_ns, topo.efa_bytes_per_ns / sharing};
  }
  // The group's ranks on each node, when every node holds the same number (>= 2) of them.
  std::vector<std::vector<int64_t>> even_nodes(const std::vector<int64_t>& members) const {
    std::map<int64_t, std::vector<int64_t>> by_node;
    for (int64_t r : members) by_node[r / per_node].push_back(r);
    std::vector<std::vector<int64_t>> nodes;
    const size_t first = by_node.begin()->second.size();
    for (auto& [node, ranks] : by_node) {
      if (ranks.size() < 2 || ranks.size() != first) return {};
      nodes.push_back(std::move(ranks));
    }
    return nodes;
  }
};

struct Phase {
  int64_t steps;
  double bytes;  // each rank sends per step
  Hop hop;
};

// One ring over the group's slowest hop (src / dst: one rank's sizes).
Phase flat_ring(const Collective& op, int64_t n, double src, double dst, Hop hop) {
  switch (op.kind) {
    case CollectiveKind::all_reduce:  // reduce-scatter then all-gather of 1/n chunks
      return {2 * (n - 1), src / n, hop};
    case CollectiveKind::all_gather: return {n - 1, src, hop};
    case CollectiveKind::reduce_scatter:
    case CollectiveKind::all_to_all: return {n - 1, src / n, hop};
    case CollectiveKind::all_gather_v:
    case CollectiveKind::all_to_all_v:  // at most a receive slot per step
      return {n - 1, dst / n, hop};
    default:  // the permutes: one step
      return {1, src, hop};
  }
}

// all_reduce, all_gather and reduce_scatter across nodes, as NCCL-style two-level rings: within
// each node over its links, then across nodes over EFA (each of a node's ranks carries its own
// share), then within each node again. `l` ranks per node, `m` nodes, S a rank's src bytes.
std::vector<Phase> two_level(const Collective& op, int64_t l, int64_t m, double src, Hop in, Hop across) {
  switch (op.kind) {
    case CollectiveKind::all_reduce:  // reduce-scatter in, all-reduce of S/l across, all-gather in
      return {{l - 1, src / l, in}, {2 * (m - 1), src / (l * m), across}, {l - 1, src / l, in}};
    case CollectiveKind::all_gather:  // each rank's S across, then the node's m S within
      return {{m - 1, src, across}, {l - 1, m * src, in}};
    default:  // reduce_scatter: within (chunks of S/l), then across (chunks of S/(l m))
      return {{l - 1, src / l, in}, {m - 1, src / (l * m), across}};
  }
}

}  // namespace

CollectiveCost collective_cost(const Collective& op, const std::vector<int64_t>& members, int64_t src_bytes,
                               int64_t dst_bytes, Target target, int lnc) {
  CollectiveCost c;
  const int64_t n = static_cast<int64_t>(members.size());
  if (n < 2) return c;
  const Topology& topo = topology(target);
  const int ranks_per_chip = topo.cores_per_chip / (lnc > 0 ? lnc : topo.default_lnc);
  const Placement place{topo, ranks_per_chip, int64_t{ranks_per_chip} * topo.chips_per_node};
  const Hop hop = place.hop(members, target);
  const double src = static_cast<double>(src_bytes);
  std::vector<Phase> phases;
  const bool hierarchical = op.kind == CollectiveKind::all_reduce || op.kind == CollectiveKind::all_gather ||
                            op.kind == CollectiveKind::reduce_scatter;
  const std::vector<std::vector<int64_t>> nodes = std::string_view(hop.name) == "efa" && hierarchical
                                                      ? place.even_nodes(members)
                                                      : std::vector<std::vector<int64_t>>{};
  if (!nodes.empty()) {
    const Hop in = place.hop(nodes.front(), target);
    phases = two_level(op, static_cast<int64_t>(nodes.front().size()), static_cast<int64_t>(nodes.size()), src, in,
                       hop);
    c.path = std::string_view(in.name) == "chip" ? "chip+efa" : "neuronlink+efa";
  } else {
    phases = {flat_ring(op, n, src, static_cast<double>(dst_bytes), hop)};
    c.path = hop.name;
  }
  double bytes = 0;
  for (const Phase& p : phases) {
    c.steps += p.steps;
    bytes += static_cast<double>(p.steps) * p.bytes;
    c.ns += static_cast<double>(p.steps) * (p.hop.latency_ns + p.bytes / p.hop.bytes_per_ns);
  }
  c.step_bytes = c.steps ? bytes / static_cast<double>(c.steps) : 0;
  c.step_latency_ns = hop.latency_ns, c.bytes_per_ns = hop.bytes_per_ns;
  return c;
}

}  // namespace knit::sim
