// Semantics: selects (select_reduce, range_select, affine_select), statistics (bn_stats, bn_aggr),
// top-8 (max8, nc_find_index8), iota, tensor_partition_reduce and the GpSimd gathers
// (local_gather, nc_n_gather), as the NKI ISA docs define each (nki.isa.select_reduce, ...).
// Every executor reads all of its inputs before writing any output. Choices where the spec is
// silent are marked "Knit:".
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "alu.h"
#include "exec_compute.h"
#include "exec_state.h"

namespace knit::sim {

using namespace knit::ir;

namespace {

// ---- VectorE accumulator registers (reduce_cmd) ---------------------------------------------
// One fp32 per partition lane (indexed by the operand's partition, 0 .. P-1 within the view),
// shared by select_reduce, range_select and the other VectorE reducers. row(p) is reduce_op
// folded left over partition p's values in free order, starting from the first value (as in
// exec_compute.cpp); it sees the engine's fp32 values, before any rounding to dst's dtype.
//   idle          registers untouched; reduce_res gets row(p)  (Knit: NKI's "np.max(result)")
//   reset         registers = reduce_op's identity (maximum -inf, minimum +inf, add 0)
//   reset_reduce  registers = row(p)
//   reduce        registers = registers op row(p)
// Except under idle, reduce_res receives the registers. load_reduce needs a seed operand these
// instructions lack; the verifier rejects it.

// ---- affine index generation (iota, affine_select) -------------------------------------------
// value(p, j) = offset + p * channel_multiplier + sum_k i_k * step_k, where (i_0, ..., i_n) is
// free element j decomposed over the pattern's nums (outermost first, row-major) and p counts
// partitions from the start of dst (Knit: tile-relative). The verifier guarantees every value
// fits int32, so int64 arithmetic equals the engine's int32 arithmetic.
std::vector<int64_t> free_affine_values(const Pattern& pattern, int64_t F) {
  std::vector<int64_t> values(static_cast<size_t>(F));
  for (int64_t j = 0; j < F; ++j) {
    int64_t rest = j, v = 0;
    for (size_t k = pattern.size(); k-- > 0;) {
      v += (rest % pattern[k].num) * pattern[k].step;
      rest /= pattern[k].num;
    }
    values[j] = v;
  }
  return values;
}

// Which elements to take, and their raw bits (same dtype: bit-exact) or fp32 values.
struct Picked {
  std::vector<bool> take;
  std::vector<uint32_t> bits;
  std::vector<float> values;
};

// Reads src's elements where `take` is set (only those: unselected elements may be unwritten).
Picked pick(const Tile& src, DType dst_dtype, std::vector<bool> take) {
  Picked r{std::move(take), std::vector<uint32_t>(src.size()), std::vector<float>(src.size())};
  const bool same = src.dtype == dst_dtype;
  for (int64_t i = 0; i < src.size(); ++i)
    if (r.take[i]) same ? void(r.bits[i] = src.read_bits(i)) : void(r.values[i] = src.read(i));
  return r;
}

}  // namespace

// Shared with the native path (exec_compute.h): the reduction of the rows, after dst is written.
void finish_vector_reduce(ExecState& m, ReduceCmd cmd, AluOp op, const float* rows, int64_t P,
                          const std::optional<View>& res) {
  if (cmd == ReduceCmd::load_reduce) m.fail("reduce-cmd", "load_reduce needs an initial value operand");
  std::vector<float> result(static_cast<size_t>(P));
  for (int64_t p = 0; p < P; ++p) {
    update_accumulator(cmd, op, m.vector_acc[p], rows[p]);
    result[p] = cmd == ReduceCmd::idle ? rows[p] : m.vector_acc[p];
  }
  if (!res) return;
  Tile t = m.tile(*res, "reduce_res");
  for (int64_t p = 0; p < t.P; ++p) t.write(t.at(p, 0), result[p]);
}

// dst = predicate ? on_true : on_false, predicate = (value != 0) xor reverse_pred. Knit:
// reverse_pred is a logical not (NKI's "~predicate" on 0/1 masks), as in tensor_copy_predicated.
void exec(ExecState& m, const SelectReduce& op) {
  Tile pred = m.tile(op.predicate, "predicate");
  Tile on_true = m.tile(op.on_true, "on_true");
  Tile dst = m.tile(op.dst, "dst");
  const std::vector<float> fill = m.column(op.on_false, dst.P, "on_false");
  std::vector<float> out(dst.size());
  for (int64_t i = 0; i < dst.size(); ++i) {
    const bool take = (pred.read(i) != 0.0f) != op.reverse_pred;
    out[i] = take ? on_true.read(i) : fill[i / dst.F];
  }
  const std::vector<float> rows = row_folds(op.reduce_op, out, dst.P, dst.F);
  dst.write_all(out);
  finish_vector_reduce(m, op.reduce_cmd, op.reduce_op, rows.data(), dst.P, op.reduce_res);
}

// idx = range_start + j (fp32); keep on_true[p, j] iff comp_op0(idx, bound0[p]) and
// comp_op1(idx, bound1[p]), else on_false_value (-FLT_MAX, which rounds to -inf in bf16/fp16/fp8
// destinations); then a max-reduction into the VectorE accumulators.
void exec(ExecState& m, const RangeSelect& op) {
  Tile on_true = m.tile(op.on_true_tile, "on_true_tile");
  Tile dst = m.tile(op.dst, "dst");
  const std::vector<float> b0 = m.column(Operand::of(op.bound0), dst.P, "bound0");
  const std::vector<float> b1 = m.column(Operand::of(op.bound1), dst.P, "bound1");
  const float start = static_cast<float>(op.range_start);
  std::vector<float> out(dst.size());
  for (int64_t p = 0; p < dst.P; ++p)
    for (int64_t j = 0; j < dst.F; ++j) {
      const float idx = start + static_cast<float>(j);
      const bool keep = alu(op.comp_op0, idx, b0[p]) != 0.0f && alu(op.comp_op1, idx, b1[p]) != 0.0f;
      out[dst.at(p, j)] = keep ? on_true.read(dst.at(p, j)) : static_cast<float>(op.on_false_value);
    }
  const std::vector<float> rows = row_folds(op.reduce_op, out, dst.P, dst.F);
  dst.write_all(out);
  finish_vector_reduce(m, op.reduce_cmd, op.reduce_op, rows.data(), dst.P, op.reduce_res);
}

// dst[p, :] = (count, mean, var*count) of data[p, 0::2], then the same of data[p, 1::2].
void exec(ExecState& m, const BnStats& op) {
  Tile data = m.tile(op.data, "data");
  Tile dst = m.tile(op.dst, "dst");
  const std::vector<float> x = data.read_all();
  std::vector<float> out(dst.size());
  for (int64_t p = 0; p < data.P; ++p)
    for (int64_t parity = 0; parity < 2; ++parity) {
      const Moments g = group_moments(x.data() + p * data.F, data.F, parity);
      float* o = out.data() + dst.at(p, 3 * parity);
      o[0] = g.count;
      o[1] = g.mean;
      o[2] = g.m2;
    }
  dst.write_all(out);
}

// dst[p, :] = (mean, population variance) of the samples the (count, mean, var*count) triples
// describe; bn_aggr(bn_stats(x)) gives x's per-partition mean and variance.
void exec(ExecState& m, const BnAggr& op) {
  Tile data = m.tile(op.data, "data");
  Tile dst = m.tile(op.dst, "dst");
  const std::vector<float> x = data.read_all();
  std::vector<float> out(dst.size());
  for (int64_t p = 0; p < data.P; ++p) {
    const auto [mean, var] = combine_moments(x.data() + p * data.F, data.F / 3);
    out[dst.at(p, 0)] = mean;
    out[dst.at(p, 1)] = var;
  }
  dst.write_all(out);
}

// The 8 largest values of each partition, descending; equal values keep their source order.
void exec(ExecState& m, const Max8& op) {
  Tile src = m.tile(op.src, "src");
  Tile dst = m.tile(op.dst, "dst");
  const std::vector<float> x = src.read_all();
  std::vector<float> out(dst.size());
  for (int64_t p = 0; p < src.P; ++p) {
    float top[8];
    top8(x.data() + p * src.F, src.F, top);
    for (int64_t k = 0; k < 8; ++k) out[dst.at(p, k)] = top[k];
  }
  dst.write_all(out);
}

// dst[p, k] = index (flattened free dims) of vals[p, k]'s first occurrence in data[p, :]; when
// vals[p, k] repeats an earlier slot's value it takes the next occurrence. Missing: all ones.
void exec(ExecState& m, const NcFindIndex8& op) {
  Tile data = m.tile(op.data, "data");
  Tile vals = m.tile(op.vals, "vals");
  Tile dst = m.tile(op.dst, "dst");
  const std::vector<float> x = data.read_all();
  const std::vector<float> v = vals.read_all();
  std::vector<int64_t> out(dst.size());
  for (int64_t p = 0; p < data.P; ++p) {
    float want[8];
    int64_t found[8];
    for (int64_t k = 0; k < 8; ++k) want[k] = v[vals.at(p, k)];
    find_index8(x.data() + p * data.F, data.F, want, found);
    for (int64_t k = 0; k < 8; ++k) out[dst.at(p, k)] = found[k];
  }
  const uint32_t all_ones = find_index8_missing(dst.dtype);
  for (int64_t i = 0; i < dst.size(); ++i) out[i] < 0 ? dst.write_bits(i, all_ones) : dst.write_int(i, out[i]);
}

// dst[p, j] = value(p, j), cast like an integer store: saturating for integer dtypes, rounded
// (int -> fp32 -> dst) for float dtypes.
void exec(ExecState& m, const Iota& op) {
  Tile dst = m.tile(op.dst, "dst");
  const std::vector<int64_t> free = free_affine_values(op.pattern, dst.F);
  for (int64_t p = 0; p < dst.P; ++p)
    for (int64_t j = 0; j < dst.F; ++j) dst.write_int(dst.at(p, j), op.offset + p * op.channel_multiplier + free[j]);
}

// dst = cmp_op(value(p, j), 0) ? on_true_tile : on_false_value. Same dtypes copy bits; otherwise
// through fp32 with dst's rounding.
void exec(ExecState& m, const AffineSelect& op) {
  Tile on_true = m.tile(op.on_true_tile, "on_true_tile");
  Tile dst = m.tile(op.dst, "dst");
  const std::vector<int64_t> free = free_affine_values(op.pattern, dst.F);
  std::vector<bool> take(dst.size());
  for (int64_t p = 0; p < dst.P; ++p)
    for (int64_t j = 0; j < dst.F; ++j) {
      const int64_t value = op.offset + p * op.channel_multiplier + free[j];
      take[dst.at(p, j)] = alu(op.cmp_op, static_cast<float>(value), 0.0f) != 0.0f;
    }
  const Picked picked = pick(on_true, dst.dtype, std::move(take));
  const bool same = on_true.dtype == dst.dtype;
  for (int64_t i = 0; i < dst.size(); ++i) {
    if (!picked.take[i]) dst.write(i, static_cast<float>(op.on_false_value));
    else if (same) dst.write_bits(i, picked.bits[i]);
    else dst.write(i, picked.values[i]);
  }
}

// dst[0, j] = op over partitions p = 0..P-1 (in order) of data[p, j]. Arithmetic ops in fp32
// (average = sum / P); bitwise ops on the integer bit patterns.
void exec(ExecState& m, const TensorPartitionReduce& op) {
  Tile data = m.tile(op.data, "data");
  Tile dst = m.tile(op.dst, "dst");
  if (alu_class(op.op) == AluClass::Bitvec) {
    std::vector<uint32_t> acc(data.F);
    for (int64_t j = 0; j < data.F; ++j) {
      acc[j] = data.read_bits(data.at(0, j));
      for (int64_t p = 1; p < data.P; ++p) acc[j] = alu_bits(op.op, acc[j], data.read_bits(data.at(p, j)));
    }
    for (int64_t j = 0; j < dst.F; ++j) dst.write_bits(j, acc[j]);
    return;
  }
  std::vector<float> acc(data.F);
  for (int64_t j = 0; j < data.F; ++j) {
    acc[j] = data.read(data.at(0, j));
    for (int64_t p = 1; p < data.P; ++p) acc[j] = alu(op.op, acc[j], data.read(data.at(p, j)));
    if (op.op == AluOp::average) acc[j] /= static_cast<float>(data.P);
  }
  dst.write_all(acc);
}

// Each 16-partition group c (GpSimd core; tile-relative) flattens its index slice with the
// partition dim fastest (NumPy order='F'): idx[k] = index[16c + k % 16, k / 16], k < n_valid.
// Every partition q of the group then gathers from its own partition:
//   dst[16c + q, k * E + e] = src_buffer[16c + q, idx[k] + e],  e < E = num_elem_per_idx,
// i.e. an index is an element offset into the partition's flattened free dims (NKI's numpy
// reference passes index * num_elem_per_idx). Knit: an index with idx + E beyond src_buffer's
// free size is a runtime "out-of-bounds" error (undefined on hardware).
void exec(ExecState& m, const LocalGather& op) {
  Tile src = m.tile(op.src_buffer, "src_buffer");
  Tile index = m.tile(op.index, "index");
  Tile dst = m.tile(op.dst, "dst");
  const int64_t E = op.num_elem_per_idx;
  const int64_t valid = op.num_valid_indices < 0 ? 16 * index.F : op.num_valid_indices;
  std::vector<uint32_t> out(dst.size());
  for (int64_t c = 0; c < src.P / 16; ++c) {
    std::vector<int64_t> idx(valid);
    for (int64_t k = 0; k < valid; ++k) {
      idx[k] = index.read_int(index.at(16 * c + k % 16, k / 16));
      if (idx[k] + E > src.F)
        m.fail("out-of-bounds", "local_gather index " + std::to_string(idx[k]) + " (index[" +
                                    std::to_string(16 * c + k % 16) + ", " + std::to_string(k / 16) + "]) reads " +
                                    std::to_string(E) + " elements past src_buffer's " + std::to_string(src.F) +
                                    " elements per partition");
    }
    for (int64_t q = 16 * c; q < 16 * (c + 1); ++q)
      for (int64_t k = 0; k < valid; ++k)
        for (int64_t e = 0; e < E; ++e) out[dst.at(q, k * E + e)] = src.read_bits(src.at(q, idx[k] + e));
  }
  for (int64_t i = 0; i < dst.size(); ++i) dst.write_bits(i, out[i]);
}

// dst[p, j] = data[p, indices[p, j]] over data's flattened free dims; an index outside
// [0, free size) is a runtime "out-of-bounds" error.
void exec(ExecState& m, const NcNGather& op) {
  Tile data = m.tile(op.data, "data");
  Tile indices = m.tile(op.indices, "indices");
  Tile dst = m.tile(op.dst, "dst");
  std::vector<uint32_t> out(dst.size());
  for (int64_t p = 0; p < dst.P; ++p)
    for (int64_t j = 0; j < dst.F; ++j) {
      const int64_t ix = indices.read_int(indices.at(p, j));
      if (ix < 0 || ix >= data.F)
        m.fail("out-of-bounds", "nc_n_gather index " + std::to_string(ix) + " at indices[" + std::to_string(p) + ", " +
                                    std::to_string(j) + "] is outside data's " + std::to_string(data.F) +
                                    " elements per partition");
      out[dst.at(p, j)] = data.read_bits(data.at(p, ix));
    }
  for (int64_t i = 0; i < dst.size(); ++i) dst.write_bits(i, out[i]);
}

}  // namespace knit::sim
