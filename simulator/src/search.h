// Per-row search and index helpers of the NKI 0.6 instructions nc_match_replace8,
// nonzero_with_count, sequence_bounds and topk: one definition shared by the reference executors
// (exec_search.cpp) and the native row body (native/bodies.cpp), so both paths give the same bits.
// Values arrive decoded to fp32; comparisons are alu()'s (IEEE: NaN equals nothing, -0 == +0).
#pragma once

#include <cstdint>

namespace knit::sim {

// nc_match_replace8 of one partition: vals' slots in reverse order (7 .. 0) each claim the first
// position of row[0..F) equal to their value that no slot processed before claimed; idx[i] = that
// position, or -1 when there is none. (Slot i takes the occurrence after those the later equal
// slots took; nc_find_index8 counts the earlier ones.)
void match_replace8(const float* row, int64_t F, const float* vals, int64_t* idx);

// nonzero_with_count of one processed partition: out[0..N) = the positions j (+ index_offset) of
// row[0..T) with row[j] != 0, ascending; out[N..T) = padding; out[T] = N.
void nonzero_with_count(const float* row, int64_t T, int64_t index_offset, int64_t padding, int64_t* out);

// sequence_bounds of ids[0..n): for an id of 0 (padding) start n and end -1, else the first index
// and one past the last of the run of equal neighbouring ids holding it.
void sequence_bounds(const float* ids, int64_t n, int64_t* starts, int64_t* ends);
// Why sequence_bounds cannot take this id (null when it can): ids are non-negative integers,
// compared as fp32, so at most 2^24 (each such integer has its own fp32 value).
const char* bad_segment_id(float id);

// topk of one 16-partition group: the K largest of the n snake values v[0..n) (max8's order:
// NaN largest, -0 == +0; among equal values the lower position is kept), written ascending by
// value, equal values by ascending position. `order` is scratch for n positions.
void topk(const float* v, int64_t n, int64_t K, uint32_t* order, float* out_vals, uint32_t* out_idx);

}  // namespace knit::sim
