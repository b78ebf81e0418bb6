#include "collectives.h"

#include <algorithm>

#include "alu.h"
#include "knit/ir/numerics.h"

namespace knit::sim {

using namespace knit::ir;

bool has_collectives(const Kernel& k) {
  return std::any_of(k.body.begin(), k.body.end(),
                     [](const Instruction& i) { return std::holds_alternative<Collective>(i.op); });
}

std::vector<int64_t> collective_members(const Collective& op, int64_t rank) {
  if (op.kind == CollectiveKind::permute) {  // every rank some pair names meets every other
    std::vector<int64_t> members(op.groups.begin(), op.groups.end());
    std::sort(members.begin(), members.end());
    members.erase(std::unique(members.begin(), members.end()), members.end());
    if (!std::binary_search(members.begin(), members.end(), rank)) return {};
    return members;
  }
  size_t begin = 0;
  for (int64_t n : op.group_sizes) {
    const auto first = op.groups.begin() + static_cast<std::ptrdiff_t>(begin);
    if (std::find(first, first + n, rank) != first + n) return {first, first + n};
    begin += static_cast<size_t>(n);
  }
  return {};
}

namespace {

// A run of `count` dst elements from `sender`'s src (sender -1: the reduction over all ranks).
struct Piece {
  int64_t dst = 0, count = 0;
  int sender = -1;
  int64_t src = 0;
};

constexpr int kAllRanks = -1;

int64_t product(const std::vector<int64_t>& v, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= v[i];
  return n;
}

// all_gather along dim d: sender s's src, as runs of S[d] * inner elements, lands in slot s of
// each of the `outer` runs of dst.
std::vector<Piece> gather_pieces(const Collective& op, const std::vector<int64_t>& shape, int ranks) {
  const size_t d = static_cast<size_t>(op.dim);
  const int64_t outer = product(shape, 0, d), run = product(shape, d, shape.size());
  std::vector<Piece> pieces;
  for (int s = 0; s < ranks; ++s)
    for (int64_t k = 0; k < outer; ++k) pieces.push_back({k * ranks * run + s * run, run, s, k * run});
  return pieces;
}

// The ring predecessor of position p (collective_permute_implicit's fixed ring: list order).
int predecessor(size_t p, size_t n) { return static_cast<int>((p + n - 1) % n); }

uint32_t meta(const RankOperands& r, int64_t row, int64_t column, int64_t ranks) {
  return r.metadata[static_cast<size_t>(row * ranks + column)];
}

// *_v: sender s's chunk for `receiver` (count elements at displ in its src) lands in the
// receiver's slot s of dst (dst_size / R elements each).
std::vector<Piece> variable_pieces(const Collective& op, const CollectiveShapes& shapes,
                                   const std::vector<RankOperands>& ranks, size_t receiver,
                                   std::vector<uint32_t>& recv_counts, const CollectiveFail& fail) {
  const int64_t n = static_cast<int64_t>(ranks.size());
  const int64_t slot = shapes.dst_size / n, src_size = product(shapes.src_shape, 0, shapes.src_shape.size());
  const bool gather = op.kind == CollectiveKind::all_gather_v;
  std::vector<Piece> pieces;
  for (int64_t s = 0; s < n; ++s) {
    const int64_t column = gather ? 0 : static_cast<int64_t>(receiver);
    const int64_t count = meta(ranks[s], 0, column, n), displ = meta(ranks[s], 1, column, n);
    if (displ + count > src_size)
      fail("collective-count", "rank position " + std::to_string(s) + " sends " + std::to_string(count) +
                                   " elements from displacement " + std::to_string(displ) + " but its src has " +
                                   std::to_string(src_size) + "; fix rows 0 and 1 of its metadata_tensor");
    if (count > slot)
      fail("collective-count", "rank position " + std::to_string(s) + " sends " + std::to_string(count) +
                                   " elements into a receive slot of " + std::to_string(slot) +
                                   " (dst elements / ranks); make dst larger or send less");
    recv_counts.push_back(static_cast<uint32_t>(count));
    pieces.push_back({s * slot, count, static_cast<int>(s), displ});
  }
  return pieces;
}

std::vector<Piece> pieces_for(const Collective& op, const CollectiveShapes& shapes, const std::vector<int64_t>& members,
                              const std::vector<RankOperands>& ranks, size_t receiver, Received& out,
                              const CollectiveFail& fail) {
  const int n = static_cast<int>(ranks.size());
  const int64_t size = product(shapes.src_shape, 0, shapes.src_shape.size());
  switch (op.kind) {
    case CollectiveKind::all_reduce: return {{0, size, kAllRanks, 0}};
    case CollectiveKind::all_gather: return gather_pieces(op, shapes.src_shape, n);
    case CollectiveKind::reduce_scatter: {
      const int64_t chunk = size / n;
      return {{0, chunk, kAllRanks, static_cast<int64_t>(receiver) * chunk}};
    }
    case CollectiveKind::all_to_all: {
      const int64_t chunk = size / n;
      std::vector<Piece> pieces;
      for (int s = 0; s < n; ++s) pieces.push_back({s * chunk, chunk, s, static_cast<int64_t>(receiver) * chunk});
      return pieces;
    }
    case CollectiveKind::permute:  // from the pair whose target is the receiver, if any
      for (size_t i = 0; i + 1 < op.groups.size(); i += 2)
        if (op.groups[i + 1] == members[receiver]) {
          const auto from = std::find(members.begin(), members.end(), op.groups[i]);
          return {{0, size, static_cast<int>(from - members.begin()), 0}};
        }
      return {};
    case CollectiveKind::permute_implicit:
    case CollectiveKind::permute_implicit_reduce: return {{0, size, predecessor(receiver, ranks.size()), 0}};
    case CollectiveKind::all_gather_v:
    case CollectiveKind::all_to_all_v: return variable_pieces(op, shapes, ranks, receiver, out.recv_counts, fail);
  }
  return {};
}

bool poisoned(const std::vector<uint8_t>& flags, int64_t i) { return !flags.empty() && flags[i]; }

// op over n values of dtype t, left to right, given their bits (the rounding model in
// collectives.h: fp32 or int64 steps, one rounding to t at the end).
template <class BitsAt>
uint32_t fold(AluOp op, DType t, size_t n, const BitsAt& bits_at) {
  uint8_t bytes[8] = {};
  const bool integer = is_integer(t) || t == DType::bool_;
  int64_t int_acc = 0;
  float acc = 0;
  for (size_t k = 0; k < n; ++k) {
    store_bits(t, bits_at(k), bytes);
    if (integer) {
      const int64_t v = load_int(t, bytes);
      int_acc = k ? int_alu(op, int_acc, v) : v;
    } else {
      const float v = decode(t, bytes);
      acc = k ? alu(op, acc, v) : v;
    }
  }
  if (integer) store_int(t, int_acc, bytes);
  else encode(t, acc, bytes);
  return load_bits(t, bytes);
}

// op over the ranks' element i, in position order.
uint32_t reduce_element(AluOp op, DType t, const std::vector<RankOperands>& ranks, int64_t i) {
  return fold(op, t, ranks.size(), [&](size_t r) { return ranks[r].src[i]; });
}

// permute_implicit_reduce's op(srcs0, srcs1) of one rank's element i, rounded to the dtype.
uint32_t combine_element(AluOp op, DType t, const RankOperands& r, int64_t i) {
  return fold(op, t, 2, [&](size_t k) { return k ? r.src1[i] : r.src[i]; });
}

}  // namespace

Received receive(const Collective& op, const CollectiveShapes& shapes, const std::vector<int64_t>& members,
                 const std::vector<RankOperands>& ranks, size_t receiver, const CollectiveFail& fail) {
  Received out;
  out.bits.assign(static_cast<size_t>(shapes.dst_size), 0);
  out.covered.assign(out.bits.size(), 0);
  out.poisoned.assign(out.bits.size(), 0);
  std::vector<Piece> pieces = pieces_for(op, shapes, members, ranks, receiver, out, fail);
  const bool combines = op.kind == CollectiveKind::permute_implicit_reduce;
  for (const Piece& p : pieces)
    for (int64_t k = 0; k < p.count; ++k) {
      const int64_t d = p.dst + k, s = p.src + k;
      out.covered[d] = 1;
      if (p.sender == kAllRanks) {
        out.bits[d] = reduce_element(op.op, shapes.dtype, ranks, s);
        for (const RankOperands& r : ranks) out.poisoned[d] |= poisoned(r.src_poison, s);
        continue;
      }
      const RankOperands& r = ranks[static_cast<size_t>(p.sender)];
      out.bits[d] = combines ? combine_element(op.op, shapes.dtype, r, s) : r.src[s];
      out.poisoned[d] = poisoned(r.src_poison, s) || (combines && poisoned(r.src1_poison, s));
    }
  return out;
}

}  // namespace knit::sim
