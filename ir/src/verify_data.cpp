// Verifier rules: data movement and the Tensor Engine (nki.isa.nc_matmul, nc_transpose, tensor_copy, dma_copy).
#include <cmath>

#include "knit/ir/numerics.h"
#include "verify_rules.h"

namespace knit::ir {

void check(Checker& c, const DmaCopy& op) {
  c.buffer_in(op.src, "src", {Buffer::hbm, Buffer::shared_hbm, Buffer::sbuf});  // PSUM source rejected (0.3+)
  if (c.in_psum(op.dst)) c.fail("buffer", "dst must be in HBM or SBUF; copy PSUM results out with tensor_copy");
  if (op.dst.num_elements() != op.src.num_elements())
    c.fail("dma-size", "dst has " + std::to_string(op.dst.num_elements()) + " elements but src has " +
                           std::to_string(op.src.num_elements()) + "; dma_copy needs equal element counts");
  if (op.dge_mode == DgeMode::hwdge && op.dst.dtype != op.src.dtype)
    c.fail("dtype", "hwdge DMA cannot convert dtypes (" + std::string(to_string(op.src.dtype)) + " -> " +
                        std::string(to_string(op.dst.dtype)) + "); use dge_mode swdge or matching dtypes");
  if (op.engine != Engine::unknown && op.engine != Engine::sync && op.engine != Engine::scalar &&
      op.engine != Engine::dma)
    c.fail("engine",
           "dma_copy can be issued from the sync, scalar or dma queue, not " + std::string(to_string(op.engine)));
}

void check(Checker& c, const DmaTranspose& op) {
  c.buffer_in(op.dst, "dst", {Buffer::sbuf});
  c.buffer_in(op.src, "src", {Buffer::hbm, Buffer::shared_hbm, Buffer::sbuf});
  // NKI restricts the dtype on the hardware DGE and for indirect sources; the default DMA path
  // transposes any dtype.
  const bool two_byte_only = op.dge_mode == DgeMode::hwdge || op.src.index_view() != nullptr;
  if (two_byte_only && dtype_size(op.src.dtype) != 2)
    c.fail("dtype",
           "dma_transpose with dge_mode=hwdge or an indirect src moves 2-byte dtypes only (bfloat16, "
           "float16, int16, uint16); use the default DMA path for other dtypes");
  c.same_dtype(op.dst, "dst", op.src, "src");
  const size_t rank = op.src.dims.size();
  const IntList axes = op.resolved_axes();
  const bool ok = (rank == 2 && axes == IntList{1, 0}) || (rank == 3 && axes == IntList{2, 1, 0}) ||
                  (rank == 4 && axes == IntList{3, 1, 2, 0});
  if (!ok)
    c.fail("dma-transpose", "supported permutations are (1,0) for 2-D, (2,1,0) for 3-D and (3,1,2,0) for 4-D src");
  std::vector<int64_t> want;
  for (int64_t a : axes) want.push_back(op.src.dims[a].num);
  if (op.dst.shape() != want) c.fail("dma-transpose", "dst shape must equal the permuted src shape");
}

MatmulTile check_matmul_tiling(Checker& c, const IntList& position, const IntList& size) {
  if (size.empty() && position.empty()) return {};
  if (size.size() != 2 || position.size() != 2)
    c.fail("matmul-tiling", "tile_position and tile_size must both be given as (row, col) pairs");
  for (int64_t s : size) {
    if (s != 32 && s != 64 && s != 128) c.fail("matmul-tiling", "tile sizes must be 32, 64 or 128");
    if (s == 32) c.requires_gen(3);
  }
  for (int i = 0; i < 2; ++i)
    if (position[i] % size[i] != 0 || position[i] + size[i] > 128)
      c.fail("matmul-tiling", "tile_position must be a multiple of tile_size inside the 128x128 array");
  return {size[0], size[1]};
}

void check_matmul_dst(Checker& c, const View& dst, int64_t M, int64_t N) {
  c.buffer_in(dst, "dst", {Buffer::psum});
  // v4 PSUM holds 4096 fp32 or 8192 bf16 results per partition across its banks.
  const int64_t max_n = target_info(c.target()).matmul_max_n * (dst.dtype == DType::bfloat16 ? 2 : 1);
  if (N > max_n)
    c.fail("matmul-shape", "moving free size N=" + std::to_string(N) + " exceeds " + std::to_string(max_n) + " on " +
                               std::string(to_string(c.target())) +
                               (nc_version(c.target()) < 4 ? " (one PSUM bank of fp32)" : " for this dst dtype") +
                               std::string("; tile N in chunks of ") + std::to_string(max_n));
  if (c.partitions(dst) != M || c.free_size(dst) != N)
    c.fail("matmul-shape", "dst must be [M, N] = [" + std::to_string(M) + ", " + std::to_string(N) + "], got " +
                               std::to_string(c.partitions(dst)) + " partitions x " + std::to_string(c.free_size(dst)) +
                               " elements");
  if (nc_version(c.target()) >= 4) c.dtype_in(dst, "dst", {DType::float32, DType::bfloat16});
  else c.dtype_in(dst, "dst", {DType::float32});
  // One matmul output must stay inside one 2 KiB PSUM bank per partition on v2/v3.
  if (nc_version(c.target()) < 4) {
    const int64_t bank = target_info(c.target()).psum_bank_bytes;
    const TensorDecl& t = c.tensor(dst);
    const int64_t first = (dst.offset % c.partition_size(dst)) * dtype_size(dst.dtype);
    int64_t span = 0;
    for (size_t k = 1; k < dst.dims.size(); ++k) span += dst.dims[k].step * (dst.dims[k].num - 1);
    const int64_t last = first + span * dtype_size(dst.dtype);
    const int64_t base = t.address ? (*t.address)[1] : 0;
    if ((base + first) / bank != (base + last) / bank)
      c.fail("psum-bank", "the matmul output spans bytes " + std::to_string(first) + ".." + std::to_string(last) +
                              " of each partition and crosses a 2 KiB PSUM bank; keep each output within 512 fp32");
  }
}

void check(Checker& c, const NcMatmul& op) {
  c.buffer_in(op.stationary, "stationary", {Buffer::sbuf});
  c.buffer_in(op.moving, "moving", {Buffer::sbuf});
  c.buffer_in(op.dst, "dst", {Buffer::psum});
  const bool double_row = op.perf_mode == MatmulPerfMode::double_row;
  // double_row: operands [P, 2, M] / [P, 2, N]; the contraction runs over both rows (K = 2P).
  const int64_t rows = double_row ? 2 : 1;
  const int64_t K = c.partitions(op.stationary), M = c.free_size(op.stationary) / rows;
  const int64_t Km = c.partitions(op.moving), N = c.free_size(op.moving) / rows;
  if (K != Km)
    c.fail("matmul-shape", "contraction (partition) sizes differ: stationary has K=" + std::to_string(K) +
                               ", moving has K=" + std::to_string(Km));
  if (double_row) {
    c.requires_gen(3);
    if (!is_fp8(op.stationary.dtype) || !is_fp8(op.moving.dtype))
      c.fail("dtype", "perf_mode=double_row needs fp8 inputs");
    for (const View* v : {&op.stationary, &op.moving})
      if (v->dims.size() != 3 || v->dims[1].num != 2)
        c.fail("matmul-shape",
               "perf_mode=double_row takes [P, 2, free] operands (stationary [K, 2, M], moving "
               "[K, 2, N]); got a " +
                   std::to_string(v->dims.size()) + "-D view");
    if (!op.tile_position.empty() || !op.tile_size.empty())
      c.fail("matmul-tiling", "perf_mode=double_row cannot be combined with tile_position / tile_size");
  }
  const MatmulTile tile = check_matmul_tiling(c, op.tile_position, op.tile_size);
  if (K > tile.rows)
    c.fail("matmul-shape", "contraction size K=" + std::to_string(K) + " exceeds the limit of " +
                               std::to_string(tile.rows) + "; loop over K in chunks of 128 and accumulate in PSUM");
  if (M > tile.cols)
    c.fail("matmul-shape", "stationary free size M=" + std::to_string(M) + " exceeds " + std::to_string(tile.cols) +
                               "; tile M in chunks of 128");
  const auto input_types = {DType::float8_e4m3, DType::float8_e5m2, DType::float8_e4m3fn, DType::bfloat16,
                            DType::float16,     DType::tfloat32,    DType::float32};
  c.dtype_in(op.stationary, "stationary", input_types);
  c.dtype_in(op.moving, "moving", input_types);
  auto wide = [](DType d) { return d == DType::float32 || d == DType::tfloat32; };
  if (wide(op.stationary.dtype) != wide(op.moving.dtype))
    c.fail("dtype", "if one matmul input is float32/tfloat32 the other must be too (got " +
                        std::string(to_string(op.stationary.dtype)) + " and " +
                        std::string(to_string(op.moving.dtype)) + ")");
  // OCP fp8 (e4m3fn) is a v4 input and cannot meet the legacy Trainium e4m3 in one matmul (nki.isa.nc_matmul).
  const bool fn = op.stationary.dtype == DType::float8_e4m3fn || op.moving.dtype == DType::float8_e4m3fn;
  if (fn && nc_version(c.target()) < 4)
    c.fail("target", "float8_e4m3fn inputs need trn3 (gen4), but the kernel targets " +
                         std::string(to_string(c.target())) + "; use float8_e4m3 on trn1/trn2");
  if (fn && (op.stationary.dtype == DType::float8_e4m3 || op.moving.dtype == DType::float8_e4m3))
    c.fail("dtype", "float8_e4m3fn and float8_e4m3 cannot be mixed in one matmul; convert one side");
  check_matmul_dst(c, op.dst, M, N);
}

Engine nc_transpose_engine(const Kernel& k, const NcTranspose& op) {
  if (op.engine != Engine::unknown) return op.engine;
  // SBUF -> PSUM is a Tensor Engine transpose, anything else the Vector Engine's.
  return k.tensor_of(op.data).buffer == Buffer::sbuf && k.tensor_of(op.dst).buffer == Buffer::psum ? Engine::tensor
                                                                                                   : Engine::vector;
}

void check(Checker& c, const NcTranspose& op) {
  c.engine_in(op.engine, {Engine::tensor, Engine::vector});
  c.same_dtype(op.dst, "dst", op.data, "data");
  const int64_t P = c.partitions(op.data), F = c.free_size(op.data);
  if (c.partitions(op.dst) != F || c.free_size(op.dst) != P)
    c.fail("transpose-shape", "dst must be [" + std::to_string(F) + ", " + std::to_string(P) + "] (data is [" +
                                  std::to_string(P) + ", " + std::to_string(F) + "])");
  if (nc_transpose_engine(c.kernel(), op) == Engine::tensor) {
    c.buffer_in(op.data, "data", {Buffer::sbuf});
    c.buffer_in(op.dst, "dst", {Buffer::psum});
    if (P > 128 || F > 128) c.fail("transpose-shape", "the Tensor Engine transposes at most [128, 128]");
  } else {
    c.on_chip(op.data, "data");
    c.on_chip(op.dst, "dst");
    if (P > 32 || F > 32) c.fail("transpose-shape", "the Vector Engine transposes at most [32, 32]");
  }
}

void check(Checker& c, const TensorCopy& op) {
  c.engine_in(op.engine, {Engine::vector, Engine::scalar, Engine::gpsimd});
  c.on_chip(op.dst, "dst");
  c.on_chip(op.src, "src");
  c.same_tile(op.dst, "dst", op.src, "src");
  if (op.engine == Engine::gpsimd) {
    c.not_psum(op.src, "src", "the GpSimd engine cannot access PSUM");
    c.not_psum(op.dst, "dst", "the GpSimd engine cannot access PSUM");
  }
  if (op.engine == Engine::scalar && nc_version(c.target()) < 3)
    c.fail("engine", "tensor_copy on the Scalar engine needs trn2 or newer; use activation(op=copy)");
}

void check(Checker& c, const TensorCopyPredicated& op) {
  c.on_chip(op.dst, "dst");
  c.on_chip(op.predicate, "predicate");
  c.same_tile(op.dst, "dst", op.predicate, "predicate");
  c.dtype_in(op.predicate, "predicate",
             {DType::uint8, DType::uint16, DType::uint32, DType::bool_, DType::int8, DType::int16, DType::int32,
              DType::float32, DType::bfloat16, DType::float16});
  if (op.src.is_tile()) {
    c.on_chip(op.src.tile, "src");
    c.same_tile(op.dst, "dst", op.src.tile, "src");
    if (c.in_psum(op.src.tile) && c.in_psum(op.predicate)) c.fail("buffer", "src and predicate cannot both be in psum");
  } else if (op.src.is_none()) {
    c.fail("operand", "src is required");
  }
}

void check(Checker& c, const Memset& op) {
  c.engine_in(op.engine, {Engine::vector, Engine::gpsimd});
  c.on_chip(op.dst, "dst");
  if (op.engine == Engine::gpsimd) c.not_psum(op.dst, "dst", "the GpSimd engine cannot access PSUM");
  if (is_integer(op.dst.dtype)) {
    uint8_t probe[4];
    // Range first: casting a non-finite or huge double to an integer is undefined.
    const bool whole = std::isfinite(op.value) && std::fabs(op.value) < 9.0e18 &&
                       op.value == static_cast<double>(static_cast<int64_t>(op.value));
    if (!whole) c.fail("dtype", "an integer tile needs an integer value, got " + std::to_string(op.value));
    store_int(op.dst.dtype, static_cast<int64_t>(op.value), probe);
    if (load_int(op.dst.dtype, probe) != static_cast<int64_t>(op.value))
      c.fail("dtype", "value " + std::to_string(static_cast<int64_t>(op.value)) + " does not fit " +
                          std::string(to_string(op.dst.dtype)));
  }
}

// src and dst may span different partition counts (a 1 -> 32 partition broadcast): the active span
// is the larger, and each mask entry must name a partition src has (nki.isa.nc_stream_shuffle).
void check(Checker& c, const NcStreamShuffle& op) {
  c.on_chip(op.dst, "dst");
  c.on_chip(op.src, "src");
  c.same_free_size(op.dst, "dst", op.src, "src");
  c.same_dtype(op.dst, "dst", op.src, "src");
  if (op.shuffle_mask.size() != 32)
    c.fail("operand-shape", "shuffle_mask needs 32 entries (one per partition of a quadrant), got " +
                                std::to_string(op.shuffle_mask.size()));
  for (int64_t m : op.shuffle_mask)
    if ((m < 0 || m > 31) && m != 255)
      c.fail("operand",
             "shuffle_mask entries are source partitions 0..31 or 255 (leave unchanged), got " + std::to_string(m));
  const int64_t dst_p = c.partitions(op.dst), src_p = c.partitions(op.src);
  for (int64_t p = 0; p < dst_p; ++p) {
    const int64_t from = op.shuffle_mask[static_cast<size_t>(p % 32)];
    if (from != 255 && p - p % 32 + from >= src_p)
      c.fail("operand", "shuffle_mask[" + std::to_string(p % 32) + "] = " + std::to_string(from) +
                            " sends src partition " + std::to_string(p - p % 32 + from) + " to dst partition " +
                            std::to_string(p) + ", but src spans " + std::to_string(src_p) +
                            " partitions; use 255 for dst partitions to leave alone");
  }
  // Active spans and their start partitions.
  const int64_t P = std::max(dst_p, src_p);
  for (const View* v : {&op.dst, &op.src}) {
    const int64_t start = c.start_partition(*v);
    const bool ok = (P == 128 || P == 96) ? start == 0
                    : P == 64             ? (start == 0 || start == 64)
                    : P <= 32             ? start % 32 == 0
                                          : false;
    if (!ok)
      c.fail("partition-start",
             "nc_stream_shuffle moves up to 32, or 64, 96 or 128 partitions starting at 0 (up to "
             "32: any quadrant, 64: 0 or 64); this operand starts at partition " +
                 std::to_string(start) + " of an active span of " + std::to_string(P));
  }
}

}  // namespace knit::ir
