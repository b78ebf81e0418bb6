// Hardware numerics: how values move between storage and the engines.
//
// Rounding model (the definition every execution path follows):
//  - Engines compute in fp32. Reading an element decodes it to fp32 exactly (every supported
//    format is a subset of fp32, except int32/uint32 magnitudes above 2^24, which round to the
//    nearest fp32, ties to even).
//  - Writing an fp32 result to a float destination rounds to nearest, ties to even:
//      bfloat16 (8e/7m), float16 (5e/10m), tfloat32 (8e/10m, stored as 32 bits with the low 13
//      mantissa bits zero), float8_e5m2 (5e/2m) and float8_e4m3 (4e/3m, the IEEE-like variant
//      of ml_dtypes: bias 7, max 240, inf = S.1111.000, NaN = S.1111.xxx).
//    Subnormals are kept (no flush to zero). A value whose rounded magnitude exceeds the largest
//    finite value becomes +-inf. Every NaN is written as the canonical quiet NaN (fp32
//    0x7FC00000: positive, payload 0; bf16 0x7FC0, fp16 0x7E00, e4m3/e5m2 their positive quiet
//    NaN codes), whatever NaN the computation produced: IEEE 754 leaves the sign and payload of a
//    NaN result open (which operand's NaN an add of two NaNs returns, the sign of 0 * inf), and
//    compilers exploit that, so only a canonical NaN makes every execution path agree bit for
//    bit. Moving raw bits (same-dtype copies, DMA, bit-vector ops) keeps a NaN's bits.
//    float8_e4m3fn (OCP fp8, = ml_dtypes.float8_e4m3fn): 4e/3m, bias 7, no inf, max 448, NaN =
//    S.1111.111. Same RNE and subnormals, but a rounded magnitude above 448 and +-inf become NaN
//    (sign kept for those; computed NaNs are canonical as above): the format has no inf and
//    ml_dtypes does the same.
//    float8_e8m0fnu (MX scale, = ml_dtypes.float8_e8m0fnu): value 2^(code-127), code 0xFF = NaN,
//    no sign, no zero. It has no mantissa, so "nearest" is decided in the linear domain and a tie
//    goes up: x in [2^e, 2^(e+1)) becomes 2^(e+1) iff x >= 1.5 * 2^e (ml_dtypes' rule; there is
//    no even code to tie to). Positive values below 2^-127 become 2^-127; values above 2^127
//    after rounding, +-0, negative values, +-inf and NaN become NaN.
//  - Packed MX words (float8_e5m2_x4, float8_e4m3fn_x4, float4_e2m1fn_x4) hold four sub-elements
//    in one little-endian 32-bit word: sub-element j (0..3) is byte j (bits 8j..8j+7) for fp8,
//    nibble j (bits 4j..4j+3) for fp4, whose bits 16..31 are unused (Knit's choice; written 0).
//    fp4 e2m1fn: 1 sign, 2 exponent (bias 1), 1 mantissa bit, values +-{0, 0.5, 1, 1.5, 2, 3, 4, 6},
//    no inf or NaN. Sub-elements are read by decode_packed and written by encode_packed (RNE,
//    saturating to +-max finite, NaN -> the fp8 NaN); as whole words decode/encode/load_int/
//    store_int treat packed types as uint32 (what NKI's simulator stores them as), so a copy or a
//    memset moves words, never values.
//  - Writing fp32 to an integer destination rounds half to even and saturates to the type's
//    range; NaN becomes 0. bool stores 1 for any non-zero value (NaN included), else 0.
//  - Bit-vector ALU ops and same-dtype copies move raw bits (see load_bits/store_bits).
#pragma once

#include <cstdint>

#include "knit/ir/types.h"

namespace knit::ir {

// Decode one element of type t at p to fp32.
float decode(DType t, const uint8_t* p);
// Round v to type t (rules above) and store it at p.
void encode(DType t, float v, uint8_t* p);
// fp32 -> t -> fp32: the value a write of v to a t destination leaves behind.
float round_to(DType t, float v);

// Raw bit patterns, zero-extended to 32 bits (sign-extended for signed integer types).
uint32_t load_bits(DType t, const uint8_t* p);
void store_bits(DType t, uint32_t bits, uint8_t* p);

// Integer value of an integer element (for exact integer paths and index operands).
int64_t load_int(DType t, const uint8_t* p);
// Store an integer, saturating to t's range (t must be an integer or bool type).
void store_int(DType t, int64_t v, uint8_t* p);

// Sub-element j (0..3) of a packed MX word of type t, decoded to fp32 (exact).
float decode_packed(DType t, uint32_t word, int j);
// Four values rounded RNE to the sub-element format of t, saturating at +-max finite (NaN stays
// NaN), packed into one word. fp8 packed types only (no instruction writes fp4 values).
uint32_t encode_packed(DType t, const float (&values)[4]);

// Largest finite value of a float type (fp32: FLT_MAX).
double max_finite(DType t);

// The "never written" sentinel NKI's simulator fills fresh allocations with:
// NaN for float types, 4 for integer types (bool: 1).
void fill_uninitialized(DType t, uint8_t* p, int64_t count);

}  // namespace knit::ir
