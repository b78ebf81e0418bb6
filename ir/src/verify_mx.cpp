// Verifier rules: the trn3 MX instructions (nki.isa.nc_matmul_mx, nki.isa.quantize_mx).
// Layouts (docs/architecture.md, "MX data"): data [P, F] in x4 words, scales [P/8, F] with one
// e8m0 byte per group of 8 partitions x 4 sub-elements.
#include "verify_rules.h"

namespace knit::ir {
namespace {

constexpr int64_t kGroupPartitions = 8;

std::string str(int64_t v) { return std::to_string(v); }

// MX data spans whole 32-partition quadrants: P a multiple of 32, at most 128.
void mx_partitions(Checker& c, const View& v, const char* what) {
  const int64_t P = c.partitions(v);
  if (P % 32 != 0)
    c.fail("mx-shape", std::string(what) + " spans " + str(P) +
                           " partitions; MX data needs a multiple of 32 partitions (32, 64, 96 or 128); pad or "
                           "slice the partition dim");
}

// The scales of `data` (P partitions x F words): SBUF, e8m0 (or its raw uint8 bits), [P/8, F].
void mx_scales(Checker& c, const View& scale, const char* what, const View& data, const char* data_name) {
  c.buffer_in(scale, what, {Buffer::sbuf});
  c.dtype_in(scale, what, {DType::float8_e8m0fnu, DType::uint8});
  const int64_t groups = c.partitions(data) / kGroupPartitions, F = c.free_size(data);
  if (c.partitions(scale) != groups || c.free_size(scale) != F)
    c.fail("mx-shape", std::string(what) + " must be [" + str(groups) + ", " + str(F) +
                           "] (one scale per 8 partitions x " + "4 elements of " + data_name + ", which is [" +
                           str(c.partitions(data)) + ", " + str(F) + "] words), got " + str(c.partitions(scale)) +
                           " partitions x " + str(c.free_size(scale)) + " elements");
}

}  // namespace

void check(Checker& c, const QuantizeMx& op) {
  c.requires_gen(4);
  c.buffer_in(op.src, "src", {Buffer::sbuf});
  c.buffer_in(op.dst, "dst", {Buffer::sbuf});
  c.dtype_in(op.src, "src", {DType::float16, DType::bfloat16});
  c.dtype_in(op.dst, "dst", {DType::float8_e4m3fn_x4, DType::float8_e5m2_x4});
  mx_partitions(c, op.src, "src");
  c.same_partitions(op.dst, "dst", op.src, "src");
  const int64_t F = c.free_size(op.src);
  if (F % 4 != 0)
    c.fail("mx-shape", "src has " + str(F) +
                           " elements per partition; quantize_mx packs 4 into each dst word, so it "
                           "must be a multiple of 4");
  if (c.free_size(op.dst) != F / 4)
    c.fail("mx-shape", "dst must hold " + str(F / 4) + " x4 words per partition (src's " + str(F) +
                           " elements / 4), got " + str(c.free_size(op.dst)));
  mx_scales(c, op.dst_scale, "dst_scale", op.dst, "dst");
}

void check(Checker& c, const NcMatmulMx& op) {
  c.requires_gen(4);
  c.buffer_in(op.stationary, "stationary", {Buffer::sbuf});
  c.buffer_in(op.moving, "moving", {Buffer::sbuf});
  const auto packed = {DType::float8_e4m3fn_x4, DType::float8_e5m2_x4, DType::float4_e2m1fn_x4};
  c.dtype_in(op.stationary, "stationary", packed);
  c.dtype_in(op.moving, "moving", packed);
  mx_partitions(c, op.stationary, "stationary");
  c.same_partitions(op.moving, "moving", op.stationary, "stationary");
  const MatmulTile tile = check_matmul_tiling(c, op.tile_position, op.tile_size);
  if (!op.tile_size.empty() && (op.tile_size[1] != 128 || op.tile_position[1] != 0))
    c.fail("matmul-tiling",
           "nc_matmul_mx supports row tiling only: tile_size must be (32|64|128, 128) and "
           "tile_position (row, 0)");
  const int64_t P = c.partitions(op.stationary), M = c.free_size(op.stationary), N = c.free_size(op.moving);
  if (P > tile.rows)
    c.fail("matmul-shape", "stationary spans " + str(P) + " partitions but the row tile has " + str(tile.rows) +
                               "; use a larger tile_size or fewer partitions");
  if (M % 2 != 0 || M > 128)
    c.fail("matmul-shape", "stationary free size M=" + str(M) + " must be even and at most 128");
  mx_scales(c, op.stationary_scale, "stationary_scale", op.stationary, "stationary");
  mx_scales(c, op.moving_scale, "moving_scale", op.moving, "moving");
  check_matmul_dst(c, op.dst, M, N);
}

}  // namespace knit::ir
