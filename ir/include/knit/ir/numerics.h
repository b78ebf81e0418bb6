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
//    finite value becomes +-inf. NaN stays NaN (quiet, sign kept).
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

// Largest finite value of a float type (fp32: FLT_MAX).
double max_finite(DType t);

// The "never written" sentinel NKI's simulator fills fresh allocations with:
// NaN for float types, 4 for integer types (bool: 1).
void fill_uninitialized(DType t, uint8_t* p, int64_t count);

}  // namespace knit::ir
