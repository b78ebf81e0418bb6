// Event replay of an engine program's run (timing.h).
#include "knit/sim/timing.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "collective_cost.h"
#include "collectives.h"
#include "knit/codegen/access.h"
#include "knit/ir/op_traits.h"
#include "native/workers.h"

namespace knit::sim {

using namespace knit::ir;
using codegen::kNumQueues;

namespace {

// The core's DMA bandwidth over time: the intervals in which a transfer's data is moving. A
// transfer takes the earliest free interval long enough once it is ready, so bandwidth goes to
// transfers in the order they become ready, not in body order.
class DmaPipe {
 public:
  double reserve(double ready, double duration) {
    double t = ready;
    auto it = std::upper_bound(busy_.begin(), busy_.end(), t, [](double v, const Span& s) { return v < s.lo; });
    if (it != busy_.begin() && std::prev(it)->hi > t) t = std::prev(it)->hi;
    while (it != busy_.end() && it->lo < t + duration) {
      t = std::max(t, it->hi);
      ++it;
    }
    insert(t, t + duration);
    return t;
  }
  double end() const { return busy_.empty() ? 0.0 : busy_.back().hi; }
  // Nothing may move before t (a barrier): fill the pipe up to it.
  void block_until(double t) {
    if (t > 0) insert(0, t);
  }

