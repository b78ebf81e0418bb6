// Instruction bodies of the native (JIT) path. This file is not part of knit_sim: the build
// compiles it with Clang to LLVM bitcode, linked with the numerics (ir/numerics.cpp,
// ir/types.cpp) and ALU semantics (simulator/alu.cpp) the reference interpreter uses, and
// embeds the result. At run time the JIT specializes a body on one instruction's shape (a
// constant MapShape / ReduceShape / RowShape / MatmulShape): the switches on dtypes and
// operators fold away, loops get constant extents and strides, and LLVM vectorizes them for the
// host CPU.
//
// Bit-exactness with the reference interpreter comes from sharing its element functions
// (decode, encode, alu, activate, apply: the same source, compiled with -ffp-contract=off, so
// no fused multiply-adds) and from computing in the same order: element-wise instructions
// round each result once at its store; row folds and reductions are left folds in element
// order; bn_stats / bn_aggr call the interpreter's own moment functions; matmul sums k in order
// 0..K-1 per output from +0 (with one fma per term only where every product is exact, which
// gives the same bits). exp is Knit's own exp_of (alu.cpp), which vectorizes; activations
// compute it as exp_guess, the same bits at half the cost where it can tell (map_guessed); the
// other transcendental activations call the same C library functions (tanhf, ...) as the
// interpreter, so they are bit-identical too.
#include <cstring>

#include "../alu.h"
#include "../search.h"
#include "knit/ir/numerics.h"
#include "shapes.h"

using namespace knit::sim::native;
using knit::ir::ActFunc;
using knit::ir::AluOp;
using knit::ir::DType;

namespace {

#define KNIT_INLINE __attribute__((always_inline)) inline

KNIT_INLINE int64_t at(const Access& a, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return i0 * a.step[0] + i1 * a.step[1] + i2 * a.step[2] + i3 * a.step[3];
}

KNIT_INLINE DType type(const Access& a) { return static_cast<DType>(a.dtype); }

// Calls f(i0, i1, i2, i3) over the walk, innermost fastest (the row-major element order).
template <class F>
KNIT_INLINE void for_each(const Walk& w, F&& f) {
  for (int64_t i0 = 0; i0 < w.n[0]; ++i0)
    for (int64_t i1 = 0; i1 < w.n[1]; ++i1)
      for (int64_t i2 = 0; i2 < w.n[2]; ++i2)
        for (int64_t i3 = 0; i3 < w.n[3]; ++i3) f(i0, i1, i2, i3);
}

KNIT_INLINE float load(const Access& a, const uint8_t* base, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return knit::ir::decode(type(a), base + at(a, i0, i1, i2, i3));
}

// Rows [i0, i0 + R) of a map with a row fold: each row's values folded left to right in element
// order. A row's fold is one dependency chain that cannot be reordered without changing its bits,
// so R rows advance side by side (R independent chains, which the CPU overlaps). The values of a
// stretch of the innermost dim are computed into a local chunk per row first, stored to dst from
// there, and folded last: the value loop (an exp, say) writes only the local chunk, so LLVM
// vectorizes it without a run-time overlap check against dst (which, hoisted over R rows a
// partition apart, would always fail and fall back to scalar code).
// Values come from guess(i0, i1, i2, i3, unsure) (see map_guessed); where a chunk's guesses set
// `unsure`, the whole chunk is computed again with exact(i0, i1, i2, i3).
constexpr int64_t kFoldRows = 8;
constexpr int64_t kChunk = 256;  // values per local chunk (fold_rows and map_guessed)
template <int64_t R, class Guess, class Exact, class Put>
KNIT_INLINE void fold_rows(const MapShape& s, AluOp op, int64_t i0, float* folds, Guess&& guess, Exact&& exact,
                           Put&& put) {
  float chunk[R][kChunk];
  float fold[R];
  for (int64_t r = 0; r < R; ++r) fold[r] = s.fold_continues ? folds[i0 + r] : 0.0f;
  bool first = !s.fold_continues;
  for (int64_t i1 = 0; i1 < s.walk.n[1]; ++i1)
    for (int64_t i2 = 0; i2 < s.walk.n[2]; ++i2)
      for (int64_t c = 0; c < s.walk.n[3]; c += kChunk) {
        const int64_t m = s.walk.n[3] - c < kChunk ? s.walk.n[3] - c : kChunk;
        uint32_t unsure = 0;
        for (int64_t r = 0; r < R; ++r)
          for (int64_t j = 0; j < m; ++j) chunk[r][j] = guess(i0 + r, i1, i2, c + j, unsure);
        if (unsure)
          for (int64_t r = 0; r < R; ++r)
            for (int64_t j = 0; j < m; ++j) chunk[r][j] = exact(i0 + r, i1, i2, c + j);
        for (int64_t r = 0; r < R; ++r)
          for (int64_t j = 0; j < m; ++j) put(chunk[r][j], i0 + r, i1, i2, c + j);
        int64_t j = 0;
        if (first) {
          for (int64_t r = 0; r < R; ++r) fold[r] = chunk[r][0];
          j = 1, first = false;
        }
        for (; j < m; ++j)
          for (int64_t r = 0; r < R; ++r) fold[r] = knit::sim::alu(op, fold[r], chunk[r][j]);
      }
  for (int64_t r = 0; r < R; ++r) folds[i0 + r] = fold[r];
}

// Element-wise kinds whose result is one fp32 value per element, stored rounded to dst. With a
// row fold (activation's reduce_res, tensor_scalar_reduce, select_reduce, range_select), each
// row's fp32 values (not the rounded stores) are folded left to right, from the row's first
// value (or, with fold_continues, from the fold an earlier call left in folds[row]): fold_rows.
// exact(i0, i1, i2, i3) is an element's value; guess(i0, i1, i2, i3, unsure) gives the same
// bits faster (activate_guess) or sets `unsure`, and each stretch of values where one did is
// computed again by exact. An exp is then its cheap guess for all but about one stretch in 250.
template <class Guess, class Exact>
KNIT_INLINE void map_guessed(const MapShape& s, uint8_t* const* data, float* folds, Guess&& guess, Exact&& exact) {
  auto put = [&](float y, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    knit::ir::encode(type(s.dst), y, data[0] + at(s.dst, i0, i1, i2, i3));
  };
  if (s.fold_op < 0) {
    // As in fold_rows: a stretch of values goes to a local chunk, then to dst. Computed straight
    // into dst, the value loop needs a run-time check that dst does not overlap the operands,
    // which fails whenever dst is the input itself (an in-place activation; the executor lets
    // only such element-for-element overlap reach a map body) and leaves the loop scalar: an
    // activation's exp then took 7.4 ns an element instead of under 2. Same values, stored in
    // the same order.
    float chunk[kChunk];
    for (int64_t i0 = 0; i0 < s.walk.n[0]; ++i0)
      for (int64_t i1 = 0; i1 < s.walk.n[1]; ++i1)
        for (int64_t i2 = 0; i2 < s.walk.n[2]; ++i2)
          for (int64_t c = 0; c < s.walk.n[3]; c += kChunk) {
            const int64_t m = s.walk.n[3] - c < kChunk ? s.walk.n[3] - c : kChunk;
            uint32_t unsure = 0;
            for (int64_t j = 0; j < m; ++j) chunk[j] = guess(i0, i1, i2, c + j, unsure);
            if (unsure)
              for (int64_t j = 0; j < m; ++j) chunk[j] = exact(i0, i1, i2, c + j);
            for (int64_t j = 0; j < m; ++j) put(chunk[j], i0, i1, i2, c + j);
          }
    return;
  }
  const AluOp op = static_cast<AluOp>(s.fold_op);
  int64_t i0 = 0;
  for (; i0 + kFoldRows <= s.walk.n[0]; i0 += kFoldRows) fold_rows<kFoldRows>(s, op, i0, folds, guess, exact, put);
  for (; i0 < s.walk.n[0]; ++i0) fold_rows<1>(s, op, i0, folds, guess, exact, put);
}

// map_guessed for values with nothing to guess: the guess is the value, never unsure.
template <class F>
KNIT_INLINE void map_values(const MapShape& s, uint8_t* const* data, float* folds, F&& value) {
  map_guessed(
      s, data, folds, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3, uint32_t&) { return value(i0, i1, i2, i3); },
      value);
}

