// Collectives between ranks (nki.collectives): the rendezvous of a replica group's ranks, the
// checks that they called the same collective, and the data movement (collectives.cpp decides
// what each rank receives). In-process, each rank is a core of this machine (one `program` per
// rank, each with its own HBM tensors); in a torch.distributed job, this machine is one rank and
// the others' operands come through InterpretOptions::transport.
#include <sstream>

#include "collectives.h"
#include "knit/ir/view.h"
#include "machine.h"

namespace knit::sim {

using namespace knit::ir;

namespace {

std::string located(const Instruction& inst) {
  return std::string(to_string(std::get<Collective>(inst.op).kind)) + " (" + inst.loc.file + ":" +
         std::to_string(inst.loc.line) + ")";
}

// The parts of a call every rank of its group must agree on (kind, replica group, op, dim,
// channel, src dtype and shape, dst shape), as text: compared in-process and sent between
// processes (RankOperands::call).
std::string call_signature(const Collective& op) {
  std::ostringstream s;
  s << to_string(op.kind) << " src " << to_string(op.src.dtype) << bracketed(op.src.shape()) << " dst "
    << bracketed(op.dst.shape()) << " groups " << bracketed(op.groups) << " sizes " << bracketed(op.group_sizes)
    << " op " << to_string(op.op) << " dim " << op.dim << " channel " << op.channel << " known "
    << op.recv_counts_known;
  return s.str();
}

}  // namespace

int64_t Machine::world_rank(const Core& c) const { return options_.world_rank >= 0 ? options_.world_rank : c.rank; }

int64_t Machine::world_ranks(const std::vector<Core>& cores) const {
  return options_.world_rank >= 0 ? options_.world_ranks : static_cast<int64_t>(cores.size());
}

// The members of the collective core c waits at, after the launch checks (ranks exist, the
// caller is in a rank list).
std::vector<int64_t> Machine::members_of(const std::vector<Core>& cores, size_t c) {
  const Instruction& inst = kernel_.body[cores[c].pc];
  const Collective& op = std::get<Collective>(inst.op);
  current_ = &inst;
  const int64_t world = world_ranks(cores), rank = world_rank(cores[c]);
  const char* what = op.kind == CollectiveKind::permute ? "source_target_pairs" : "replica_group";
  for (int64_t r : op.groups)
    if (r >= world)
      fail("replica-group", std::string(what) + " names rank " + std::to_string(r) + " but the kernel runs on " +
                                std::to_string(world) + " rank(s); launch it with knit.simulate(kernel, ranks=N)");
  std::vector<int64_t> members = collective_members(op, rank);
  if (members.empty() && op.kind != CollectiveKind::permute)
    fail("replica-group", "rank " + std::to_string(rank) +
                              " is in no rank list of the replica group; every rank that calls a collective must be "
                              "in one of its lists");
  return members;
}

// Core index of each member (in-process: the rank is the core), after checking that each waits
// at the same collective; empty when one of them has not arrived yet.
std::vector<size_t> Machine::arrived(const std::vector<Core>& cores, size_t c, const std::vector<int64_t>& members) {
  const Instruction& mine = kernel_.body[cores[c].pc];
  std::vector<size_t> at;
  for (int64_t m : members) {
    const size_t core = options_.world_rank >= 0 ? c : static_cast<size_t>(m);
    if (options_.world_rank >= 0 && m != world_rank(cores[c])) continue;  // a remote rank: the transport meets it
    if (cores[core].done()) return {};
    const Instruction& theirs = kernel_.body[cores[core].pc];
    const auto* other = std::get_if<Collective>(&theirs.op);
    if (!other) return {};
    if (call_signature(std::get<Collective>(mine.op)) != call_signature(*other)) {
      current_ = &mine;
      fail("collective-mismatch",
           "rank " + std::to_string(cores[c].rank) + " calls " + located(mine) + " while rank " + std::to_string(m) +
               " of its group calls " + located(theirs) +
               " with other arguments (kind, replica group, op, dim, or src/dst shapes and dtype): every rank of "
               "a group must issue the same collectives, in the same order, with matching tensors");
    }
    at.push_back(core);
  }
  return at;
}

RankOperands Machine::read_operands(const Core& core) {
  current_ = &kernel_.body[core.pc];
  core_ = static_cast<int>(core.rank);
  for (int id : place_at_[core.pc])
    if (!pool_->placement(id).live) pool_->place(id, overwritten_at_place_[id]);
  const Collective& op = std::get<Collective>(current_->op);
  RankOperands r;
  r.call = call_signature(op);
  r.where = current_->loc.file + ":" + std::to_string(current_->loc.line);
  poison_reads_.clear();
  const Tile src = tile(op.src, "src");
  r.src = src.read_all_bits();
  if (op.src1) r.src1 = tile(*op.src1, "srcs1").read_all_bits();
  if (op.metadata) r.metadata = tile(*op.metadata, "metadata").read_all_bits();
  // Per element of an operand: whether its value comes from never-written memory.
  auto poison_flags = [&](const char* what) {
    std::vector<uint8_t> flags;
    for (const PoisonedRead& read : poison_reads_) {
      if (read.what != what) continue;
      flags.resize(static_cast<size_t>(src.size()), 0);
      for (int64_t i : read.elements) flags[static_cast<size_t>(i)] = 1;
    }
    return flags;
  };
  r.src_poison = poison_flags("src");
  if (op.src1) r.src1_poison = poison_flags("srcs1");
  origin_of_read_ = poison_reads_.empty() ? -1 : poison_reads_.front().origin;
  poison_reads_.clear();
  return r;
}

void Machine::write_received(const Core& core, const Received& got) {
  current_ = &kernel_.body[core.pc];
  core_ = static_cast<int>(core.rank);
  const Collective& op = std::get<Collective>(current_->op);
  Tile dst = tile(op.dst, "dst");
  bool any_poison = false;
  for (int64_t i = 0; i < dst.size(); ++i) {
    if (!got.covered[i]) continue;
    dst.write_bits(i, got.bits[i]);
    if (got.poisoned[i]) {
      dst.mem_->set_poison(dst.offset_[i], dst.esize_);
      any_poison = true;
    }
  }
  if (any_poison) {
    tensor_origin_.resize(kernel_.tensors.size(), -1);
    tensor_origin_[dst.tensor_] = origin_of_read_;
  }
  if (op.metadata && !op.recv_counts_known) {
    Tile meta = tile(*op.metadata, "metadata");
    const int64_t n = static_cast<int64_t>(got.recv_counts.size());
    for (int64_t j = 0; j < n; ++j) meta.write_bits(2 * n + j, got.recv_counts[j]);
  }
}

// Every rank of the group has arrived: read all sources, then write all destinations (so a
// rank's dst may be another's src), then step past the collective.
void Machine::perform_collective(std::vector<Core>& cores, const std::vector<size_t>& at,
                                 const std::vector<int64_t>& members) {
  const Instruction& inst = kernel_.body[cores[at.front()].pc];
  const Collective& op = std::get<Collective>(inst.op);
  if (!options_.timing_only) {
    std::vector<RankOperands> operands;
    for (size_t core : at) operands.push_back(read_operands(cores[core]));
    if (options_.world_rank >= 0) operands = options_.transport(members, operands.front());
    CollectiveShapes shapes{op.src.dtype, op.src.shape(), op.dst.num_elements()};
    auto fail_here = [&](const std::string& rule, const std::string& message) {
      current_ = &inst;
      fail(rule, message);
    };
    std::vector<Received> got;
    for (size_t core : at) {
      const int64_t rank = world_rank(cores[core]);
      const size_t position = static_cast<size_t>(std::find(members.begin(), members.end(), rank) - members.begin());
      got.push_back(receive(op, shapes, members, operands, position, fail_here));
    }
    for (size_t k = 0; k < at.size(); ++k) write_received(cores[at[k]], got[k]);
  }
  for (size_t core : at) {
    core_ = static_cast<int>(cores[core].rank);
    cores[core].pc = step(cores[core].pc);  // exec(Collective) moves nothing
  }
}

bool Machine::run_collectives(std::vector<Core>& cores) {
  bool progressed = false;
  for (size_t c = 0; c < cores.size(); ++c) {
    if (cores[c].done() || !std::holds_alternative<Collective>(kernel_.body[cores[c].pc].op)) continue;
    const std::vector<int64_t> members = members_of(cores, c);
    if (members.empty()) {  // collective_permute naming no pair with this rank: it stays idle
      // (in a torch.distributed job it still takes part in the exchange every rank makes)
      if (options_.world_rank >= 0 && !options_.timing_only) options_.transport({}, RankOperands{});
      core_ = static_cast<int>(cores[c].rank);
      cores[c].pc = step(cores[c].pc);
      progressed = true;
      continue;
    }
    const std::vector<size_t> at = arrived(cores, c, members);
    if (at.empty()) continue;
    perform_collective(cores, at, members);
    progressed = true;
  }
  return progressed;
}

}  // namespace knit::sim
