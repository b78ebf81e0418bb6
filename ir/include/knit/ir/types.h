// Scalar vocabulary of the tile IR: element types, memory buffers, engines and the enum
// attributes that ISA instructions carry. Each set is written once as an X-macro list; the enum,
// its text names (used by the printer and parser) and its traits are all derived from the list.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace knit::ir {

// ---- element types ---------------------------------------------------------------------------
// Packed: a 32-bit word holding four MX sub-elements (the *_x4 dtypes of nki.language). Only the
// MX instructions read its sub-elements; as a whole word it behaves like uint32 (numerics.h).
enum class DTypeKind : uint8_t { Bool, SignedInt, UnsignedInt, Float, Packed };

//        enum name     text name      bytes  kind
#define KNIT_DTYPES(X)                               \
  X(bool_, "bool", 1, Bool)                          \
  X(int8, "int8", 1, SignedInt)                      \
  X(int16, "int16", 2, SignedInt)                    \
  X(int32, "int32", 4, SignedInt)                    \
  X(uint8, "uint8", 1, UnsignedInt)                  \
  X(uint16, "uint16", 2, UnsignedInt)                \
  X(uint32, "uint32", 4, UnsignedInt)                \
  X(float16, "float16", 2, Float)                    \
  X(bfloat16, "bfloat16", 2, Float)                  \
  X(float32, "float32", 4, Float)                    \
  X(tfloat32, "tfloat32", 4, Float)                  \
  X(float8_e4m3, "float8_e4m3", 1, Float)            \
  X(float8_e5m2, "float8_e5m2", 1, Float)            \
  X(float8_e4m3fn, "float8_e4m3fn", 1, Float)        \
  X(float8_e8m0fnu, "float8_e8m0fnu", 1, Float)      \
  X(float8_e5m2_x4, "float8_e5m2_x4", 4, Packed)     \
  X(float8_e4m3fn_x4, "float8_e4m3fn_x4", 4, Packed) \
  X(float4_e2m1fn_x4, "float4_e2m1fn_x4", 4, Packed)

enum class DType : uint8_t {
#define KNIT_X(id, text, bytes, kind) id,
  KNIT_DTYPES(KNIT_X)
#undef KNIT_X
};

int dtype_size(DType t);
DTypeKind dtype_kind(DType t);
inline bool is_float(DType t) { return dtype_kind(t) == DTypeKind::Float; }
inline bool is_integer(DType t) {
  return dtype_kind(t) == DTypeKind::SignedInt || dtype_kind(t) == DTypeKind::UnsignedInt;
}
// The fp8 matmul input formats (float8_e8m0fnu is a scale format, not one of them).
inline bool is_fp8(DType t) { return t == DType::float8_e4m3 || t == DType::float8_e5m2 || t == DType::float8_e4m3fn; }
inline bool is_packed(DType t) { return dtype_kind(t) == DTypeKind::Packed; }

// ---- memories and engines --------------------------------------------------------------------
#define KNIT_BUFFERS(X) \
  X(hbm)                \
  X(shared_hbm)         \
  X(sbuf)               \
  X(psum)
enum class Buffer : uint8_t {
#define KNIT_X(id) id,
  KNIT_BUFFERS(KNIT_X)
#undef KNIT_X
};
inline bool is_on_chip(Buffer b) { return b == Buffer::sbuf || b == Buffer::psum; }
inline bool is_hbm(Buffer b) { return b == Buffer::hbm || b == Buffer::shared_hbm; }

// Numbering follows nki.isa.engine (unknown=0 ... sync=6).
#define KNIT_ENGINES(X) \
  X(unknown)            \
  X(tensor)             \
  X(scalar)             \
  X(gpsimd)             \
  X(dma)                \
  X(vector)             \
  X(sync)
enum class Engine : uint8_t {
#define KNIT_X(id) id,
  KNIT_ENGINES(KNIT_X)
#undef KNIT_X
};