template <class F>
KNIT_INLINE void map_bits(const MapShape& s, uint8_t* const* data, F&& value) {
  for_each(s.walk, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    knit::ir::store_bits(type(s.dst), value(i0, i1, i2, i3), data[0] + at(s.dst, i0, i1, i2, i3));
  });
}

// A same-dtype copy whose innermost dim is contiguous on both sides moves whole rows with
// memcpy: the C library's copy (rep movsb on this class of CPU) streams without reading the
// destination first, which an element loop's stores do; a DMA of a tile runs about twice as fast.
KNIT_INLINE bool contiguous_rows(const MapShape& s) {
  const int64_t size = knit::ir::dtype_size(type(s.dst));
  return s.dst.step[3] == size && s.a.step[3] == size;
}

// stream_note: a DMA into HBM writes bytes the rest of the run seldom reads again (a kernel's
// output), while the kernel's SBUF tiles are read again by the next instructions. With ordinary
// stores the output's lines fill the CPU's last-level cache and push the tiles out; at 2048 x
// 2048 fp32 a kernel's HBM tensors and tiles together are about the cache's size (docs/
// performance.md, bench/cache_cliff.py). Non-temporal stores write the output past the caches.
// Rows of at least 4 KiB only (a short row's lines are better merged in the cache), 16-byte
// aligned ones only (others take memcpy); the sfence orders the streamed stores before the
// threads' hand-back, as ordinary stores are. Only where bytes go, never which bytes.
typedef float v4f __attribute__((vector_size(16)));
constexpr size_t kStreamRowBytes = 4096;
KNIT_INLINE void stream_row(uint8_t* dst, const uint8_t* src, size_t bytes) {
  if ((reinterpret_cast<uintptr_t>(dst) & 15) != 0 || bytes % 16 != 0) {
    std::memcpy(dst, src, bytes);
    return;
  }
  for (size_t i = 0; i < bytes; i += 16) {
    v4f v;
    std::memcpy(&v, src + i, 16);
    __builtin_nontemporal_store(v, reinterpret_cast<v4f*>(dst + i));
  }
}

KNIT_INLINE void copy_rows(const MapShape& s, uint8_t* const* data) {
  const size_t row_bytes = static_cast<size_t>(s.walk.n[3] * knit::ir::dtype_size(type(s.dst)));
  const bool stream = s.stream_dst && row_bytes >= kStreamRowBytes;  // stream_note
  for (int64_t i0 = 0; i0 < s.walk.n[0]; ++i0)
    for (int64_t i1 = 0; i1 < s.walk.n[1]; ++i1)
      for (int64_t i2 = 0; i2 < s.walk.n[2]; ++i2) {
        uint8_t* dst = data[0] + at(s.dst, i0, i1, i2, 0);
        const uint8_t* src = data[1] + at(s.a, i0, i1, i2, 0);
        if (stream) stream_row(dst, src, row_bytes);
        else std::memcpy(dst, src, row_bytes);
      }
#if defined(__x86_64__) || defined(__i386__)
  if (stream) __builtin_ia32_sfence();
#endif
}

