// Backward scheduling edges (lower.h, add_backward_edges): an instruction that must run after one
// issued later in the program. Legal only where the engine program can honour it without changing
// any result: on another queue of the same region, with no path of dependences, queue order or
// edges leading from the consumer to the producer (then the two are independent, and whichever
// runs first, every instruction still sees the bytes program order gives it).
#include <algorithm>
#include <deque>

#include "knit/codegen/lower.h"

namespace knit::codegen {

using namespace knit::ir;

namespace {

std::string line_of(const Instruction& inst) {
  return std::string(inst.opcode_name()) + " at " + inst.loc.file + ":" + std::to_string(inst.loc.line);
}

// Happens-before successors within each region: cross-queue dependences, the next instruction
// of the same queue (queues run in order), and the edges accepted so far.
class Successors {
 public:
  Successors(const Kernel& k, const std::vector<Queue>& queues, const std::vector<Dependence>& deps)
      : next_(k.body.size()) {
    for (const Dependence& d : deps) next_[d.from].push_back(d.to);
    std::array<int64_t, kNumQueues> last;
    last.fill(-1);
    for (size_t i = 0; i < k.body.size(); ++i) {
      if (is_barrier(k.body[i])) {
        last.fill(-1);
        continue;
      }
      int64_t& prev = last[static_cast<int>(queues[i])];
      if (prev >= 0) next_[prev].push_back(static_cast<uint32_t>(i));
      prev = static_cast<int64_t>(i);
    }
  }
  void add(uint32_t from, uint32_t to) { next_[from].push_back(to); }
  bool reaches(uint32_t from, uint32_t to) const {
    std::vector<char> seen(next_.size(), 0);
    std::deque<uint32_t> todo{from};
    seen[from] = 1;
    while (!todo.empty()) {
      const uint32_t n = todo.front();
      todo.pop_front();
      if (n == to) return true;
      for (uint32_t s : next_[n])
        if (!seen[s]++) todo.push_back(s);
    }
    return false;
  }

 private:
  std::vector<std::vector<uint32_t>> next_;
};

}  // namespace

void add_backward_edges(const Kernel& k, const std::vector<Queue>& queues, std::vector<Dependence>& deps) {
  std::vector<std::pair<uint32_t, uint32_t>> edges;  // (consumer, later producer)
  for (size_t c = 0; c < k.body.size(); ++c)
    for (uint32_t p : k.body[c].after)
      if (p > c) edges.push_back({static_cast<uint32_t>(c), p});
  if (edges.empty()) return;
  Successors graph(k, queues, deps);
  for (const auto& [c, p] : edges) {
    const Instruction &consumer = k.body[c], &producer = k.body[p];
    const std::string pair = "the scheduling edge asks " + line_of(consumer) + " to run after " + line_of(producer) +
                             ", which the program issues later";
    for (uint32_t b = c + 1; b < p; ++b)
      if (is_barrier(k.body[b]))
        user_error(consumer.loc, "schedule",
                   pair + "; " + line_of(k.body[b]) +
                       " between them drains every engine queue (a loop, branch or barrier), so the first could "
                       "only wait for the second across it: issue the producer first");
    if (queues[c] == queues[p])
      user_error(consumer.loc, "schedule",
                 pair + "; both run on the " + std::string(queue_name(queues[c])) +
                     " queue, which executes its instructions in program order, so the first cannot wait for the "
                     "second: issue the producer first, or put them on different engines");
    if (graph.reaches(c, p))
      user_error(consumer.loc, "schedule",
                 pair +
                     "; the second depends on the first (through the data they access, the queue order or "
                     "other scheduling edges), so waiting for it would deadlock: drop the edge or issue the "
                     "producer first");
    graph.add(p, c);
    deps.push_back({p, c, Dependence::Kind::order});
  }
}

}  // namespace knit::codegen
