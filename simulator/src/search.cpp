#include "search.h"

#include <algorithm>

#include "alu.h"

namespace knit::sim {

using knit::ir::AluOp;

namespace {
bool equal(float a, float b) { return alu(AluOp::equal, a, b) != 0.0f; }
}  // namespace

void match_replace8(const float* row, int64_t F, const float* vals, int64_t* idx) {
  for (int i = 7; i >= 0; --i) {
    int64_t skip = 0;  // occurrences the later (already processed) equal slots claimed
    for (int e = i + 1; e < 8; ++e) skip += equal(vals[e], vals[i]);
    idx[i] = -1;
    for (int64_t j = 0; j < F; ++j)
      if (equal(row[j], vals[i]) && skip-- == 0) {
        idx[i] = j;
        break;
      }
  }
}

void nonzero_with_count(const float* row, int64_t T, int64_t index_offset, int64_t padding, int64_t* out) {
  int64_t n = 0;
  for (int64_t j = 0; j < T; ++j)
    if (row[j] != 0.0f) out[n++] = j + index_offset;
  for (int64_t j = n; j < T; ++j) out[j] = padding;
  out[T] = n;
}

void sequence_bounds(const float* ids, int64_t n, int64_t* starts, int64_t* ends) {
  for (int64_t j = 0; j < n;) {
    int64_t end = j + 1;
    while (end < n && ids[end] == ids[j]) ++end;
    for (int64_t k = j; k < end; ++k) {
      starts[k] = ids[j] == 0.0f ? n : j;
      ends[k] = ids[j] == 0.0f ? -1 : end;
    }
    j = end;
  }
}

const char* bad_segment_id(float id) {
  if (!(id >= 0.0f)) return "a segment id is negative or NaN; ids are non-negative integers (0 marks padding)";
  if (id != static_cast<float>(static_cast<int64_t>(id))) return "a segment id is not an integer";
  if (id > 16777216.0f) return "a segment id is above 2^24, where fp32 (the comparison's precision) loses integers";
  return nullptr;
}

void topk(const float* v, int64_t n, int64_t K, uint32_t* order, float* out_vals, uint32_t* out_idx) {
  for (int64_t s = 0; s < n; ++s) order[s] = static_cast<uint32_t>(s);
  // Rank first: ranks above, or equal (neither ranks above the other) at a lower position.
  auto first = [&](uint32_t a, uint32_t b) {
    if (ranks_above(v[a], v[b])) return true;
    if (ranks_above(v[b], v[a])) return false;
    return a < b;
  };
  std::partial_sort(order, order + K, order + n, first);
  // Ascending: the kept values from the K-th ranked up, equal values by ascending position.
  std::sort(order, order + K, [&](uint32_t a, uint32_t b) {
    if (ranks_above(v[b], v[a])) return true;
    if (ranks_above(v[a], v[b])) return false;
    return a < b;
  });
  for (int64_t k = 0; k < K; ++k) {
    out_vals[k] = v[order[k]];
    out_idx[k] = order[k];
  }
}

}  // namespace knit::sim