// iota / affine_select: the engine's affine index of a walk position (exec_select.cpp).
KNIT_INLINE int64_t affine_value(const MapShape& s, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return s.affine_offset + i0 * s.affine_step[0] + i1 * s.affine_step[1] + i2 * s.affine_step[2] +
         i3 * s.affine_step[3];
}

KNIT_INLINE uint32_t column_bits(const float* column, int64_t p) {
  uint32_t bits;
  std::memcpy(&bits, column + p, 4);
  return bits;
}

}  // namespace

// local_pointers_note: every body first copies the caller's operand pointers into a local array.
// Read through the caller's array, any store to an operand might be a store into that array as
// far as LLVM can tell, so it reloads the pointer for every element and cannot vectorize (a
// same-dtype copy ran as scalar 2-byte moves, about 1 GB/s); a local array cannot alias anything
// the body writes.
extern "C" void knit_map_body(const MapShape* shape, uint8_t* const* operands, float* const* columns) {
  uint8_t* const data[4] = {operands[0], operands[1], operands[2], operands[3]};  // see local_pointers_note
  const MapShape& s = *shape;
  const uint8_t* a = data[1];
  const uint8_t* b = data[2];
  const AluOp op0 = static_cast<AluOp>(s.op0), op1 = static_cast<AluOp>(s.op1);
  const float* c0 = columns[0];
  const float* c1 = columns[1];
  switch (s.kind) {
    case MapKind::copy:
      if (s.dst.dtype == s.a.dtype && contiguous_rows(s)) {
        copy_rows(s, data);
      } else if (s.dst.dtype == s.a.dtype) {
        map_bits(s, data, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
          return knit::ir::load_bits(type(s.a), a + at(s.a, i0, i1, i2, i3));
        });
      } else {
        map_values(s, data, nullptr,
                   [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) { return load(s.a, a, i0, i1, i2, i3); });
      }
      return;
    case MapKind::tensor_tensor:
      map_values(s, data, nullptr, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        return knit::sim::alu(op0, load(s.a, a, i0, i1, i2, i3), load(s.b, b, i0, i1, i2, i3));
      });
      return;
    case MapKind::tensor_tensor_bits:
      map_bits(s, data, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        return knit::sim::alu_bits(op0, knit::ir::load_bits(type(s.a), a + at(s.a, i0, i1, i2, i3)),
                                   knit::ir::load_bits(type(s.b), b + at(s.b, i0, i1, i2, i3)));
      });
      return;
    case MapKind::tensor_tensor_int:
      for_each(s.walk, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        const int64_t x = knit::ir::load_int(type(s.a), a + at(s.a, i0, i1, i2, i3));
        const int64_t y = knit::ir::load_int(type(s.b), b + at(s.b, i0, i1, i2, i3));
        knit::ir::store_int(type(s.dst), knit::sim::int_alu(op0, x, y), data[0] + at(s.dst, i0, i1, i2, i3));
      });
      return;
    case MapKind::tensor_scalar:
      map_values(s, data, nullptr, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        const float x = knit::sim::apply(op0, load(s.a, a, i0, i1, i2, i3), c0[i0], s.reverse0);
        return knit::sim::apply(op1, x, c1[i0], s.reverse1);
      });
      return;
    case MapKind::tensor_scalar_bits:
      map_bits(s, data, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        const uint32_t x = knit::sim::apply_bits(op0, knit::ir::load_bits(type(s.a), a + at(s.a, i0, i1, i2, i3)),
                                                 column_bits(c0, i0), s.reverse0);
        return knit::sim::apply_bits(op1, x, column_bits(c1, i0), s.reverse1);
      });
      return;
    case MapKind::scalar_tensor_tensor:
      map_values(s, data, nullptr, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        const float x = knit::sim::apply(op0, load(s.a, a, i0, i1, i2, i3), c0[i0], s.reverse0);
        return knit::sim::apply(op1, x, load(s.b, b, i0, i1, i2, i3), s.reverse1);
      });
      return;
    case MapKind::activation:
    case MapKind::activation_slope: {
      const ActFunc f = static_cast<ActFunc>(s.op0);
      auto input = [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        const float t = load(s.a, a, i0, i1, i2, i3) * c0[i0];
        return s.has_bias ? t + c1[i0] : t;
      };
      auto alpha = [&](int64_t i0) {
        return s.kind == MapKind::activation_slope ? load(s.b, b, i0, 0, 0, 0) : s.alpha;
      };
      map_guessed(
          s, data, columns[2],
          [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3, uint32_t& unsure) {
            return knit::sim::activate_guess(f, input(i0, i1, i2, i3), alpha(i0), unsure);
          },
          [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
            return knit::sim::activate(f, input(i0, i1, i2, i3), alpha(i0));
          });
      return;
    }
    case MapKind::tensor_scalar_fold:
      map_values(s, data, columns[2], [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        return knit::sim::apply(op0, load(s.a, a, i0, i1, i2, i3), c0[i0], s.reverse0);
      });
      return;
    case MapKind::fill: map_bits(s, data, [&](int64_t, int64_t, int64_t, int64_t) { return s.fill_bits; }); return;
    case MapKind::gather:
      map_bits(s, data, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        const int64_t index = knit::ir::load_int(type(s.a), a + at(s.a, i0, i1, i2, i3));
        return knit::ir::load_bits(type(s.b), b + i0 * s.b.step[0] + index * s.gather_step);
      });
      return;
    case MapKind::iota:
      for_each(s.walk, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        knit::ir::store_int(type(s.dst), affine_value(s, i0, i1, i2, i3), data[0] + at(s.dst, i0, i1, i2, i3));
      });
      return;
    case MapKind::copy_predicated:
    case MapKind::fill_predicated:
      // As exec_data.cpp: only the selected elements are written (the executor runs this only on
      // a dst whose other elements are initialized and not matmul-written, so the bulk flag update
      // afterwards is exact); the source's bits move when the dtypes match, else through fp32.
      for_each(s.walk, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        if ((load(s.a, a, i0, i1, i2, i3) != 0.0f) == static_cast<bool>(s.reverse0)) return;
        uint8_t* out = data[0] + at(s.dst, i0, i1, i2, i3);
        if (s.kind == MapKind::fill_predicated) knit::ir::encode(type(s.dst), s.imm, out);
        else if (s.dst.dtype == s.b.dtype)
          knit::ir::store_bits(type(s.dst), knit::ir::load_bits(type(s.b), b + at(s.b, i0, i1, i2, i3)), out);
        else knit::ir::encode(type(s.dst), load(s.b, b, i0, i1, i2, i3), out);
      });
      return;
    case MapKind::select_reduce:
      map_values(s, data, columns[2], [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        const bool take = (load(s.a, a, i0, i1, i2, i3) != 0.0f) != static_cast<bool>(s.reverse0);
        const float x = load(s.b, b, i0, i1, i2, i3);  // read everywhere: all of it is initialized
        return take ? x : c0[i0];
      });
      return;
    case MapKind::range_select:
      map_values(s, data, columns[2], [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        const float idx = s.alpha + static_cast<float>(affine_value(s, i0, i1, i2, i3));
        const bool keep = knit::sim::alu(op0, idx, c0[i0]) != 0.0f && knit::sim::alu(op1, idx, c1[i0]) != 0.0f;
        const float x = load(s.a, a, i0, i1, i2, i3);
        return keep ? x : s.imm;
      });
      return;
    case MapKind::scan: {
      // The walk is row-major within each partition (i0), as the reference's loop over j: the
      // carry stays fp32 and is rounded only where it is stored. Each row's last carry is left in
      // columns[2]; a call with fold_continues (one after the first over walk dims beyond these
      // four) starts each row from there instead of from `initial`.
      float* carries = columns[2];
      float carry = 0.0f;
      map_values(s, data, nullptr, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        if ((i1 | i2 | i3) == 0) carry = s.fold_continues ? carries[i0] : c0[i0];
        const float x = knit::sim::apply(op0, load(s.a, a, i0, i1, i2, i3), carry, s.reverse0);
        carry = knit::sim::apply(op1, x, load(s.b, b, i0, i1, i2, i3), s.reverse1);
        carries[i0] = carry;
        return carry;
      });
      return;
    }
    case MapKind::cumulative: {
      // exec_compute.cpp's tensor_scalar_cumulative: the register stays fp32, rounded only where it is
      // stored; it starts at column 1 (or, continuing, at the row's last carry) and ends in columns[2].
      float* carries = columns[2];
      float carry = 0.0f;
      map_values(s, data, nullptr, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        if ((i1 | i2 | i3) == 0) carry = s.fold_continues ? carries[i0] : c1[i0];
        carry = knit::sim::apply(op1, knit::sim::apply(op0, load(s.a, a, i0, i1, i2, i3), c0[i0], false), carry, false);
        carries[i0] = carry;
        return carry;
      });
      return;
    }
    case MapKind::affine_select: {
      // As exec_select.cpp: the selected elements keep their bits when the dtypes match (else go
      // through fp32), the others get on_false rounded to dst. on_true is read everywhere (the
      // executor only comes here when all of it is initialized), which lets the loop vectorize.
      auto take = [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        return knit::sim::alu(op0, static_cast<float>(affine_value(s, i0, i1, i2, i3)), 0.0f) != 0.0f;
      };
      if (s.dst.dtype == s.a.dtype) {
        uint8_t off[4] = {};
        knit::ir::encode(type(s.dst), s.imm, off);
        const uint32_t off_bits = knit::ir::load_bits(type(s.dst), off);
        map_bits(s, data, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
          const uint32_t x = knit::ir::load_bits(type(s.a), a + at(s.a, i0, i1, i2, i3));
          return take(i0, i1, i2, i3) ? x : off_bits;
        });
      } else {
        map_values(s, data, nullptr, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
          const float x = load(s.a, a, i0, i1, i2, i3);
          return take(i0, i1, i2, i3) ? x : s.imm;
        });
      }
      return;
    }
  }
}

