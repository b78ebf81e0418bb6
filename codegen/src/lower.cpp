// The lowering pipeline, top-down: lower() runs the passes in order; each pass follows under
// its own header. See lower.h for the contracts and docs/codegen.md for the walk-through.
#include "knit/codegen/lower.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <queue>
#include <sstream>

#include "knit/codegen/access.h"
#include "knit/codegen/cost.h"
#include "knit/codegen/spill.h"
#include "knit/ir/op_traits.h"
#include "knit/ir/text.h"
#include "knit/ir/verifier.h"

namespace knit::codegen {

using namespace knit::ir;

namespace {

// Numbered dumps of what each pass produced (KNIT_DEBUG=1).
class Dumper {
 public:
  Dumper(const Kernel& k, std::string dir) {
    if (dir.empty()) {
      const char* debug = std::getenv("KNIT_DEBUG");
      if (!debug || std::string(debug) != "1") return;
      const char* d = std::getenv("KNIT_DEBUG_DIR");
      dir = d && *d ? d : "knit-debug";
    }
    dir_ = std::filesystem::path(dir) / k.name;
    std::filesystem::create_directories(dir_);
  }
  void operator()(const std::string& pass, const std::string& text) {
    if (dir_.empty()) return;
    char prefix[16];
    std::snprintf(prefix, sizeof prefix, "%02d-", ++count_);
    std::ofstream(dir_ / (prefix + pass + ".txt")) << text;
  }
  bool on() const { return !dir_.empty(); }

 private:
  std::filesystem::path dir_;
  int count_ = 0;
};

std::string plan_text(const Kernel& k, const MemoryPlan& plan) {
  std::ostringstream out;
  out << "# sbuf high-water " << plan.sbuf_high_water << " B/partition, psum " << plan.psum_high_water
      << " B/partition, cores " << plan.cores << '\n';
  for (size_t id = 0; id < plan.tensors.size(); ++id) {
    if (!plan.tensors[id]) continue;
    const Allocation& a = *plan.tensors[id];
    out << k.tensors[id].name << " (t" << id << ") " << to_string(k.tensors[id].buffer) << " core " << a.core
        << " partitions [" << a.partition << ", " << a.partition + a.partitions << ") bytes [" << a.offset << ", "
        << a.offset + a.bytes << ")" << (a.pinned ? " pinned" : "") << '\n';
  }
  return out.str();
}

template <class Note>
std::string annotated(const Kernel& k, Note&& note) {
  std::ostringstream out;
  for (size_t i = 0; i < k.body.size(); ++i) out << i << ": " << print(k, k.body[i]) << "  # " << note(i) << '\n';
  return out.str();
}

}  // namespace

EngineProgram lower(const Kernel& input, const LowerOptions& options) {
  Kernel k = input;
  return lower(std::move(k), options);
}

EngineProgram lower(Kernel&& input, const LowerOptions& options) {
  Dumper dump(input, options.debug_dir);
  // legalize: verified for the target (and for the input's own target first, so that an input
  // that fails there fails as it would without a retarget). Until build_program takes it over,
  // `input` is only read, so a user error (verifier, capacity) leaves it as it was.
  const Target original = input.target, target = options.target.value_or(input.target);
  if (target != original) verify(input);
  if (dump.on()) dump("verify", print(input));
  input.target = target;
  std::vector<LiveRange> live;
  std::optional<Kernel> spilled;
  try {
    verify(input);
    spilled = spilled_to_fit(input, &live);
  } catch (...) {
    input.target = original;
    throw;
  }
  Kernel k = spilled ? std::move(*spilled) : std::move(input);
  if (dump.on()) dump("legalize", print(k));

  MemoryPlan plan = allocate(k, live);
  if (dump.on()) dump("allocate", plan_text(k, plan));

  const std::vector<Queue> queues = assign_engines(k);
  if (dump.on())
    dump("engines", annotated(k, [&](size_t i) { return is_barrier(k.body[i]) ? "sync" : queue_name(queues[i]); }));

  const std::vector<Dependence> deps = dependences(k, plan, queues);
  if (dump.on()) {
    std::vector<std::string> notes(k.body.size());
    static const char* kinds[] = {"raw", "war", "waw", "order"};
    for (const Dependence& d : deps)
      notes[d.to] += std::string(kinds[static_cast<int>(d.kind)]) + " on " + std::to_string(d.from) + " ";
    dump("dependences", annotated(k, [&](size_t i) { return notes[i]; }));
  }

  EngineProgram program = build_program(std::move(k), std::move(plan), queues, deps);
  program.verified = true;  // k was verified by legalize; build_program makes the structure
  if (dump.on()) dump("program", program.disassemble());
  return program;
}

// ---- legalize ------------------------------------------------------------------------------

Kernel legalize(Kernel k, Target target) {
  k.target = target;
  verify(k);
  return k;
}

// ---- engines -------------------------------------------------------------------------------

namespace {

Queue engine_queue(Engine e) {
  switch (e) {
    case Engine::tensor: return Queue::pe;
    case Engine::scalar: return Queue::act;
    case Engine::gpsimd: return Queue::pool;
    default: return Queue::dve;
  }
}

// The estimated busy time of each compute queue so far, in body order: an instruction whose
// engine the kernel leaves open goes to the eligible engine that becomes free first (the least
// loaded; the default engine on a tie, so a kernel with idle engines keeps its defaults). A loop
// body counts once, as the instruction table does; the estimate ignores waits. Deterministic.
class QueueLoads {
 public:
  explicit QueueLoads(const Kernel& k) : k_(k), config_(machine_config(k.target)) {}
  Queue place(const Instruction& inst, const EngineChoice& choice) {
    Queue best = engine_queue(choice.engines[0]);
    for (int c = 1; c < choice.count; ++c) {
      const Queue q = engine_queue(choice.engines[c]);
      if (load_[static_cast<int>(q)] < load_[static_cast<int>(best)]) best = q;
    }
    load_[static_cast<int>(best)] += instruction_cost(k_, inst, best, config_).busy_ns;
    return best;
  }

