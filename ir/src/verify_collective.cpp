// Verifier rules of the nki.collectives instruction (`collective`): the API reference's buffer,
// shape and dimension rules per kind (../docs/collectives.md lists them), checked where the call
// is. The rank rules that need the launch (which ranks exist, whether the calling rank is in a
// group) are checked when the machine runs the collective (simulator/src/collectives.cpp).
#include <algorithm>
#include <set>

#include "knit/ir/view.h"
#include "verify_rules.h"

namespace knit::ir {

namespace {

bool in_hbm(const Checker& c, const View& v) { return is_hbm(c.buffer(v)); }

// The replica groups are disjoint, non-empty and all of one size; returns that size.
int64_t check_groups(Checker& c, const Collective& op) {
  if (op.group_sizes.empty())
    c.fail("replica-group", "names no ranks; pass ReplicaGroup([[0, 1, ...]]) with the ranks that take part");
  int64_t total = 0;
  for (int64_t n : op.group_sizes) {
    if (n < 1) c.fail("replica-group", "a rank list is empty; every sub-list names at least one rank");
    if (n != op.group_sizes.front())
      c.fail("replica-group", "its rank lists have different lengths (" + std::to_string(op.group_sizes.front()) +
                                  " and " + std::to_string(n) + "); Knit needs equal-sized sub-lists");
    total += n;
  }
  if (total != static_cast<int64_t>(op.groups.size()))
    c.fail("replica-group", "group_sizes add up to " + std::to_string(total) + " but groups lists " +
                                std::to_string(op.groups.size()) + " ranks");
  std::set<int64_t> seen;
  for (int64_t r : op.groups) {
    if (r < 0) c.fail("replica-group", "rank " + std::to_string(r) + " is negative");
    if (!seen.insert(r).second)
      c.fail("replica-group", "rank " + std::to_string(r) + " appears twice; the sub-lists must be disjoint");
  }
  return op.group_sizes.front();
}

// (source, target) pairs: each rank sends at most once and receives at most once.
void check_pairs(Checker& c, const Collective& op) {
  if (op.groups.empty() || op.groups.size() % 2)
    c.fail("source-target-pairs", "must be a non-empty list of (source, target) rank pairs");
  std::set<int64_t> sources, targets;
  for (size_t i = 0; i < op.groups.size(); i += 2) {
    if (op.groups[i] < 0 || op.groups[i + 1] < 0) c.fail("source-target-pairs", "ranks must be non-negative");
    if (!sources.insert(op.groups[i]).second)
      c.fail("source-target-pairs", "rank " + std::to_string(op.groups[i]) + " is a source twice");
    if (!targets.insert(op.groups[i + 1]).second)
      c.fail("source-target-pairs", "rank " + std::to_string(op.groups[i + 1]) + " is a target twice");
  }
}

void check_buffers(Checker& c, const Collective& op, bool sbuf_allowed) {
  const std::string kind(to_string(op.kind));
  for (const View* v : {&op.dst, &op.src}) {
    const bool ok = in_hbm(c, *v) || (sbuf_allowed && c.buffer(*v) == Buffer::sbuf);
    if (!ok)
      c.fail("buffer", kind + " takes " + (sbuf_allowed ? "HBM or SBUF" : "HBM") + " tensors; " +
                           (v == &op.dst ? "dst" : "src") + " is in " + std::string(to_string(c.buffer(*v))));
  }
  if (in_hbm(c, op.dst) != in_hbm(c, op.src)) c.fail("buffer", "src and dst must both be in HBM or both in SBUF");
  if (op.src1) {
    if (!in_hbm(c, *op.src1)) c.fail("buffer", "srcs1 must be in HBM, like srcs0");
    c.same_dtype(*op.src1, "srcs1", op.src, "srcs0");
    if (op.src1->shape() != op.src.shape())
      c.fail("collective-shape",
             "srcs1 " + bracketed(op.src1->shape()) + " must have srcs0's shape " + bracketed(op.src.shape()));
  }
}

// src and dst have one shape but for `dim`, where `big` is `factor` times `small`.
void check_scaled(Checker& c, const Collective& op, const View& big, const char* big_name, const View& small,
                  const char* small_name, int64_t factor) {
  std::vector<int64_t> want = small.shape();
  if (op.dim < 0 || op.dim >= static_cast<int64_t>(want.size()))
    c.fail("collective-dim", "collective_dim " + std::to_string(op.dim) + " is not a dimension of the " +
                                 std::to_string(want.size()) + "-D " + small_name);
  want[op.dim] *= factor;
  if (big.shape() != want)
    c.fail("collective-shape", std::string(big_name) + " is " + bracketed(big.shape()) + " but " + small_name + " " +
                                   bracketed(small.shape()) + " over " + std::to_string(factor) + " ranks along dim " +
                                   std::to_string(op.dim) + " needs " + bracketed(want));
}

void check_dim(Checker& c, const Collective& op, bool sbuf_dim1) {
  const bool sbuf = c.buffer(op.src) == Buffer::sbuf;
  if (op.dim == 0 || (sbuf_dim1 && sbuf && op.dim == 1)) {
    if (sbuf && op.src.shape().size() != 2)
      c.fail("collective-shape", "SBUF collectives take 2-D tiles (partitions x one free dim)");
    return;
  }
  c.fail("collective-dim", "collective_dim " + std::to_string(op.dim) + " is not supported here: use 0" +
                               (sbuf_dim1 ? " (or 1 for SBUF tiles)" : ""));
}

void check_same_shape(Checker& c, const Collective& op) {
  if (op.dst.shape() != op.src.shape())
    c.fail("collective-shape",
           "dst " + bracketed(op.dst.shape()) + " must have src's shape " + bracketed(op.src.shape()));
}

void check_metadata(Checker& c, const Collective& op, int64_t ranks) {
  if (!op.metadata) c.fail("metadata", std::string(to_string(op.kind)) + " needs its metadata_tensor");
  const View& m = *op.metadata;
  c.dtype_in(m, "metadata_tensor", {DType::uint32});
  std::vector<int64_t> shape = m.shape();
  if (!in_hbm(c, m) && !shape.empty() && shape.front() == 1) shape.erase(shape.begin());  // SBUF (1, rows, R)
  if (shape != std::vector<int64_t>{3, ranks})
    c.fail("metadata", "metadata_tensor is " + bracketed(m.shape()) + "; it must be uint32 [3, " +
                           std::to_string(ranks) + "] (send counts, send displacements, receive counts per rank)");
  if (!in_hbm(c, op.src) || !in_hbm(c, op.dst)) c.fail("buffer", "src and dst must be flat HBM buffers");
}

}  // namespace

void check(Checker& c, const Collective& op) {
  c.same_dtype(op.dst, "dst", op.src, "src");
  if (op.channel < 0 || op.channel > 3) c.fail("channel", "channel ids run from 0 to 3");
  const bool reduces = op.kind == CollectiveKind::all_reduce || op.kind == CollectiveKind::reduce_scatter ||
                       op.kind == CollectiveKind::permute_implicit_reduce;
  if (reduces && is_packed(op.src.dtype))  // four values per element: no element-wise op
    c.fail("dtype", std::string(to_string(op.kind)) + " cannot reduce packed " + std::string(to_string(op.src.dtype)) +
                        " words; move packed data with all_gather or a permute");
  if (reduces && op.op != AluOp::add && op.op != AluOp::minimum && op.op != AluOp::maximum)
    c.fail("alu-op",
           "a collective reduces with nl.add, nl.minimum or nl.maximum; got " + std::string(to_string(op.op)));
  if (op.kind == CollectiveKind::permute) {
    check_pairs(c, op);
    check_buffers(c, op, false);
    check_same_shape(c, op);
  } else {
    const int64_t n = check_groups(c, op);
    switch (op.kind) {
      case CollectiveKind::all_reduce:
        check_buffers(c, op, true);
        check_same_shape(c, op);
        break;
      case CollectiveKind::all_gather:
        check_buffers(c, op, true);
        check_dim(c, op, true);
        check_scaled(c, op, op.dst, "dst", op.src, "src", n);
        break;
      case CollectiveKind::reduce_scatter:
        check_buffers(c, op, true);
        check_dim(c, op, false);
        check_scaled(c, op, op.src, "src", op.dst, "dst", n);
        break;
      case CollectiveKind::all_to_all:
        check_buffers(c, op, false);
        check_dim(c, op, false);
        check_same_shape(c, op);
        if (op.src.shape().empty() || op.src.shape()[0] % n)
          c.fail("collective-shape", "all_to_all splits src's dim 0 into " + std::to_string(n) + " equal chunks; " +
                                         bracketed(op.src.shape()) + " does not divide");
        break;
      case CollectiveKind::all_gather_v:
        c.requires_gen(3);  // LNC=2 only: trn2 and later
        if (n != 4)
          c.fail("replica-group", "all_gather_v runs within one chip: every rank list has exactly 4 ranks (LNC=2)");
        check_metadata(c, op, n);
        break;
      case CollectiveKind::all_to_all_v: check_metadata(c, op, n); break;
      default:  // permute_implicit, permute_implicit_reduce
        check_buffers(c, op, false);
        check_same_shape(c, op);
        break;
    }
  }
  if ((op.kind == CollectiveKind::permute_implicit_reduce) != op.src1.has_value())
    c.fail("collective", op.src1 ? "only collective_permute_implicit_reduce takes a second source"
                                 : "collective_permute_implicit_reduce needs srcs1");
}

}  // namespace knit::ir