namespace {

// The group's elements folded left to right (the reference's order).
// The group's elements folded left to right by `fold` (the reference's order: its runs in order,
// each run's elements in order), from its first element; `load` decodes one element.
template <class T, class Load, class Fold>
KNIT_INLINE T left_fold(const ReduceShape& s, const uint8_t* group, Load&& load, Fold&& fold) {
  T r = load(group);
  for (int64_t u = 0; u < s.runs; ++u)
    for (int64_t g = u == 0 ? 1 : 0; g < s.group; ++g) r = fold(r, load(group + u * s.run_step + g * s.group_step));
  return r;
}

// maximum / minimum folds as an integer max / min of order keys, which vectorizes: order_key
// orders the non-NaN fp32 values as max_of / min_of (alu.cpp) do (-0 below +0; equal nonzero
// values have equal bits), so the fold of the keys, in any order, is the key of the left fold's
// result. NaN is ignored there unless every value is NaN, when the left fold keeps the first
// element: here NaN takes the key no number has (below every number for maximum, above for
// minimum), and a fold that ends on it returns the first element.
KNIT_INLINE int32_t order_key(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return static_cast<int32_t>(bits ^ (static_cast<uint32_t>(static_cast<int32_t>(bits) >> 31) >> 1));
}

KNIT_INLINE float from_order_key(int32_t key) {
  const uint32_t bits = static_cast<uint32_t>(key) ^ (static_cast<uint32_t>(key >> 31) >> 1);
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

KNIT_INLINE float key_fold(const ReduceShape& s, AluOp op, const uint8_t* group) {
  const bool is_max = op == AluOp::maximum;
  const int32_t nan_key = is_max ? INT32_MIN : INT32_MAX;  // the bits of a NaN either way
  int32_t r = nan_key;
  for (int64_t u = 0; u < s.runs; ++u)
    for (int64_t g = 0; g < s.group; ++g) {
      const float x = knit::ir::decode(type(s.data), group + u * s.run_step + g * s.group_step);
      const int32_t k = x != x ? nan_key : order_key(x);
      r = is_max ? (k > r ? k : r) : (k < r ? k : r);
    }
  return r == nan_key ? knit::ir::decode(type(s.data), group) : from_order_key(r);
}

}  // namespace

extern "C" void knit_reduce_body(const ReduceShape* shape, uint8_t* const* operands, float* const*) {
  uint8_t* const data[4] = {operands[0], operands[1], operands[2], operands[3]};  // see local_pointers_note
  const ReduceShape& s = *shape;
  const uint8_t* x = data[1];
  const AluOp op = static_cast<AluOp>(s.op);
  for_each(s.walk, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const uint8_t* group = x + at(s.data, i0, i1, i2, i3);
    uint8_t* out = data[0] + at(s.dst, i0, i1, i2, i3);
    if (s.bits) {
      const uint32_t r = left_fold<uint32_t>(
          s, group, [&](const uint8_t* p) { return knit::ir::load_bits(type(s.data), p); },
          [&](uint32_t a, uint32_t b) { return knit::sim::alu_bits(op, a, b); });
      knit::ir::store_bits(type(s.dst), r, out);
      return;
    }
    float r = op == AluOp::maximum || op == AluOp::minimum
                  ? key_fold(s, op, group)
                  : left_fold<float>(
                        s, group, [&](const uint8_t* p) { return knit::ir::decode(type(s.data), p); },
                        [&](float a, float b) { return knit::sim::alu(op, a, b); });
    if (s.negate) r = r * -1.0f;
    if (s.average) r /= static_cast<float>(s.runs * s.group);
    knit::ir::encode(type(s.dst), r, out);
  });
}