 private:
  struct Span {
    double lo, hi;
  };
  void insert(double lo, double hi) {
    // The spans [first, last) that [lo, hi] touches merge with it into one.
    auto first = std::lower_bound(busy_.begin(), busy_.end(), lo, [](const Span& s, double v) { return s.lo < v; });
    if (first != busy_.begin() && std::prev(first)->hi >= lo) --first;
    auto last = first;
    while (last != busy_.end() && last->lo <= hi) ++last;
    if (first != last) {
      lo = std::min(lo, first->lo);
      hi = std::max(hi, std::prev(last)->hi);
    }
    const auto at = busy_.erase(first, last);
    busy_.insert(at, Span{lo, hi});
    // Old gaps rarely fit a later transfer but make every search long: beyond kMaxGaps, the
    // earliest gap is given up (filled), which can only delay a transfer ready that far back.
    if (busy_.size() > kMaxGaps) {
      busy_[1].lo = busy_[0].lo;
      busy_.erase(busy_.begin());
    }
  }
  static constexpr size_t kMaxGaps = 32;
  std::vector<Span> busy_;  // disjoint, sorted, merged when touching; at most kMaxGaps + 1 long
};

// A collective in flight on a rank: until `end`, an instruction that reads or writes its dst
// (or metadata), or writes its src, waits for it; anything else runs beside it.
struct InFlight {
  double end = 0;
  std::vector<int> read, written;  // tensor ids
};

struct CoreClock {
  std::array<double, kNumQueues> queue_free{};  // when each queue may start its next instruction
  DmaPipe dma;
  int act_table = -1;  // ScalarE function set loaded
  double done = 0;     // the latest result visible so far
  std::vector<InFlight> in_flight;
  double collectives_free = 0;  // the rank's collectives run one after another
  double now() const {
    double t = std::max(dma.end(), done);
    for (double q : queue_free) t = std::max(t, q);
    return t;
  }
  // When the collectives in flight let an instruction touching `reads` / `writes` start.
  double held_until(const std::vector<int>& reads, const std::vector<int>& writes) const {
    auto meets = [](const std::vector<int>& a, const std::vector<int>& b) {
      return std::any_of(a.begin(), a.end(), [&](int t) { return std::find(b.begin(), b.end(), t) != b.end(); });
    };
    double t = 0;
    for (const InFlight& f : in_flight)
      if (meets(reads, f.written) || meets(writes, f.written) || meets(writes, f.read)) t = std::max(t, f.end);
    return t;
  }
  double finished() const {
    double t = now();
    for (const InFlight& f : in_flight) t = std::max(t, f.end);
    return t;
  }
};

// What the replay needs per body instruction. Costs depend only on the instruction and the
// target, so the table is built once per program and kept in its DerivedData.
struct InstrTable {
  std::vector<InstrCost> costs;
  std::vector<codegen::Queue> queue_of;
  std::vector<uint32_t> position;  // index in its queue
  // Per region, the order its waits allow (codegen::issue_order) when that is not body order.
  std::vector<std::vector<uint32_t>> reordered;
  // Kernels with collectives: per instruction, the tensors it reads and writes.
  std::vector<std::vector<int>> reads, writes;
};

// The tensors instruction `inst` reads and writes (for the collectives in flight).
void tensors_of(const Instruction& inst, std::vector<int>& reads, std::vector<int>& writes) {
  for_each_view(inst, [&](const char* name, const View& v) {
    (codegen::is_output_operand(name) ? writes : reads).push_back(v.tensor);
  });
}

// Programs with at least this many instructions cost them on every thread of the pool.
constexpr size_t kParallelCosts = 4096;

const InstrTable& instruction_table(const codegen::EngineProgram& program, const MachineConfig& config) {
  codegen::DerivedData& slot = *program.derived;
  std::lock_guard<std::mutex> lock(slot.mutex);
  if (!slot.value) {
    auto table = std::make_shared<InstrTable>();
    const size_t n = program.kernel.body.size();
    table->costs.resize(n);
    table->queue_of.assign(n, codegen::Queue::pe);
    table->position.assign(n, 0);
    std::vector<size_t> costed;  // body indices of the engine instructions
    for (const codegen::Region& r : program.regions)
      for (int q = 0; q < kNumQueues; ++q)
        for (size_t j = 0; j < r.queues[q].size(); ++j) {
          const codegen::EngineInstr& e = r.queues[q][j];
          table->queue_of[e.ir] = e.queue;
          table->position[e.ir] = static_cast<uint32_t>(j);
          costed.push_back(e.ir);
        }
    if (has_collectives(program.kernel)) {
      table->reads.resize(n);
      table->writes.resize(n);
      for (size_t ir : costed) tensors_of(program.kernel.body[ir], table->reads[ir], table->writes[ir]);
    }
    table->reordered.resize(program.regions.size());
    for (size_t r = 0; r < program.regions.size(); ++r) {
      std::vector<uint32_t> order = codegen::issue_order(program.regions[r]);
      if (!std::is_sorted(order.begin(), order.end()) ||
          order.size() != program.regions[r].end - program.regions[r].begin)
        table->reordered[r] = std::move(order);
    }
    // The costs are independent of one another: a large program's are computed in parts on the
    // worker pool (each part writes its own entries).
    auto cost_part = [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        const size_t ir = costed[i];
        table->costs[ir] = instruction_cost(program.kernel, program.kernel.body[ir], table->queue_of[ir], config);
      }
    };
    WorkerPool& pool = WorkerPool::instance();
    const size_t parts = costed.size() >= kParallelCosts ? static_cast<size_t>(pool.threads()) : 1;
    std::vector<std::function<void()>> jobs;
    for (size_t p = 0; p < parts; ++p)
      jobs.push_back([&, p] { cost_part(costed.size() * p / parts, costed.size() * (p + 1) / parts); });
    pool.run(jobs);
    slot.value = std::move(table);
  }
  // The slot's only user is this function, so the value is an InstrTable; it is never replaced,
  // so the reference stays valid while the program lives.
  return *static_cast<const InstrTable*>(slot.value.get());
}

// The ranks of one collective (logged one after another when it released them, from entry n):
// each drains its queues and goes on; the data moves from when the last has arrived (and each
// rank's previous collective is done) for the collective's cost, in flight meanwhile, its
// transfers through each rank's DMA competing with the kernel's. Returns the index of the
// group's last entry.
size_t replay_collective(const codegen::EngineProgram& program, const Collective& op,
                         const std::vector<Executed>& executed, size_t n, std::map<int, CoreClock>& cores,
                         const MachineConfig& config, int lnc, TimingReport& report) {
  const std::vector<int64_t> members = collective_members(op, executed[n].core);
  auto in_group = [&](size_t k) {
    const Executed& e = executed[k];
    return e.region < 0 && std::holds_alternative<Collective>(program.kernel.body[e.pc].op) &&
           std::find(members.begin(), members.end(), e.core) != members.end();
  };
  size_t last = n;
  while (last + 1 < executed.size() && in_group(last + 1) && executed[last + 1].core != executed[n].core &&
         last + 1 - n < members.size())
    ++last;
  double start = 0;
  for (size_t g = n; g <= last; ++g) {
    const CoreClock& c = cores[executed[g].core];
    start = std::max({start, c.now() + config.sync_ns, c.collectives_free});
  }
  const int64_t src_bytes = op.src.num_elements() * dtype_size(op.src.dtype);
  const int64_t dst_bytes = op.dst.num_elements() * dtype_size(op.dst.dtype);
  const CollectiveCost cost = collective_cost(op, members, src_bytes, dst_bytes, program.kernel.target, lnc);
  const double end = start + cost.ns;
  // Each rank's DMA reads what it sends and writes what it receives, at the core's DMA rate.
  const double local_ns = 2 * static_cast<double>(cost.steps) * cost.step_bytes / dma_peak_bytes_per_ns(config);
  InFlight flight{end, {op.src.tensor}, {op.dst.tensor}};
  if (op.src1) flight.read.push_back(op.src1->tensor);
  if (op.metadata) flight.written.push_back(op.metadata->tensor);
  for (size_t g = n; g <= last; ++g) {
    CoreClock& c = cores[executed[g].core];
    const double arrive = c.now();
    report.collectives.push_back({executed[g].core, static_cast<uint32_t>(executed[g].pc), arrive, start, end,
                                  cost.steps, cost.step_bytes, cost.path});
    const double t = arrive + config.sync_ns;  // the rank's own barrier: it issues the collective
    c.queue_free.fill(t);
    c.dma.block_until(t);
    c.done = std::max(c.done, t);
    if (local_ns > 0) c.dma.reserve(start, std::min(local_ns, end - start));
    c.collectives_free = end;
    std::erase_if(c.in_flight, [&](const InFlight& f) { return f.end <= t; });
    c.in_flight.push_back(flight);
    ++report.barriers;
  }
  return last;
}

}  // namespace

