// Event replay of an engine program's run (timing.h).
#include "knit/sim/timing.h"

#include <algorithm>
#include <map>

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
    auto it = busy_.upper_bound(t);
    if (it != busy_.begin() && std::prev(it)->second > t) t = std::prev(it)->second;
    while (it != busy_.end() && it->first < t + duration) {
      t = std::max(t, it->second);
      ++it;
    }
    insert(t, t + duration);
    return t;
  }
  double end() const { return busy_.empty() ? 0.0 : busy_.rbegin()->second; }
  // Nothing may move before t (a barrier): fill the pipe up to it.
  void block_until(double t) {
    if (t > 0) insert(0, t);
  }

 private:
  void insert(double lo, double hi) {
    auto next = busy_.lower_bound(lo);
    if (next != busy_.begin() && std::prev(next)->second >= lo) {
      --next;
      lo = next->first;
      hi = std::max(hi, next->second);
      next = busy_.erase(next);
    }
    while (next != busy_.end() && next->first <= hi) {
      hi = std::max(hi, next->second);
      next = busy_.erase(next);
    }
    busy_.emplace(lo, hi);
    // Old gaps rarely fit a later transfer but make every search long: beyond kMaxGaps, the
    // earliest gap is given up (filled), which can only delay a transfer ready that far back.
    while (busy_.size() > kMaxGaps) {
      auto first = busy_.begin(), second = std::next(first);
      const double end = second->second;
      busy_.erase(second);
      first->second = end;
    }
  }
  static constexpr size_t kMaxGaps = 32;
  std::map<double, double> busy_;  // start -> end, disjoint, merged when touching
};

struct CoreClock {
  std::array<double, kNumQueues> queue_free{};  // when each queue may start its next instruction
  DmaPipe dma;
  int act_table = -1;                           // ScalarE function set loaded
  double done = 0;                              // the latest result visible so far
  double now() const {
    double t = std::max(dma.end(), done);
    for (double q : queue_free) t = std::max(t, q);
    return t;
  }
};

}  // namespace

TimingReport simulate_timing(const codegen::EngineProgram& program, const std::vector<Executed>& executed,
                             bool keep_timeline) {
  const MachineConfig& config = machine_config(program.kernel.target);
  TimingReport report;
  report.target = program.kernel.target;
  // Costs depend only on the instruction: compute each once.
  std::vector<InstrCost> costs(program.kernel.body.size());
  std::vector<codegen::Queue> queue_of(program.kernel.body.size(), codegen::Queue::pe);
  for (const codegen::Region& r : program.regions)
    for (int q = 0; q < kNumQueues; ++q)
      for (const codegen::EngineInstr& e : r.queues[q]) {
        costs[e.ir] = instruction_cost(program.kernel, program.kernel.body[e.ir], e.queue, config);
        queue_of[e.ir] = e.queue;
      }

  std::map<int, CoreClock> cores;
  std::vector<double> visible(program.kernel.body.size(), 0);  // per instruction of the running region
  auto is_core_sync = [&](const Executed& x) {
    if (x.region >= 0) return false;
    const Opcode op = program.kernel.body[x.pc].opcode();
    return op == Opcode::core_barrier || op == Opcode::sendrecv;
  };
  for (size_t n = 0; n < executed.size(); ++n) {
    const Executed& x = executed[n];
    CoreClock& clock = cores[x.core];
    if (x.region < 0) {  // a barrier: every queue drains, then the sync engine runs it
      double t = clock.now() + config.sync_ns;
      // Cores released together at a core_barrier / sendrecv (logged one after another) leave it
      // together, when the last of them has arrived.
      size_t last = n;
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
    // Body order is a topological order of the waits (the sync pass built them that way).
    for (uint32_t i = region.begin; i < region.end; ++i) {
      const int q = static_cast<int>(queue_of[i]);
      const InstrCost& cost = costs[i];
      const auto& queue = region.queues[q];
      // This instruction's entry (queues are in body order; find by binary search).
      const auto it = std::lower_bound(queue.begin(), queue.end(), i,
                                       [](const codegen::EngineInstr& e, uint32_t ir) { return e.ir < ir; });
      const codegen::EngineInstr& e = *it;
      double start = clock.queue_free[q], stall = 0;
      int8_t stalled_on = -1;
      for (const codegen::Wait& w : e.waits) {
        const uint32_t producer = region.queues[static_cast<int>(w.queue)][w.count - 1].ir;
        const double ready = visible[producer] + config.sync_ns;
        if (ready > start) {
          stall += ready - start;
          start = ready;
          stalled_on = static_cast<int8_t>(w.queue);
        }
      }
      TimedInstruction t{x.core, i, queue_of[i], start, 0, start, stall, stalled_on};
      if (q >= codegen::kFirstDmaQueue) {
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
      if (keep_timeline) report.timeline.push_back(t);
    }
  }
  double slowest = 0;
  for (const auto& [core, clock] : cores) slowest = std::max(slowest, clock.now());
  report.total_ns = slowest + config.launch_ns;
  return report;
}

}  // namespace knit::sim
