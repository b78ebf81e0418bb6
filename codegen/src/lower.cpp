// The lowering pipeline, top-down: lower() runs the passes in order; each pass follows under
// its own header. See lower.h for the contracts and docs/codegen.md for the walk-through.
#include "knit/codegen/lower.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
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

// A list-scheduling estimate of the run, in body order, each instruction standing for its trips
// (the product of the static trip counts of the loops around it; 1 for a loop whose bounds are
// registers) run back to back: when each queue is free and, per tensor, when its last writer's
// result is ready (on the writer's own queue at its end; on another queue after the writer's
// pipeline latency and a semaphore). An instruction whose engine the kernel leaves open goes to
// the eligible engine on which it would finish first: the later of that engine's free time and
// its operands' readiness there, plus trips x its cost there (the cost model's own; the default
// engine on a tie). So independent work spreads over the engines while a chain of dependent
// instructions stays on one engine unless another is free enough to pay for the hop (once per
// chain, as a loop's iterations pipeline). Barriers, DMA bandwidth sharing and ScalarE table
// switches are ignored. Deterministic.
class EngineSchedule {
 public:
  explicit EngineSchedule(const Kernel& k)
      : k_(k), config_(machine_config(k.target)), written_(k.tensors.size()), read_(k.tensors.size()) {}

  Queue place(const Instruction& inst, double trips, const EngineChoice& choice) {
    Queue best = engine_queue(choice.engines[0]);
    double best_end = 0, best_latency = 0;
    for (int c = 0; c < choice.count; ++c) {
      const Queue q = engine_queue(choice.engines[c]);
      const InstrCost cost = instruction_cost(k_, inst, q, config_);
      const double end = start_on(inst, q) + trips * cost.busy_ns;
      if (c == 0 || end < best_end) best = q, best_end = end, best_latency = cost.latency_ns;
    }
    record(inst, best, best_end, best_latency);
    return best;
  }

  // A grid instance (`program id=`) runs on a core of its own: its queues start free.
  void enter_core(int64_t id) {
    cores_[core_] = free_;
    core_ = id;
    free_ = cores_[id];
  }

  void place_dma(const Instruction& inst, double trips, Queue q) {
    const InstrCost cost = instruction_cost(k_, inst, q, config_);
    record(inst, q, start_on(inst, q) + cost.fixed_ns + trips * cost.busy_ns, cost.latency_ns);
  }

 private:
  struct Access {  // the latest write or read of a tensor
    double end = 0, latency = 0;
    int queue = -1;  // none yet
  };

  // When an access from queue q may start after an earlier one (`a`) of the same tensor.
  double after(const Access& a, Queue q) const {
    if (a.queue < 0) return 0;
    return a.queue == static_cast<int>(q) ? a.end : a.end + a.latency + config_.sync_ns;
  }

  // Reads wait for the last write; writes also for the last read (a write after read).
  double start_on(const Instruction& inst, Queue q) const {
    double start = free_[static_cast<int>(q)];
    for_each_view(inst, [&](const char* name, const View& v) {
      start = std::max(start, after(written_[v.tensor], q));
      if (is_output_operand(name)) start = std::max(start, after(read_[v.tensor], q));
    });
    return start;
  }

  void record(const Instruction& inst, Queue q, double end, double latency) {
    free_[static_cast<int>(q)] = end;
    for_each_view(inst, [&](const char* name, const View& v) {
      Access& a = is_output_operand(name) ? written_[v.tensor] : read_[v.tensor];
      if (end >= a.end) a = {end, latency, static_cast<int>(q)};
    });
  }

  const Kernel& k_;
  const MachineConfig& config_;
  std::array<double, kNumQueues> free_{};
  int64_t core_ = 0;
  std::map<int64_t, std::array<double, kNumQueues>> cores_;  // the other cores' free_
  std::vector<Access> written_, read_;                       // per tensor
};

// Per body instruction, how many times it runs as far as the IR says: the product of the trip
// counts of the loops around it whose bounds are immediates (a loop with a register bound, a
// while or an if counts once).
std::vector<double> static_trips(const Kernel& k) {
  std::vector<double> trips(k.body.size(), 1);
  std::vector<double> stack{1};
  for (size_t i = 0; i < k.body.size(); ++i) {
    const Instruction& inst = k.body[i];
    trips[i] = stack.back();
    const BlockPart part = op_traits(inst.opcode()).block;
    if (part == BlockPart::open) {
      double n = 1;
      const auto* loop = std::get_if<Loop>(&inst.op);
      if (loop && !loop->start.is_reg() && !loop->stop.is_reg() && loop->step != 0) {
        const int64_t span = loop->step > 0 ? loop->stop.imm - loop->start.imm : loop->start.imm - loop->stop.imm;
        const int64_t step = loop->step > 0 ? loop->step : -loop->step;
        n = static_cast<double>(std::max<int64_t>(0, (span + step - 1) / step));
      }
      stack.push_back(stack.back() * n);
    } else if (part == BlockPart::close && stack.size() > 1) {
      stack.pop_back();
    }
  }
  return trips;
}

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
  std::optional<EngineSchedule> schedule;
  std::vector<double> trips;
  if (open) schedule.emplace(k), trips = static_trips(k);
  DmaQueues dma;
  for (size_t i = 0; i < k.body.size(); ++i) {
    const Instruction& inst = k.body[i];
    if (const auto* grid = std::get_if<Program>(&inst.op); grid && schedule) schedule->enter_core(grid->id);
    if (is_barrier(inst)) continue;
    if (is_dma(inst.opcode())) {
      queues[i] = dma.next(k, inst);
      if (schedule) schedule->place_dma(inst, trips[i], queues[i]);
      continue;
    }
    queues[i] = schedule ? schedule->place(inst, trips[i], choices[i]) : engine_queue(choices[i].engines[0]);
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