// ---- per-partition row statistics -------------------------------------------------------------

namespace {

// Calls f(i1, i2, i3) over a walk's free dims (1..3), innermost fastest.
template <class F>
KNIT_INLINE void for_each_free(const Walk& w, F&& f) {
  for (int64_t i1 = 0; i1 < w.n[1]; ++i1)
    for (int64_t i2 = 0; i2 < w.n[2]; ++i2)
      for (int64_t i3 = 0; i3 < w.n[3]; ++i3) f(i1, i2, i3);
}

}  // namespace

// The search kinds (search.h, shared with exec_search.cpp); false for the others. Each decodes a
// row to fp32 into scratch (after the integer results, which come first to keep them aligned).
KNIT_INLINE bool search_rows(const RowShape& s, uint8_t* const* data) {
  switch (s.kind) {
    case RowKind::match_index8:
    case RowKind::match_replace8: {
      float* row = reinterpret_cast<float*>(data[3]);
      uint32_t* bits = reinterpret_cast<uint32_t*>(row + s.data_walk.n[1] * s.data_walk.n[2] * s.data_walk.n[3]);
      const bool same = s.dst.dtype == s.data.dtype;
      for (int64_t p = 0; p < s.data_walk.n[0]; ++p) {
        int64_t F = 0;
        for_each_free(s.data_walk, [&](int64_t i1, int64_t i2, int64_t i3) {
          const uint8_t* from = data[1] + at(s.data, p, i1, i2, i3);
          bits[F] = knit::ir::load_bits(type(s.data), from);
          row[F++] = knit::ir::decode(type(s.data), from);
        });
        float vals[8];
        int64_t idx[8];
        for (int64_t k = 0; k < 8; ++k) vals[k] = knit::ir::decode(type(s.vals), data[2] + at(s.vals, p, 0, 0, k));
        knit::sim::match_replace8(row, F, vals, idx);
        int64_t j = 0;
        if (s.kind == RowKind::match_index8) {
          const uint32_t all_ones = knit::sim::find_index8_missing(type(s.dst));
          for_each_free(s.dst_walk, [&](int64_t i1, int64_t i2, int64_t i3) {
            uint8_t* to = data[0] + at(s.dst, p, i1, i2, i3);
            if (idx[j] < 0) knit::ir::store_bits(type(s.dst), all_ones, to);
            else knit::ir::store_int(type(s.dst), idx[j], to);
            ++j;
          });
          continue;
        }
        for_each_free(s.dst_walk, [&](int64_t i1, int64_t i2, int64_t i3) {
          uint8_t* to = data[0] + at(s.dst, p, i1, i2, i3);
          bool claimed = false;
          for (int k = 0; k < 8; ++k) claimed = claimed || idx[k] == j;
          if (claimed) knit::ir::encode(type(s.dst), s.imm, to);
          else if (same) knit::ir::store_bits(type(s.dst), bits[j], to);
          else knit::ir::encode(type(s.dst), row[j], to);
          ++j;
        });
      }
      return true;
    }
    case RowKind::nonzero_with_count: {
      const int64_t T = s.data_walk.n[1] * s.data_walk.n[2] * s.data_walk.n[3];
      int64_t* out = reinterpret_cast<int64_t*>(data[3]);
      float* row = reinterpret_cast<float*>(out + T + 1);
      for (int64_t p = 0; p < s.data_walk.n[0]; ++p) {
        if ((s.first_row + p) % 16 != 0) continue;
        int64_t F = 0;
        for_each_free(s.data_walk, [&](int64_t i1, int64_t i2, int64_t i3) {
          row[F++] = knit::ir::decode(type(s.data), data[1] + at(s.data, p, i1, i2, i3));
        });
        knit::sim::nonzero_with_count(row, T, s.imm_a, s.imm_b, out);
        int64_t j = 0;
        for_each_free(s.dst_walk, [&](int64_t i1, int64_t i2, int64_t i3) {
          knit::ir::store_int(type(s.dst), out[j++], data[0] + at(s.dst, p, i1, i2, i3));
        });
      }
      return true;
    }
    case RowKind::sequence_bounds: {
      const int64_t n = s.data_walk.n[1] * s.data_walk.n[2] * s.data_walk.n[3];
      int64_t* starts = reinterpret_cast<int64_t*>(data[3]);
      int64_t* ends = starts + n;
      float* ids = reinterpret_cast<float*>(ends + n);
      int64_t F = 0;
      for_each_free(s.data_walk, [&](int64_t i1, int64_t i2, int64_t i3) {
        ids[F++] = knit::ir::decode(type(s.data), data[1] + at(s.data, 0, i1, i2, i3));
      });
      knit::sim::sequence_bounds(ids, n, starts, ends);
      int64_t j = 0;
      for_each_free(s.dst_walk, [&](int64_t i1, int64_t i2, int64_t i3) {
        knit::ir::store_int(type(s.dst), j < n ? starts[j] : ends[j - n], data[0] + at(s.dst, 0, i1, i2, i3));
        ++j;
      });
      return true;
    }
    case RowKind::topk: {
      const int64_t n = s.imm_a, K = s.dst_walk.n[3];
      float* snake = reinterpret_cast<float*>(data[3]);
      uint32_t* order = reinterpret_cast<uint32_t*>(snake + s.data_walk.n[2] * 16);
      float* top = reinterpret_cast<float*>(order + n);
      uint32_t* top_idx = reinterpret_cast<uint32_t*>(top + K);
      for (int64_t g = 0; g < s.data_walk.n[0]; ++g) {
        int64_t F = 0;
        for_each_free(s.data_walk, [&](int64_t i1, int64_t i2, int64_t i3) {
          snake[F++] = knit::ir::decode(type(s.vals), data[2] + at(s.vals, g, i1, i2, i3));
        });
        knit::sim::topk(snake, n, K, order, top, top_idx);
        for_each_free(s.dst_walk, [&](int64_t i1, int64_t i2, int64_t i3) {
          knit::ir::encode(type(s.dst), top[i3], data[0] + at(s.dst, g, i1, i2, i3));
          knit::ir::store_int(type(s.data), top_idx[i3], data[1] + at(s.data, g, i1, i2, i3));
        });
      }
      return true;
    }
    default: return false;
  }
}

