// Semantics: data movement and the Tensor Engine (dma_copy, dma_transpose, nc_matmul,
// nc_transpose, tensor_copy, tensor_copy_predicated, memset). Every executor reads all of its
// inputs before writing, so an instruction whose dst overlaps a source behaves as if the sources
// were copied first.
#include <algorithm>
#include <limits>
#include <vector>

#include "alu.h"
#include "exec_state.h"
#include "matmul.h"

namespace knit::sim {

using namespace knit::ir;

namespace {

// Copies src element i to dst element i: raw bits when the dtypes match (bit exact, NaN payloads
// kept), otherwise through fp32 with the destination's rounding.
void copy_elements(const Tile& src, Tile& dst, const std::vector<int64_t>& dst_index_of_src) {
  if (src.dtype == dst.dtype) {
    const std::vector<uint32_t> bits = src.read_all_bits();
    for (int64_t i = 0; i < src.size(); ++i) dst.write_bits(dst_index_of_src[i], bits[i]);
  } else {
    const std::vector<float> values = src.read_all();
    for (int64_t i = 0; i < src.size(); ++i) dst.write(dst_index_of_src[i], values[i]);
  }
}

std::vector<int64_t> identity_order(int64_t n) {
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  return order;
}

}  // namespace

void exec(ExecState& m, const DmaCopy& op) {
  Tile src = m.tile(op.src, "src", op.oob_mode);
  Tile dst = m.tile(op.dst, "dst", op.oob_mode);
  if (!src.any_skipped() && !dst.any_skipped()) {
    copy_elements(src, dst, identity_order(src.size()));
    return;
  }
  // oob_mode=skip dropped some rows of an indirect side: move only the others.
  const bool bits = src.dtype == dst.dtype;
  for (int64_t i = 0; i < src.size(); ++i) {
    if (src.skipped(i) || dst.skipped(i)) continue;
    if (bits) dst.write_bits(i, src.read_bits(i));
    else dst.write(i, src.read(i));
  }
}

// Element by element (all sources of element i are read, then dst element i written), so a
// scatter-add whose indices repeat accumulates every contribution when unique_indices=False.
void exec(ExecState& m, const DmaCompute& op) {
  std::vector<Tile> srcs;
  for (const View& v : op.srcs) srcs.push_back(m.tile(v, "srcs", op.oob_mode));
  Tile dst = m.tile(op.dst, "dst", op.oob_mode);
  if (op.unique_indices) {
    if (const View* index = op.dst.index_view()) {
      Tile it = m.tile(*index, "vector_offset");
      std::vector<int64_t> seen;
      for (int64_t i = 0; i < it.size(); ++i) seen.push_back(it.read_int(i));
      std::sort(seen.begin(), seen.end());
      if (std::adjacent_find(seen.begin(), seen.end()) != seen.end())
        m.fail("duplicate-index", "dma_compute was told unique_indices=True but its vector_offset repeats index " +
                                      std::to_string(*std::adjacent_find(seen.begin(), seen.end())) +
                                      "; pass unique_indices=False to accumulate repeated rows");
    }
  }
  for (int64_t i = 0; i < dst.size(); ++i) {
    if (dst.skipped(i)) continue;
    float sum = 0;
    bool skip = false;
    for (size_t k = 0; k < srcs.size(); ++k) {
      if (srcs[k].skipped(i)) skip = true;
      else sum = k == 0 ? srcs[k].read(i) : sum + srcs[k].read(i);  // fp32 adds; keeps a lone -0
    }
    if (!skip) dst.write(i, sum);
  }
}

void exec(ExecState& m, const DmaTranspose& op) {
  Tile src = m.tile(op.src, "src");
  Tile dst = m.tile(op.dst, "dst");
  const std::vector<int64_t> sshape = op.src.shape();
  const size_t rank = sshape.size();
  const IntList axes = op.resolved_axes();
  // dst dim k is src dim axes[k]; map each src element (row-major) to its dst position.
  std::vector<int64_t> dshape(rank), dstride(rank);
  for (size_t k = 0; k < rank; ++k) dshape[k] = sshape[axes[k]];
  int64_t s = 1;
  for (size_t k = rank; k-- > 0;) {
    dstride[k] = s;
    s *= dshape[k];
  }
  std::vector<int64_t> order(src.size()), idx(rank, 0);
  for (int64_t e = 0; e < src.size(); ++e) {
    int64_t d = 0;
    for (size_t k = 0; k < rank; ++k) d += idx[axes[k]] * dstride[k];
    order[e] = d;
    for (size_t k = rank; k-- > 0;) {
      if (++idx[k] < sshape[k]) break;
      idx[k] = 0;
    }
  }
  copy_elements(src, dst, order);
}

void exec(ExecState& m, const NcMatmul& op) {
  Tile stat = m.tile(op.stationary, "stationary");
  Tile mov = m.tile(op.moving, "moving");
  Tile dst = m.tile(op.dst, "dst");
  // Transpose mode (is_transpose, moving = identity) passes values through: zero entries of
  // moving contribute nothing, so NaN/Inf in stationary move bit for bit (v3+ behaviour).
  // double_row: the [P, 2, M] operand read partition-major is a [2P, M] matrix whose row 2p + j
  // is (p, j), so the same K-sum covers K = 2P.
  const int64_t rows = op.perf_mode == MatmulPerfMode::double_row ? 2 : 1;
  const std::vector<float> partial = matmul_partials(stat.read_all(), mov.read_all(), stat.P * rows, stat.F / rows,
                                                     mov.F / rows, op.is_transpose);
  write_matmul_result(m, dst, partial, op.accumulate);
}

void exec(ExecState& m, const NcTranspose& op) {
  Tile data = m.tile(op.data, "data");
  Tile dst = m.tile(op.dst, "dst");
  std::vector<int64_t> order(data.size());
  for (int64_t p = 0; p < data.P; ++p)
    for (int64_t f = 0; f < data.F; ++f) order[data.at(p, f)] = dst.at(f, p);
  copy_elements(data, dst, order);
}

void exec(ExecState& m, const TensorCopy& op) {
  Tile src = m.tile(op.src, "src");
  Tile dst = m.tile(op.dst, "dst");
  copy_elements(src, dst, identity_order(src.size()));
}

void exec(ExecState& m, const TensorCopyPredicated& op) {
  Tile pred = m.tile(op.predicate, "predicate");
  Tile dst = m.tile(op.dst, "dst");
  std::vector<bool> take(pred.size());
  for (int64_t i = 0; i < pred.size(); ++i) take[i] = (pred.read(i) != 0.0f) != op.reverse_pred;
  if (op.src.is_tile()) {
    Tile src = m.tile(op.src.tile, "src");
    const bool same = src.dtype == dst.dtype;
    std::vector<uint32_t> bits(src.size());
    std::vector<float> values(src.size());
    for (int64_t i = 0; i < src.size(); ++i)
      if (take[i]) (same ? void(bits[i] = src.read_bits(i)) : void(values[i] = src.read(i)));
    for (int64_t i = 0; i < dst.size(); ++i)
      if (take[i]) same ? dst.write_bits(i, bits[i]) : dst.write(i, values[i]);
  } else {
    for (int64_t i = 0; i < dst.size(); ++i)
      if (take[i]) dst.write(i, static_cast<float>(op.src.imm));
  }
}

void exec(ExecState& m, const Memset& op) {
  Tile dst = m.tile(op.dst, "dst");
  const uint32_t bits = memset_bits(dst.dtype, op.value);
  for (int64_t i = 0; i < dst.size(); ++i) dst.write_bits(i, bits);
}

void exec(ExecState& m, const NcStreamShuffle& op) {
  Tile src = m.tile(op.src, "src");
  Tile dst = m.tile(op.dst, "dst");
  // Read every source row a mask entry names before writing (in-place shuffles are allowed).
  std::vector<std::vector<uint32_t>> rows(src.P);
  for (int64_t q = 0; q < dst.P; q += 32)
    for (int64_t i = 0; i < 32 && q + i < dst.P; ++i) {
      const int64_t from = op.shuffle_mask[i];
      if (from == 255 || !rows[q + from].empty()) continue;
      for (int64_t f = 0; f < src.F; ++f) rows[q + from].push_back(src.read_bits(src.at(q + from, f)));
    }
  for (int64_t q = 0; q < dst.P; q += 32)
    for (int64_t i = 0; i < 32 && q + i < dst.P; ++i) {
      const int64_t from = op.shuffle_mask[i];
      if (from == 255) continue;
      for (int64_t f = 0; f < dst.F; ++f) dst.write_bits(dst.at(q + i, f), rows[q + from][f]);
    }
}

}  // namespace knit::sim