 private:
  const Kernel& k_;
  const MachineConfig& config_;
  std::array<double, kNumQueues> load_{};
};

// DMA queues run in order, so a store (which waits for the compute that produces its data) holds
// up every later transfer on its queue. Stores to HBM take the last DMA queue and every other
// transfer the others in turn, so the load of the next tile need not wait behind this tile's store.
class DmaQueues {
 public:
  Queue next(const Kernel& k, const Instruction& inst) {
    bool store = false;
    for_each_view(inst, [&](const char* name, const View& v) {
      if (std::string_view(name) == "dst") store = !is_on_chip(k.tensor(v.tensor).buffer);
    });
    if (store) return static_cast<Queue>(kFirstDmaQueue + kNumDmaQueues - 1);
    return static_cast<Queue>(kFirstDmaQueue + other_++ % (kNumDmaQueues - 1));
  }

 private:
  int other_ = 0;
};

}  // namespace

std::vector<Queue> assign_engines(const Kernel& k) {
  std::vector<Queue> queues(k.body.size(), Queue::pe);
  std::vector<EngineChoice> choices(k.body.size());
  bool open = false;  // any instruction with more than one eligible engine
  for (size_t i = 0; i < k.body.size(); ++i) {
    const Instruction& inst = k.body[i];
    if (is_barrier(inst) || is_dma(inst.opcode())) continue;
    choices[i] = open_engines(k, inst);
    open |= choices[i].count > 1;
  }
  std::optional<QueueLoads> loads;
  if (open) loads.emplace(k);
  DmaQueues dma;
  for (size_t i = 0; i < k.body.size(); ++i) {
    const Instruction& inst = k.body[i];
    if (is_barrier(inst)) continue;
    if (is_dma(inst.opcode())) {
      queues[i] = dma.next(k, inst);
      continue;
    }
    queues[i] = loads ? loads->place(inst, choices[i]) : engine_queue(choices[i].engines[0]);
  }
  return queues;
}

// ---- dependences ---------------------------------------------------------------------------

std::vector<std::vector<int>> placements(const Kernel& k, const std::vector<LiveRange>& live) {
  std::vector<std::vector<int>> at(k.body.size());
  for (size_t id = 0; id < live.size(); ++id)
    if (live[id].used() && is_on_chip(k.tensors[id].buffer)) at[live[id].first].push_back(static_cast<int>(id));
  return at;
}

std::vector<Dependence> dependences(const Kernel& k, const MemoryPlan& plan, const std::vector<Queue>& queues) {
  const std::vector<std::vector<int>> places = placements(k, live_ranges(k, match_blocks(k)));
  std::vector<Dependence> out;
  AccessTracker tracker;
  size_t region_begin = 0;  // body index of the current region's first instruction
  for (size_t i = 0; i < k.body.size(); ++i) {
    if (is_barrier(k.body[i])) {
      tracker.clear();  // a barrier drains every queue
      region_begin = i + 1;
      continue;
    }
    for (uint32_t before : k.body[i].after)  // (a later `before`: add_backward_edges, below)
      if (before >= region_begin && before < i && queues[before] != queues[i] && !is_barrier(k.body[before]))
        out.push_back({before, static_cast<uint32_t>(i), Dependence::Kind::order});
    const int q = static_cast<int>(queues[i]);
    // The latest conflicting instruction per other queue, and how it conflicts.
    std::array<int64_t, kNumQueues> latest;
    std::array<Dependence::Kind, kNumQueues> kind{};
    latest.fill(-1);
    for (const Access& a : instruction_accesses(k, plan, k.body[i], places[i])) {
      tracker.record(a, Epoch{q, 0, static_cast<uint32_t>(i)}, [&](const Epoch& e, bool was_write) {
        if (e.queue == q || static_cast<int64_t>(e.ir) < latest[e.queue]) return;
        const Dependence::Kind k = !was_write ? Dependence::Kind::war
                                   : a.write  ? Dependence::Kind::waw
                                              : Dependence::Kind::raw;
        // One dependence per producer; a read of what it wrote (raw) names it best.
        if (static_cast<int64_t>(e.ir) == latest[e.queue] && kind[e.queue] == Dependence::Kind::raw) return;
        if (static_cast<int64_t>(e.ir) > latest[e.queue] || k == Dependence::Kind::raw) kind[e.queue] = k;
        latest[e.queue] = e.ir;
      });
    }
    for (int other = 0; other < kNumQueues; ++other)
      if (latest[other] >= 0)
        out.push_back({static_cast<uint32_t>(latest[other]), static_cast<uint32_t>(i), kind[other]});
  }
  add_backward_edges(k, queues, out);
  return out;
}

// ---- synchronize and build the engine program ----------------------------------------------

namespace {

void join(QueueCounts& into, const QueueCounts& other) {
  for (int q = 0; q < kNumQueues; ++q) into[q] = std::max(into[q], other[q]);
}

// The region's instructions in an order where each follows its queue predecessor and every
// instruction it depends on: body order, except that an instruction a backward scheduling edge
// holds back moves after its producer (the lowest ready body index goes first).
std::vector<uint32_t> issue_order(const Region& r, const std::vector<std::vector<uint32_t>>& deps_of) {
  std::vector<int> missing(r.end - r.begin, 0);
  std::vector<std::vector<uint32_t>> next(r.end - r.begin);
  for (const auto& queue : r.queues)
    for (size_t n = 0; n < queue.size(); ++n) {
      const uint32_t i = queue[n].ir;
      if (n > 0) next[queue[n - 1].ir - r.begin].push_back(i);
      missing[i - r.begin] += (n > 0) + static_cast<int>(deps_of[i].size());
      for (uint32_t from : deps_of[i]) next[from - r.begin].push_back(i);
    }
  std::priority_queue<uint32_t, std::vector<uint32_t>, std::greater<>> ready;
  for (const auto& queue : r.queues)
    if (!queue.empty() && missing[queue[0].ir - r.begin] == 0) ready.push(queue[0].ir);
  std::vector<uint32_t> order;
  while (!ready.empty()) {
    const uint32_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (uint32_t s : next[i - r.begin])
      if (--missing[s - r.begin] == 0) ready.push(s);
  }
  size_t total = 0;
  for (const auto& queue : r.queues) total += queue.size();
  if (order.size() != total) internal_error("build_program: the dependences of a region form a cycle");
  return order;
}

}  // namespace

EngineProgram build_program(Kernel kernel, MemoryPlan plan, const std::vector<Queue>& queues,
                            const std::vector<Dependence>& deps) {
  EngineProgram p;
  p.kernel = std::move(kernel);
  const Kernel& k = p.kernel;
  p.plan = std::move(plan);
  std::vector<std::vector<uint32_t>> deps_of(k.body.size());
  for (const Dependence& d : deps) deps_of[d.to].push_back(d.from);
  // Regions, and each instruction's position in its queue (queues run in body order).
  std::vector<int32_t> pos(k.body.size(), 0);
  bool open = false;
  for (size_t i = 0; i < k.body.size(); ++i) {
    if (is_barrier(k.body[i])) {
      open = false;
      continue;
    }
    if (!open) p.regions.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(i), {}});
    open = true;
    Region& region = p.regions.back();
    region.end = static_cast<uint32_t>(i + 1);
    auto& queue = region.queues[static_cast<int>(queues[i])];
    pos[i] = static_cast<int32_t>(queue.size());
    queue.push_back({static_cast<uint32_t>(i), queues[i], {}});
  }
  // Waits, in issue order: per instruction, what is known complete once it completes.
  std::vector<QueueCounts> known(k.body.size());
  for (Region& region : p.regions)
    for (uint32_t i : issue_order(region, deps_of)) {
      const int q = static_cast<int>(queues[i]);
      QueueCounts vc{};
      if (pos[i] > 0) vc = known[region.queues[q][pos[i] - 1].ir];
      // Needed count per other queue, then the waits that are not implied by the rest.
      QueueCounts need{};
      for (uint32_t from : deps_of[i]) {
        const int fq = static_cast<int>(queues[from]);
        need[fq] = std::max(need[fq], pos[from] + 1);
      }
      std::vector<Wait> waits;
      for (int o = 0; o < kNumQueues; ++o)
        if (need[o] > vc[o]) waits.push_back({static_cast<Queue>(o), need[o]});
      auto after = [&](const Wait& w) -> const QueueCounts& {
        return known[region.queues[static_cast<int>(w.queue)][w.count - 1].ir];
      };
      for (size_t w = 0; w < waits.size();) {
        QueueCounts others = vc;
        for (size_t o = 0; o < waits.size(); ++o)
          if (o != w) join(others, after(waits[o]));
        if (others[static_cast<int>(waits[w].queue)] >= waits[w].count)
          waits.erase(waits.begin() + static_cast<long>(w));
        else ++w;
      }
      for (const Wait& w : waits) join(vc, after(w));
      vc[q] = pos[i] + 1;
      known[i] = vc;
      p.dependences += static_cast<int64_t>(deps_of[i].size());
      region.queues[q][pos[i]].waits = std::move(waits);
    }
  index_regions(p);
  return p;
}

}  // namespace knit::codegen