// bn_stats of partitions [p, p + R): their rows decoded into scratch (R rows of F), the moments
// of each parity summed for the R rows side by side (group_moments_rows, the reference's bits).
template <int64_t R>
KNIT_INLINE void bn_stats_block(const RowShape& s, uint8_t* const* data, float* scratch, int64_t p, int64_t F) {
  const float* rows[R];
  for (int64_t r = 0; r < R; ++r) {
    float* row = scratch + r * F;
    rows[r] = row;
    int64_t f = 0;
    for_each_free(s.data_walk, [&](int64_t i1, int64_t i2, int64_t i3) {
      row[f++] = knit::ir::decode(type(s.data), data[1] + at(s.data, p + r, i1, i2, i3));
    });
  }
  knit::sim::Moments g[2][R];
  for (int parity = 0; parity < 2; ++parity) knit::sim::group_moments_rows<R>(rows, F, parity, g[parity]);
  for (int64_t r = 0; r < R; ++r) {
    const float out[6] = {g[0][r].count, g[0][r].mean, g[0][r].m2, g[1][r].count, g[1][r].mean, g[1][r].m2};
    int64_t k = 0;
    for_each_free(s.dst_walk, [&](int64_t i1, int64_t i2, int64_t i3) {
      knit::ir::encode(type(s.dst), out[k++], data[0] + at(s.dst, p + r, i1, i2, i3));
    });
  }
}

KNIT_INLINE void bn_stats_rows(const RowShape& s, uint8_t* const* data, float* scratch) {
  const int64_t F = s.data_walk.n[1] * s.data_walk.n[2] * s.data_walk.n[3];
  int64_t p = 0;
  for (; p + kMomentRows <= s.data_walk.n[0]; p += kMomentRows) bn_stats_block<kMomentRows>(s, data, scratch, p, F);
  for (; p < s.data_walk.n[0]; ++p) bn_stats_block<1>(s, data, scratch, p, F);
}

