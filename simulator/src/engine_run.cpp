// Executing an engine program: each region's queues run in order, interleaved in whatever order
// the semaphores allow, with a race checker watching every access.
//
// Happens-before is tracked with one vector clock per executed instruction: how many
// instructions of each queue are known complete when it starts (its queue's earlier ones, plus
// everything known to the instructions its waits name). An earlier access on another queue that
// the clock does not cover is unordered: if it overlaps and one side writes, that is a race.
#include <algorithm>
#include <sstream>

#include "knit/ir/text.h"
#include "machine.h"

namespace knit::sim {

using namespace knit::ir;
using codegen::kNumQueues;
using codegen::QueueCounts;

namespace {

std::string where(const Instruction& inst) {
  return std::string(inst.opcode_name()) + " (" + inst.loc.file + ':' + std::to_string(inst.loc.line) + ')';
}

}  // namespace

void Machine::race(const codegen::Access& a, const codegen::Epoch& earlier, bool earlier_wrote, size_t pc, int queue) {
  const Instruction& now = kernel_.body[pc];
  std::ostringstream msg;
  msg << "race: " << where(now) << " on queue " << codegen::queue_name(static_cast<codegen::Queue>(queue))
      << (a.write ? " writes" : " reads") << " bytes [" << a.lo << ", " << a.hi << ") (" << a.operand << ") that "
      << where(kernel_.body[earlier.ir]) << " on queue "
      << codegen::queue_name(static_cast<codegen::Queue>(earlier.queue)) << (earlier_wrote ? " writes" : " reads")
      << ", and no semaphore wait orders the two; the engine program is missing synchronization (a program "
         "from codegen::lower never is: report it as a Knit bug)";
  current_ = &now;
  Machine::fail("race", msg.str());
}

// An instruction that runs before the one that starts a tensor's life (and so places it) is
// as unordered as a race, and is reported as one.
void Machine::check_placed(size_t pc, int queue) {
  for_each_view(kernel_.body[pc], [&](const char* operand, const View& v) {
    if (!is_on_chip(kernel_.tensor(v.tensor).buffer) || pool_->placement(v.tensor).live) return;
    const auto& here = place_at_[pc];
    if (std::find(here.begin(), here.end(), v.tensor) != here.end()) return;  // its life starts here
    // The error path only: find the instruction that starts the tensor's life, for the message.
    size_t first = 0;
    while (first < place_at_.size() &&
           std::find(place_at_[first].begin(), place_at_[first].end(), v.tensor) == place_at_[first].end())
      ++first;
    if (first == place_at_.size()) return;  // never placed: Machine::tile reports it
    std::ostringstream msg;
    msg << "race: " << where(kernel_.body[pc]) << " on queue "
        << codegen::queue_name(static_cast<codegen::Queue>(queue)) << " uses tensor '" << kernel_.tensor(v.tensor).name
        << "' (" << operand << ") before " << where(kernel_.body[first])
        << ", the first instruction of its life, has run, and no semaphore wait orders the two; the engine "
           "program is missing synchronization";
    current_ = &kernel_.body[pc];
    fail("race", msg.str());
  });
}

size_t Machine::run_region(const codegen::Region& region) {
  std::array<size_t, kNumQueues> head{};
  QueueCounts done{};
  std::array<std::vector<QueueCounts>, kNumQueues> clock;  // per queue position: known when it completes
  size_t remaining = 0;
  for (const auto& q : region.queues) remaining += q.size();
  races_.clear();
  auto ready = [&](int q) {
    if (head[q] >= region.queues[q].size()) return false;
    for (const codegen::Wait& w : region.queues[q][head[q]].waits)
      if (done[static_cast<int>(w.queue)] < w.count) return false;
    return true;
  };
  int turn = 0;
  while (remaining > 0) {
    // Pick the next queue to advance.
    int pick = -1;
    if (options_.schedule == Schedule::program_order) {
      for (int q = 0; q < kNumQueues; ++q)
        if (ready(q) && (pick < 0 || region.queues[q][head[q]].ir < region.queues[pick][head[pick]].ir)) pick = q;
    } else {
      int candidates[kNumQueues], n = 0;
      for (int k = 0; k < kNumQueues; ++k) {
        const int q = (turn + k) % kNumQueues;
        if (ready(q)) candidates[n++] = q;
      }
      if (n > 0) {
        if (options_.schedule == Schedule::random) {
          rng_state_ = rng_state_ * 6364136223846793005ull + 1442695040888963407ull;
          pick = candidates[(rng_state_ >> 33) % static_cast<uint64_t>(n)];
        } else {
          pick = candidates[0];
          turn = (pick + 1) % kNumQueues;
        }
      }
    }
    if (pick < 0) semaphore_deadlock(region, head, done);

    const codegen::EngineInstr& e = region.queues[pick][head[pick]];
    QueueCounts known{};
    if (head[pick] > 0) known = clock[pick][head[pick] - 1];
    for (const codegen::Wait& w : e.waits) {
      const QueueCounts& other = clock[static_cast<int>(w.queue)][w.count - 1];
      for (int q = 0; q < kNumQueues; ++q) known[q] = std::max(known[q], other[q]);
    }
    const codegen::Epoch epoch{pick, static_cast<int32_t>(head[pick]), e.ir};
    std::function<void(const std::vector<codegen::Access>&)> check;
    if (options_.check_races) {
      check = [&](const std::vector<codegen::Access>& accesses) {
        for (const codegen::Access& a : accesses)
          races_.record(a, epoch, [&](const codegen::Epoch& earlier, bool earlier_wrote) {
            if (earlier.queue != pick && known[earlier.queue] <= earlier.pos)
              race(a, earlier, earlier_wrote, e.ir, pick);
          });
      };
    }
    if (options_.check_races) check_placed(e.ir, pick);
    execute_at(e.ir, check);
    known[pick] = static_cast<int32_t>(head[pick] + 1);
    clock[pick].push_back(known);
    ++done[pick];
    ++head[pick];
    --remaining;
  }
  return region.end;
}

void Machine::semaphore_deadlock(const codegen::Region& region, const std::array<size_t, kNumQueues>& head,
                                 const QueueCounts& done) {
  std::ostringstream msg;
  msg << "the engine program deadlocks: every queue with instructions left waits for a semaphore that "
         "never reaches its count:";
  const Instruction* first = nullptr;
  for (int q = 0; q < kNumQueues; ++q) {
    if (head[q] >= region.queues[q].size()) continue;
    const codegen::EngineInstr& e = region.queues[q][head[q]];
    first = first ? first : &kernel_.body[e.ir];
    msg << "\n    " << codegen::queue_name(static_cast<codegen::Queue>(q)) << ": " << where(kernel_.body[e.ir])
        << " waits";
    for (const codegen::Wait& w : e.waits)
      msg << ' ' << codegen::queue_name(w.queue) << ">=" << w.count << " (is " << done[static_cast<int>(w.queue)]
          << ')';
  }
  current_ = first;
  Machine::fail("deadlock", msg.str());
}

RunResult run_program(const codegen::EngineProgram& program, std::vector<HostTensor>& args,
                      const InterpretOptions& options) {
  Machine machine(program, args, options);
  return machine.run();
}

}  // namespace knit::sim
