// knit::cc — the C++ mirror of nki.collectives (docs/collectives.md). A kernel that calls these
// runs on several ranks: trace it with cc::trace_ranks, which traces it once per rank into one
// IR kernel (rank r after `program id=r`, with its own parameters), and run that kernel with
// every rank's arguments, rank after rank. Lists of tensors are braced lists: {buf}.
//
//   ir::Kernel k = knit::cc::trace_ranks("tp", kernel, {knit::arg({128, 64}, nl::float32, "x")}, 4);
//   auto outs = knit::run(k, {x0, x1, x2, x3});   // one output per rank, rank after rank
#pragma once

#include <algorithm>
#include <source_location>
#include <string>
#include <vector>

#include "knit/control.h"
#include "knit/knit.h"

namespace knit::cc {

// Disjoint lists of ranks: {{0, 1}, {2, 3}}.
struct ReplicaGroup {
  std::vector<std::vector<int64_t>> groups;
};

namespace detail {
struct Tracing {
  int64_t rank = 0, ranks = 1;
};
inline Tracing& tracing() {
  thread_local Tracing t;
  return t;
}

inline ir::Collective collective(ir::CollectiveKind kind, const nl::tensor& dst, const nl::tensor& src,
                                 const ReplicaGroup& g) {
  ir::Collective op{dst.view(), src.view()};
  op.kind = kind;
  for (const auto& list : g.groups) {
    op.groups.insert(op.groups.end(), list.begin(), list.end());
    op.group_sizes.push_back(static_cast<int64_t>(list.size()));
  }
  return op;
}

// One collective per (src, dst) pair, in list order (a coalesced call).
inline void each_pair(const std::vector<nl::tensor>& srcs, const std::vector<nl::tensor>& dsts,
                      const std::source_location& l, const auto& make) {
  if (srcs.size() != dsts.size() || srcs.empty())
    user_error(loc_of(l), "collective",
               "srcs has " + std::to_string(srcs.size()) + " tensors and dsts " + std::to_string(dsts.size()) +
                   "; pass one dst per src, at least one");
  for (size_t i = 0; i < srcs.size(); ++i) knit::detail::append(make(dsts[i], srcs[i]), loc_of(l));
}
}  // namespace detail

#define KNIT_CC_HERE std::source_location l = std::source_location::current()

inline void all_reduce(const std::vector<nl::tensor>& srcs, const std::vector<nl::tensor>& dsts,
                       const ReplicaGroup& group, const nl::Op& op, KNIT_CC_HERE) {
  detail::each_pair(srcs, dsts, l, [&](const nl::tensor& d, const nl::tensor& s) {
    ir::Collective c = detail::collective(ir::CollectiveKind::all_reduce, d, s, group);
    c.op = nl::alu_op(op, loc_of(l));
    return c;
  });
}

inline void all_gather(const std::vector<nl::tensor>& srcs, const std::vector<nl::tensor>& dsts,
                       const ReplicaGroup& group, int64_t collective_dim, KNIT_CC_HERE) {
  detail::each_pair(srcs, dsts, l, [&](const nl::tensor& d, const nl::tensor& s) {
    ir::Collective c = detail::collective(ir::CollectiveKind::all_gather, d, s, group);
    c.dim = collective_dim;
    return c;
  });
}

inline void reduce_scatter(const std::vector<nl::tensor>& srcs, const std::vector<nl::tensor>& dsts,
                           const ReplicaGroup& group, int64_t collective_dim, const nl::Op& op, KNIT_CC_HERE) {
  detail::each_pair(srcs, dsts, l, [&](const nl::tensor& d, const nl::tensor& s) {
    ir::Collective c = detail::collective(ir::CollectiveKind::reduce_scatter, d, s, group);
    c.dim = collective_dim;
    c.op = nl::alu_op(op, loc_of(l));
    return c;
  });
}

inline void all_to_all(const std::vector<nl::tensor>& srcs, const std::vector<nl::tensor>& dsts,
                       const ReplicaGroup& group, int64_t collective_dim, KNIT_CC_HERE) {
  detail::each_pair(srcs, dsts, l, [&](const nl::tensor& d, const nl::tensor& s) {
    ir::Collective c = detail::collective(ir::CollectiveKind::all_to_all, d, s, group);
    c.dim = collective_dim;
    return c;
  });
}

// Each (source, target) pair sends the source rank's src to the target rank's dst.
inline void collective_permute(const nl::tensor& src, const nl::tensor& dst,
                               const std::vector<std::pair<int64_t, int64_t>>& source_target_pairs, KNIT_CC_HERE) {
  ir::Collective c{dst.view(), src.view()};
  c.kind = ir::CollectiveKind::permute;
  for (const auto& [from, to] : source_target_pairs) c.groups.insert(c.groups.end(), {from, to});
  knit::detail::append(std::move(c), loc_of(l));
}

// One ring step: each rank's src goes to the next rank of its list (channel 0).
inline void collective_permute_implicit(const nl::tensor& src, const nl::tensor& dst, const ReplicaGroup& group,
                                        KNIT_CC_HERE) {
  knit::detail::append(detail::collective(ir::CollectiveKind::permute_implicit, dst, src, group), loc_of(l));
}

// One ring step of op(src0, src1), rounded to the dtype (channel 0).
inline void collective_permute_implicit_reduce(const nl::tensor& src0, const nl::tensor& src1, const nl::tensor& dst,
                                               const ReplicaGroup& group, const nl::Op& op, KNIT_CC_HERE) {
  ir::Collective c = detail::collective(ir::CollectiveKind::permute_implicit_reduce, dst, src0, group);
  c.src1 = src1.view();
  c.op = nl::alu_op(op, loc_of(l));
  knit::detail::append(std::move(c), loc_of(l));
}

// A register holding this rank's world rank.
inline nl::reg rank_id(KNIT_CC_HERE) {
  const int r = knit::detail::new_register(loc_of(l));
  knit::detail::append(ir::RegisterMove{ir::Reg{r}, ir::IntValue::of(detail::tracing().rank)}, loc_of(l));
  return nl::reg::of(r);
}

// The rank whose data a ring step `iteration` holds: ring[(pos - iteration) mod N], where pos is
// this rank's position in its list (an int or a register, e.g. a dynamic_range index).
inline nl::reg collective_permute_implicit_current_processing_rank_id(const nl::reg& iteration,
                                                                      const ReplicaGroup& group, KNIT_CC_HERE) {
  const int64_t rank = detail::tracing().rank;
  for (const auto& ring : group.groups) {
    const auto at = std::find(ring.begin(), ring.end(), rank);
    if (at == ring.end()) continue;
    const int64_t n = static_cast<int64_t>(ring.size()), pos = at - ring.begin();
    // (pos - k) mod n, kept non-negative for any step count below 2^20 rings
    const nl::reg index = (pos + n * (int64_t{1} << 20) - iteration) % n;
    nl::reg total(0);
    for (int64_t j = 0; j < n; ++j) total = total + (index == j) * ring[static_cast<size_t>(j)];
    return nl::reg::of(total.materialize(loc_of(l)));
  }
  user_error(loc_of(l), "replica-group", "rank " + std::to_string(rank) + " is in no rank list of the replica group");
}

// Flat-buffer variants (docs/collectives.md): `metadata` is the uint32 [3, R] table of send
// counts, send displacements and receive counts (written unless recv_counts_known).
inline void all_gather_v(const nl::tensor& src, const nl::tensor& dst, const ReplicaGroup& group,
                         const nl::tensor& metadata, bool recv_counts_known = false, KNIT_CC_HERE) {
  ir::Collective c = detail::collective(ir::CollectiveKind::all_gather_v, dst, src, group);
  c.metadata = metadata.view();
  c.recv_counts_known = recv_counts_known;
  knit::detail::append(std::move(c), loc_of(l));
}
inline void all_to_all_v(const nl::tensor& src, const nl::tensor& dst, const ReplicaGroup& group,
                         const nl::tensor& metadata, bool recv_counts_known = false, KNIT_CC_HERE) {
  ir::Collective c = detail::collective(ir::CollectiveKind::all_to_all_v, dst, src, group);
  c.metadata = metadata.view();
  c.recv_counts_known = recv_counts_known;
  knit::detail::append(std::move(c), loc_of(l));
}

// Traces `fn` on `ranks` ranks into one verified kernel: rank r's parameters are named
// "<arg>_rank<r>" and come after rank r-1's; its outputs likewise.
template <class Fn>
ir::Kernel trace_ranks(std::string name, Fn&& fn, const std::vector<ArgSpec>& args, int64_t ranks,
                       ir::Target target = ir::Target::trn2, std::source_location l = std::source_location::current()) {
  using Traits = knit::detail::fn_traits<std::remove_cvref_t<std::remove_pointer_t<std::decay_t<Fn>>>>;
  constexpr size_t N = Traits::arity;
  if (args.size() != N || ranks < 1)
    user_error(loc_of(l), "kernel-args",
               "kernel '" + name + "' takes " + std::to_string(N) + " tensors on at least one rank; got " +
                   std::to_string(args.size()) + " argument specs and " + std::to_string(ranks) + " ranks");
  frontend::Builder builder(name, target);
  frontend::Builder::Scope scope(builder);
  std::vector<std::vector<nl::tensor>> params(static_cast<size_t>(ranks));
  for (int64_t r = 0; r < ranks; ++r)
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string base = args[i].name.empty() ? "arg" + std::to_string(i) : args[i].name;
      const int id = builder.add_param(base + "_rank" + std::to_string(r), args[i].dtype, args[i].shape, loc_of(l));
      params[static_cast<size_t>(r)].emplace_back(id, ir::full_view(builder.tensor(id), id));
    }
  std::vector<int> outputs;
  detail::Tracing saved = detail::tracing();
  for (int64_t r = 0; r < ranks; ++r) {
    detail::tracing() = {r, ranks};
    if (ranks > 1) knit::detail::append(ir::Program{r}, loc_of(l));
    for (int id : knit::detail::call_kernel(fn, params[static_cast<size_t>(r)], std::make_index_sequence<N>{}))
      outputs.push_back(id);
  }
  detail::tracing() = saved;
  builder.set_outputs(outputs);
  return builder.finish();
}

#undef KNIT_CC_HERE

}  // namespace knit::cc