// Hardware generations. nc_version numbers: trn1 = gen2, trn2 = gen3, trn3 = gen4.
#define KNIT_TARGETS(X) \
  X(trn1, 2)            \
  X(trn2, 3)            \
  X(trn3, 4)
enum class Target : uint8_t {
#define KNIT_X(id, gen) id,
  KNIT_TARGETS(KNIT_X)
#undef KNIT_X
};
int nc_version(Target t);

// ---- ALU operators (NKI ISA docs, supported math operators) -------------------------------------
// Class says how operands are treated: Bitvec ops work on integer bit patterns with no casts;
// Arith ops compute in fp32; Unary ops ignore their second operand. `bypass` is the "no op"
// placeholder used for optional op slots (op1=None, reduce_op=None). `average` exists only as a
// partition reduction; `divide`, `fmod`, `mod` are simulator-only conveniences that the nl.*
// wrappers use.
enum class AluClass : uint8_t { None, Bitvec, BitvecUnary, Arith, Unary };

//       name              class        legal as a reduction
#define KNIT_ALU_OPS(X)          \
  X(bypass, None, false)         \
  X(invert, BitvecUnary, false)  \
  X(bitwise_and, Bitvec, true)   \
  X(bitwise_or, Bitvec, true)    \
  X(bitwise_xor, Bitvec, true)   \
  X(left_shift, Bitvec, false)   \
  X(right_shift, Bitvec, false)  \
  X(add, Arith, true)            \
  X(subtract, Arith, true)       \
  X(multiply, Arith, true)       \
  X(divide, Arith, false)        \
  X(maximum, Arith, true)        \
  X(minimum, Arith, true)        \
  X(equal, Arith, false)         \
  X(not_equal, Arith, false)     \
  X(greater_equal, Arith, false) \
  X(greater, Arith, false)       \
  X(less_equal, Arith, false)    \
  X(less, Arith, false)          \
  X(logical_and, Arith, true)    \
  X(logical_or, Arith, true)     \
  X(logical_xor, Arith, true)    \
  X(power, Arith, false)         \
  X(abs_max, Arith, false)       \
  X(abs_min, Arith, false)       \
  X(fmod, Arith, false)          \
  X(mod, Arith, false)           \
  X(average, Arith, false)       \
  X(abs, Unary, false)           \
  X(square, Unary, false)        \
  X(relu, Unary, false)          \
  X(rsqrt, Unary, false)         \
  X(reciprocal, Unary, false)

enum class AluOp : uint8_t {
#define KNIT_X(id, cls, red) id,
  KNIT_ALU_OPS(KNIT_X)
#undef KNIT_X
};
AluClass alu_class(AluOp op);
bool alu_is_reduction(AluOp op);

// ---- activation functions (nki.isa.activation) --------------------------------------------------
// name, the ScalarE table set it loads (functions of one set share a table; `none`: plain
// arithmetic, no table; the sets are Knit's estimate: exp with log, the gelu family, every other
// function a set of its own), and whether nl.* has an ALU operator of the same name (`alu`: one
// nl.square serves both) or the name is an activation function only (`act`).
#define KNIT_ACT_FUNCS(X)             \
  X(copy, none, act)                  \
  X(square, none, alu)                \
  X(sigmoid, sigmoid, act)            \
  X(relu, none, alu)                  \
  X(prelu, prelu, act)                \
  X(gelu, gelu, act)                  \
  X(gelu_dx, gelu, act)               \
  X(gelu_apprx_tanh, gelu, act)       \
  X(gelu_apprx_sigmoid, gelu, act)    \
  X(gelu_apprx_sigmoid_dx, gelu, act) \
  X(silu, silu, act)                  \
  X(silu_dx, silu_dx, act)            \
  X(tanh, tanh, act)                  \
  X(softplus, softplus, act)          \
  X(mish, mish, act)                  \
  X(erf, erf, act)                    \
  X(erf_dx, erf_dx, act)              \
  X(exp, exp, act)                    \
  X(abs, none, alu)                   \
  X(sign, none, act)                  \
  X(log, exp, act)                    \
  X(sin, sin, act)                    \
  X(arctan, arctan, act)              \
  X(sqrt, sqrt, act)                  \
  X(rsqrt, rsqrt, alu)                \
  X(reciprocal, reciprocal, alu)