// bn_stats / bn_aggr / max8: the reference decodes each partition's row to fp32 and calls the
// same group_moments / combine_moments / top8 (alu.cpp), so the results are the same bits by
// construction.
extern "C" void knit_row_body(const RowShape* shape, uint8_t* const* operands, float* const*) {
  uint8_t* const data[4] = {operands[0], operands[1], operands[2], operands[3]};  // see local_pointers_note
  const RowShape& s = *shape;
  if (search_rows(s, data)) return;
  float* row = reinterpret_cast<float*>(data[3]);
  if (s.kind == RowKind::bn_stats) return bn_stats_rows(s, data, row);
  for (int64_t p = 0; p < s.data_walk.n[0]; ++p) {
    int64_t F = 0;
    for_each_free(s.data_walk, [&](int64_t i1, int64_t i2, int64_t i3) {
      row[F++] = knit::ir::decode(type(s.data), data[1] + at(s.data, p, i1, i2, i3));
    });
    if (s.kind == RowKind::find_index8) {
      float vals[8];
      int64_t found[8];
      for (int64_t k = 0; k < 8; ++k) vals[k] = knit::ir::decode(type(s.vals), data[2] + at(s.vals, p, 0, 0, k));
      knit::sim::find_index8(row, F, vals, found);
      const uint32_t all_ones = knit::sim::find_index8_missing(type(s.dst));
      int64_t k = 0;
      for_each_free(s.dst_walk, [&](int64_t i1, int64_t i2, int64_t i3) {
        uint8_t* to = data[0] + at(s.dst, p, i1, i2, i3);
        if (found[k] < 0) knit::ir::store_bits(type(s.dst), all_ones, to);
        else knit::ir::store_int(type(s.dst), found[k], to);
        ++k;
      });
      continue;
    }
    float out[8] = {};
    if (s.kind == RowKind::max8) {
      knit::sim::top8(row, F, out);
    } else {
      const auto [mean, var] = knit::sim::combine_moments(row, F / 3);
      out[0] = mean;
      out[1] = var;
    }
    int64_t k = 0;
    for_each_free(s.dst_walk, [&](int64_t i1, int64_t i2, int64_t i3) {
      knit::ir::encode(type(s.dst), out[k++], data[0] + at(s.dst, p, i1, i2, i3));
    });
  }
}

// ---- matmul -------------------------------------------------------------------------------------

