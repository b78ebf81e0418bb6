// Semantics: the NKI 0.6 search and index instructions (nc_match_replace8, nonzero_with_count,
// sequence_bounds, topk). The per-row arithmetic is search.cpp's, shared with the native row body.
// Values are read as fp32 (Tile::read_all) and compared with IEEE equality; indices and counts are
// stored like integers (Tile::write_int).
#include <cstdint>
#include <vector>

#include "alu.h"
#include "exec_state.h"
#include "search.h"

namespace knit::sim {

using namespace knit::ir;

// dst = data with the positions vals claims (search.h's match_replace8) set to imm, unclaimed
// elements copied (bit for bit when dst has data's dtype); dst_idx = the positions, all ones for
// a value not found (nc_find_index8's sentinel: a DESIGN CHOICE, the docs are silent).
void exec(ExecState& m, const NcMatchReplace8& op) {
  Tile data = m.tile(op.data, "data");
  Tile vals = m.tile(op.vals, "vals");
  const std::vector<float> x = data.read_all();
  const std::vector<uint32_t> bits = data.read_all_bits();
  const std::vector<float> v = vals.read_all();
  std::vector<int64_t> idx(static_cast<size_t>(data.P * 8));
  for (int64_t p = 0; p < data.P; ++p) {
    float want[8];
    for (int64_t k = 0; k < 8; ++k) want[k] = v[vals.at(p, k)];
    match_replace8(x.data() + p * data.F, data.F, want, &idx[p * 8]);
  }
  Tile dst = m.tile(op.dst, "dst");
  std::vector<bool> claimed(x.size(), false);
  for (int64_t p = 0; p < data.P; ++p)
    for (int64_t k = 0; k < 8; ++k)
      if (idx[p * 8 + k] >= 0) claimed[p * data.F + idx[p * 8 + k]] = true;
  const bool same = dst.dtype == data.dtype;
  for (int64_t i = 0; i < dst.size(); ++i) {
    if (claimed[i]) dst.write(i, static_cast<float>(op.imm));
    else if (same) dst.write_bits(i, bits[i]);
    else dst.write(i, x[i]);
  }
  if (!op.dst_idx) return;
  Tile out = m.tile(*op.dst_idx, "dst_idx");
  const uint32_t all_ones = find_index8_missing(out.dtype);
  for (int64_t p = 0; p < data.P; ++p)
    for (int64_t k = 0; k < 8; ++k) {
      const int64_t j = idx[p * 8 + k];
      j < 0 ? out.write_bits(out.at(p, k), all_ones) : out.write_int(out.at(p, k), j);
    }
}

// Only partitions 0, 16, .., 112 of the tile (the first of each GpSimd core; the verifier keeps
// the tile core-aligned) are read and written; the others of dst are left as they were.
void exec(ExecState& m, const NonzeroWithCount& op) {
  Tile src = m.tile(op.src, "src");
  Tile dst = m.tile(op.dst, "dst");
  std::vector<float> row(static_cast<size_t>(src.F));
  std::vector<int64_t> out(static_cast<size_t>(src.F + 1));
  for (int64_t p = 0; p < src.P; p += 16) {
    for (int64_t j = 0; j < src.F; ++j) row[j] = src.read(src.at(p, j));
    nonzero_with_count(row.data(), src.F, op.index_offset, op.padding_val, out.data());
    for (int64_t j = 0; j <= src.F; ++j) dst.write_int(dst.at(p, j), out[j]);
  }
}

// dst[0, 0, :] = the starts, dst[0, 1, :] = the (exclusive) ends of search.h's sequence_bounds.
void exec(ExecState& m, const SequenceBounds& op) {
  Tile ids = m.tile(op.segment_ids, "segment_ids");
  const std::vector<float> x = ids.read_all();
  for (float id : x)
    if (const char* why = bad_segment_id(id)) m.fail("operand", std::string("segment_ids: ") + why);
  const int64_t n = ids.F;
  std::vector<int64_t> starts(static_cast<size_t>(n)), ends(static_cast<size_t>(n));
  sequence_bounds(x.data(), n, starts.data(), ends.data());
  Tile dst = m.tile(op.dst, "dst");
  for (int64_t j = 0; j < n; ++j) {
    dst.write_int(dst.at(0, j), starts[j]);
    dst.write_int(dst.at(0, n + j), ends[j]);
  }
}

// Per group of 16 partitions: snake position s is partition s % 16, column s / 16; the K largest
// of the first n (search.h's topk) go to every partition of the group (a DESIGN CHOICE: the docs
// leave the output layout open).
void exec(ExecState& m, const Topk& op) {
  Tile src = m.tile(op.src, "src");
  Tile vals = m.tile(op.val_dst, "val_dst");
  Tile idx = m.tile(op.idx_dst, "idx_dst");
  const int64_t K = vals.F;
  std::vector<float> snake(static_cast<size_t>(op.n)), top(static_cast<size_t>(K));
  std::vector<uint32_t> order(static_cast<size_t>(op.n)), at(static_cast<size_t>(K));
  for (int64_t g = 0; g < src.P; g += 16) {
    for (int64_t s = 0; s < op.n; ++s) snake[s] = src.read(src.at(g + s % 16, s / 16));
    topk(snake.data(), op.n, K, order.data(), top.data(), at.data());
    for (int64_t q = g; q < g + 16; ++q)
      for (int64_t k = 0; k < K; ++k) {
        vals.write(vals.at(q, k), top[k]);
        idx.write_int(idx.at(q, k), at[k]);
      }
  }
}

}  // namespace knit::sim