enum class ActFunc : uint8_t {
#define KNIT_X(id, set, kind) id,
  KNIT_ACT_FUNCS(KNIT_X)
#undef KNIT_X
};
#define KNIT_X(...) +1
constexpr int kNumActFuncs = 0 KNIT_ACT_FUNCS(KNIT_X);
constexpr int kNumAluOps = 0 KNIT_ALU_OPS(KNIT_X);
#undef KNIT_X
// The ScalarE table set f loads (named by the set's first function), or nullopt for none.
std::optional<ActFunc> act_table_set(ActFunc f);

// ---- other instruction attributes ---------------------------------------------------------------
#define KNIT_REDUCE_CMDS(X) \
  X(idle)                   \
  X(reset)                  \
  X(reduce)                 \
  X(reset_reduce)           \
  X(load_reduce)
enum class ReduceCmd : uint8_t {
#define KNIT_X(id) id,
  KNIT_REDUCE_CMDS(KNIT_X)
#undef KNIT_X
};

#define KNIT_DGE_MODES(X) \
  X(unknown)              \
  X(swdge)                \
  X(hwdge)                \
  X(none)
enum class DgeMode : uint8_t {
#define KNIT_X(id) id,
  KNIT_DGE_MODES(KNIT_X)
#undef KNIT_X
};

#define KNIT_OOB_MODES(X) \
  X(error)                \
  X(skip)
enum class OobMode : uint8_t {
#define KNIT_X(id) id,
  KNIT_OOB_MODES(KNIT_X)
#undef KNIT_X
};

#define KNIT_PERF_MODES(X) \
  X(none)                  \
  X(double_row)
enum class MatmulPerfMode : uint8_t {
#define KNIT_X(id) id,
  KNIT_PERF_MODES(KNIT_X)
#undef KNIT_X
};

// nc_matmul's accumulate=None/True/False.
#define KNIT_ACCUMULATE_MODES(X) \
  X(auto_)                       \
  X(on)                          \
  X(off)
enum class Accumulate : uint8_t {
#define KNIT_X(id) id,
  KNIT_ACCUMULATE_MODES(KNIT_X)
#undef KNIT_X
};

// The nki.collectives operations (one IR op, `collective`, carries the kind).
#define KNIT_COLLECTIVE_KINDS(X) \
  X(all_reduce)                  \
  X(all_gather)                  \
  X(reduce_scatter)              \
  X(all_to_all)                  \
  X(permute)                     \
  X(permute_implicit)            \
  X(permute_implicit_reduce)     \
  X(all_gather_v)                \
  X(all_to_all_v)
enum class CollectiveKind : uint8_t {
#define KNIT_X(id) id,
  KNIT_COLLECTIVE_KINDS(KNIT_X)
#undef KNIT_X
};

// ---- names ----------------------------------------------------------------------------------
// to_string gives the text-IR spelling; parse_enum<E> is its inverse (nullopt when unknown).
std::string_view to_string(DType v);
std::string_view to_string(Buffer v);
std::string_view to_string(Engine v);
std::string_view to_string(Target v);
std::string_view to_string(AluOp v);
std::string_view to_string(ActFunc v);
std::string_view to_string(ReduceCmd v);
std::string_view to_string(DgeMode v);
std::string_view to_string(OobMode v);
std::string_view to_string(MatmulPerfMode v);
std::string_view to_string(Accumulate v);
std::string_view to_string(CollectiveKind v);

template <class E>
std::optional<E> parse_enum(std::string_view text);

}  // namespace knit::ir