namespace {

typedef float v8f __attribute__((ext_vector_type(8)));

KNIT_INLINE v8f load8(const float* p) {
  v8f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
KNIT_INLINE void store8(float* p, v8f v) { std::memcpy(p, &v, sizeof v); }

// Register block sizes: kMB rows x kNB columns of outputs live in 2 * kMB vector registers.
constexpr int kMB = 6, kNB = 16;

// True when the product of any two values x, y that both pass is exact in fp32, so that
// fma(x, y, acc) rounds exactly like acc + x * y with the product rounded first: at most 12
// significant bits each (the low 12 bits of the fp32 significand are zero: every bf16, fp16 and
// fp8 value), and zero or of magnitude in [2^-63, 2^64), which keeps the product (at most 24 bits)
// a normal fp32 number. Inf, NaN and subnormals fail.
KNIT_INLINE uint32_t product_exact_operand(float x) {  // 0 or 1; branch-free, so loops vectorize
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const uint32_t magnitude = bits & 0x7fffffffu, exponent = magnitude >> 23;
  return uint32_t(magnitude == 0) | (uint32_t((bits & 0xfffu) == 0) & uint32_t(exponent - (127 - 63) < 127));
}

typedef uint16_t v8u16 __attribute__((ext_vector_type(8)));
typedef uint32_t v8u32 __attribute__((ext_vector_type(8)));

// Decodes `count` elements of a, a.step[1] bytes apart from `row`, into out: decode()'s values,
// element for element. Rows of contiguous bf16 (8 at a time) and fp32 (a copy) are spelled out
// because LLVM's vectorizers do not find them.
KNIT_INLINE void decode_row(const Access& a, const uint8_t* row, int64_t count, float* out) {
  int64_t w = 0;
  if (type(a) == DType::float32 && a.step[1] == 4) {
    std::memcpy(out, row, static_cast<size_t>(count) * 4);
    return;
  }
  if (type(a) == DType::bfloat16 && a.step[1] == 2)
    for (; w + 8 <= count; w += 8) {
      v8u16 half;
      std::memcpy(&half, row + 2 * w, sizeof half);
      const v8u32 bits = __builtin_convertvector(half, v8u32) << 16;
      std::memcpy(out + w, &bits, sizeof bits);
    }
  for (; w < count; ++w) out[w] = knit::ir::decode(type(a), row + w * a.step[1]);
}

// Decodes operand a ([K, count] by its steps) into panels of W columns, panels[b][k][w] = a[k][b * W +
// w], the last panel padded with zeros, one k row at a time through `row` (count floats); returns
// whether every value is product_exact_operand.
template <int W>
KNIT_INLINE bool pack(const Access& a, const uint8_t* base, int64_t K, int64_t k_rows, int64_t count, float* row,
                      float* panels) {
  const int64_t n_panels = (count + W - 1) / W;
  uint32_t exact = 1;
  for (int64_t k = 0; k < K; ++k) {
    decode_row(a, base + k / k_rows * a.step[0] + k % k_rows * a.step[2], count, row);
    // A count of failures, not a running &=: LLVM vectorizes this sum, while the &= became a
    // scalar chain of selects (about 3 cycles an element, a third of a bf16 matmul's time).
    uint32_t failures = 0;
    for (int64_t w = 0; w < count; ++w) failures += 1u - product_exact_operand(row[w]);
    exact &= uint32_t(failures == 0);
    for (int64_t b = 0; b < n_panels; ++b) {
      float* dst = panels + (b * K + k) * W;
      if ((b + 1) * W <= count) {
        std::memcpy(dst, row + b * W, W * sizeof(float));
      } else {
        for (int64_t w = 0; w < W; ++w) dst[w] = b * W + w < count ? row[b * W + w] : 0.0f;
      }
    }
  }
  return exact != 0;
}

// out[m0 + i][n0 + j] = sum_k s[k][m0 + i] * v[k][n0 + j] for one kMB x kNB block, k in order,
// from packed panels: sp[k][i] (kMB floats per k) and vp[k][j] (kNB floats per k), so both
// stream contiguously. `skip` leaves out products whose moving element is zero (is_transpose).
// Rows and columns past M / N (panel padding) are computed and dropped. With `fused` every
// product is known exact (product_exact_operand), and the multiply-add is one fma with the same
// result and half the instructions.
template <bool fused>
KNIT_INLINE void block(const float* sp, const float* vp, float* out, int64_t K, int64_t M, int64_t N, int64_t m0,
                       int64_t n0, bool skip) {
  // The accumulators must live in registers: the loops over the block's rows are unrolled on
  // request (the JIT's pipeline does not unroll on its own, specializer.cpp).
  v8f acc[kMB][2];
#pragma clang loop unroll(full)
  for (int i = 0; i < kMB; ++i) acc[i][0] = acc[i][1] = 0.0f;
#pragma clang loop unroll_count(2)
  for (int64_t k = 0; k < K; ++k) {
    const v8f b0 = load8(vp + k * kNB), b1 = load8(vp + k * kNB + 8);
#pragma clang loop unroll(full)
    for (int i = 0; i < kMB; ++i) {
      const v8f a = sp[k * kMB + i];
      v8f s0, s1;
      if constexpr (fused) {
        s0 = __builtin_elementwise_fma(a, b0, acc[i][0]);
        s1 = __builtin_elementwise_fma(a, b1, acc[i][1]);
      } else {
        s0 = acc[i][0] + a * b0;
        s1 = acc[i][1] + a * b1;
      }
      acc[i][0] = skip ? (b0 != 0.0f ? s0 : acc[i][0]) : s0;
      acc[i][1] = skip ? (b1 != 0.0f ? s1 : acc[i][1]) : s1;
    }
  }
#pragma clang loop unroll(full)
  for (int i = 0; i < kMB; ++i) {
    if (m0 + i >= M) break;
    float* row = out + (m0 + i) * N + n0;
    if (n0 + kNB <= N) {
      store8(row, acc[i][0]);
      store8(row + 8, acc[i][1]);
    } else {
      float tmp[kNB];
      store8(tmp, acc[i][0]);
      store8(tmp + 8, acc[i][1]);
      for (int64_t j = 0; j < N - n0; ++j) row[j] = tmp[j];
    }
  }
}

}  // namespace

extern "C" void knit_matmul_body(const MatmulShape* shape, uint8_t* const* operands, float* const* columns) {
  uint8_t* const data[4] = {operands[0], operands[1], operands[2], operands[3]};  // see local_pointers_note
  const MatmulShape& s = *shape;
  const bool accumulate = columns[0][0] != 0.0f;  // shapes.h
  const int64_t K = s.K, M = s.M, N = s.N;
  const int64_t m_blocks = (M + kMB - 1) / kMB, n_blocks = (N + kNB - 1) / kNB;
  float* sp = reinterpret_cast<float*>(data[3]);  // [m_blocks][K][kMB]
  float* vp = sp + m_blocks * K * kMB;            // [n_blocks][K][kNB]
  float* out = vp + n_blocks * K * kNB;           // [M][N]
  float* row = out + M * N;                       // [max(M, N)]
  // Decode the operands into packed panels, padding with zeros, and note whether every product
  // will be exact.
  const bool exact = pack<kMB>(s.stationary, data[1], K, s.k_rows, M, row, sp) &
                     pack<kNB>(s.moving, data[2], K, s.k_rows, N, row, vp);
  // A moving panel (K x 16 floats) stays in L1 while the stationary panels stream past it.
  const bool skip = s.skip_zero_moving;
  for (int64_t nb = 0; nb < n_blocks; ++nb)
    for (int64_t mb = 0; mb < m_blocks; ++mb)
      if (exact) block<true>(sp + mb * K * kMB, vp + nb * K * kNB, out, K, M, N, mb * kMB, nb * kNB, skip);
      else block<false>(sp + mb * K * kMB, vp + nb * K * kNB, out, K, M, N, mb * kMB, nb * kNB, skip);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      uint8_t* p = data[0] + m * s.dst.step[0] + n * s.dst.step[1];
      const float r = accumulate ? knit::ir::decode(type(s.dst), p) + out[m * N + n] : out[m * N + n];
      knit::ir::encode(type(s.dst), r, p);
    }
}

// ---- quantize_mx ----------------------------------------------------------------------------------

extern "C" void knit_quantize_mx_body(const QuantizeMxShape* shape, uint8_t* const* operands, float* const*) {
  uint8_t* const data[3] = {operands[0], operands[1], operands[2]};  // see local_pointers_note
  const QuantizeMxShape& s = *shape;
  constexpr int kG = knit::sim::kMxGroupPartitions;
  for (int64_t g = 0; g < s.groups; ++g)
    for (int64_t w = 0; w < s.words; ++w) {
      float x[kG][4];
      for (int i = 0; i < kG; ++i)
        for (int j = 0; j < 4; ++j)
          x[i][j] = knit::ir::decode(type(s.src), data[2] + (g * kG + i) * s.src.step[0] + (4 * w + j) * s.src.step[1]);
      uint32_t words[kG];
      const uint32_t scale = knit::sim::quantize_mx_group(type(s.dst), x, words);
      knit::ir::store_bits(type(s.scale), scale, data[1] + g * s.scale.step[0] + w * s.scale.step[1]);
      for (int i = 0; i < kG; ++i)
        knit::ir::store_bits(type(s.dst), words[i], data[0] + (g * kG + i) * s.dst.step[0] + w * s.dst.step[1]);
    }
}