TimingReport simulate_timing(const codegen::EngineProgram& program, const std::vector<Executed>& executed,
                             bool keep_timeline, int lnc) {
  const MachineConfig& config = machine_config(program.kernel.target);
  TimingReport report;
  report.target = program.kernel.target;
  const InstrTable& table = instruction_table(program, config);
  const std::vector<InstrCost>& costs = table.costs;
  const std::vector<codegen::Queue>& queue_of = table.queue_of;
  const std::vector<uint32_t>& position = table.position;

  std::map<int, CoreClock> cores;
  std::vector<double> visible(program.kernel.body.size(), 0);  // per instruction of the running region
  // With keep_timeline, each instruction's latest timeline row: its waits name the producer's.
  std::vector<int32_t> row_of(keep_timeline ? program.kernel.body.size() : 0, -1);
  auto is_core_sync = [&](const Executed& x) {
    if (x.region >= 0) return false;
    return ir::is_core_sync(program.kernel.body[x.pc].opcode());
  };
  for (size_t n = 0; n < executed.size(); ++n) {
    const Executed& x = executed[n];
    CoreClock& clock = cores[x.core];
    if (x.region < 0) {  // a barrier: every queue drains, then the sync engine runs it
      double t = clock.now() + config.sync_ns;
      // Cores released together at a core_barrier / sendrecv (logged one after another) leave it
      // together, when the last of them has arrived; a collective's ranks, after its data moved.
      size_t last = n;
      if (const auto* op = std::get_if<Collective>(&program.kernel.body[x.pc].op)) {
        last = replay_collective(program, *op, executed, n, cores, config, lnc, report);
        n = last;
        continue;
      }
      if (is_core_sync(x))
        while (last + 1 < executed.size() && is_core_sync(executed[last + 1]) && executed[last + 1].core != x.core)
          t = std::max(t, cores[executed[++last].core].now() + config.sync_ns);
      for (size_t g = n; g <= last; ++g) {
        CoreClock& c = cores[executed[g].core];
        c.queue_free.fill(t);
        c.dma.block_until(t);
        c.done = std::max(c.done, t);
        ++report.barriers;
      }
      n = last;
      continue;
    }
    const codegen::Region& region = program.regions[x.region];
    // Start each instruction after those it waits for: body order, or the order backward
    // scheduling edges give (lower.h, add_backward_edges).
    const std::vector<uint32_t>& reordered = table.reordered[x.region];
    if (!reordered.empty() && reordered.size() != region.end - region.begin)
      internal_error("timing: the waits of region " + std::to_string(x.region) + " deadlock");
    for (uint32_t n = 0; n < region.end - region.begin; ++n) {
      const uint32_t i = reordered.empty() ? region.begin + n : reordered[n];
      const int q = static_cast<int>(queue_of[i]);
      const InstrCost& cost = costs[i];
      const codegen::EngineInstr& e = region.queues[q][position[i]];
      double start = clock.queue_free[q], stall = 0;
      if (!clock.in_flight.empty()) {  // a collective in flight holds what touches its tensors
        const double held = clock.held_until(table.reads[i], table.writes[i]);
        stall += std::max(0.0, held - start);
        start = std::max(start, held);
      }
      int8_t stalled_on = -1;
      int32_t waited_row = -1;
      for (const codegen::Wait& w : e.waits) {
        const uint32_t producer = region.queues[static_cast<int>(w.queue)][w.count - 1].ir;
        const double ready = visible[producer] + config.sync_ns;
        if (ready > start) {
          stall += ready - start;
          start = ready;
          stalled_on = static_cast<int8_t>(w.queue);
          if (keep_timeline) waited_row = row_of[producer];
        }
      }
      const bool is_dma = q >= codegen::kFirstDmaQueue;
      TimedInstruction t{x.core, i,     queue_of[i], start,      0,
                         start,  stall, stalled_on,  waited_row, is_dma ? cost.dma_bytes : 0};
      if (is_dma) {
        // The fixed cost overlaps other transfers; the data then shares the DMA bandwidth.
        t.start_ns = clock.dma.reserve(start + cost.fixed_ns, cost.busy_ns);
        t.end_ns = t.start_ns + cost.busy_ns;
        clock.queue_free[q] = t.start_ns;  // the queue issues its next transfer meanwhile
        visible[i] = t.end_ns;
        report.dma_active_ns += cost.busy_ns;
        report.dma_bytes += cost.dma_bytes;
        report.hbm_read_bytes += cost.hbm_read_bytes;
        report.hbm_write_bytes += cost.hbm_write_bytes;
      } else {
        double busy = cost.busy_ns;
        if (cost.act_table >= 0 && cost.act_table != clock.act_table) {
          busy += config.act_table_ns;  // loading a table, the first one too
          clock.act_table = cost.act_table;
        }
        t.end_ns = start + busy;
        clock.queue_free[q] = t.end_ns;
        visible[i] = t.end_ns + cost.latency_ns;
      }
      clock.done = std::max(clock.done, visible[i]);
      report.busy_ns[q] += t.end_ns - t.start_ns;
      report.instructions[q] += 1;
      report.flops += cost.flops;
      report.pe_array_ns += cost.pe_array_ns;
      if (stalled_on >= 0) report.stall_ns[q][stalled_on] += stall;
      if (keep_timeline) {
        row_of[i] = static_cast<int32_t>(report.timeline.size());
        report.timeline.push_back(t);
      }
    }
  }
  double slowest = 0;
  for (const auto& [core, clock] : cores) {
    slowest = std::max(slowest, clock.finished());
    if (core >= 0) {
      report.core_end_ns.resize(std::max(report.core_end_ns.size(), static_cast<size_t>(core) + 1), 0);
      report.core_end_ns[core] = clock.finished();
    }
  }
  report.total_ns = slowest + config.launch_ns;
  return report;
}

}  // namespace knit::sim
