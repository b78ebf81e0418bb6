#include "knit/ir/types.h"

#include <array>

namespace knit::ir {
namespace {

struct DTypeInfo {
  std::string_view name;
  int bytes;
  DTypeKind kind;
};
constexpr DTypeInfo kDTypes[] = {
#define KNIT_X(id, text, bytes, kind) {text, bytes, DTypeKind::kind},
    KNIT_DTYPES(KNIT_X)
#undef KNIT_X
};

struct AluInfo {
  std::string_view name;
  AluClass cls;
  bool reduction;
};
constexpr AluInfo kAluOps[] = {
#define KNIT_X(id, cls, red) {#id, AluClass::cls, red},
    KNIT_ALU_OPS(KNIT_X)
#undef KNIT_X
};

// Text names for the plain enums; a trailing '_' in an identifier (auto_) is not part of the name.
constexpr std::string_view strip(std::string_view s) {
  return (!s.empty() && s.back() == '_') ? s.substr(0, s.size() - 1) : s;
}
#define KNIT_NAME(id) strip(#id),
constexpr std::string_view kBuffers[] = {KNIT_BUFFERS(KNIT_NAME)};
constexpr std::string_view kEngines[] = {KNIT_ENGINES(KNIT_NAME)};
constexpr std::string_view kReduceCmds[] = {KNIT_REDUCE_CMDS(KNIT_NAME)};
constexpr std::string_view kDgeModes[] = {KNIT_DGE_MODES(KNIT_NAME)};
constexpr std::string_view kOobModes[] = {KNIT_OOB_MODES(KNIT_NAME)};
constexpr std::string_view kPerfModes[] = {KNIT_PERF_MODES(KNIT_NAME)};
constexpr std::string_view kAccumulate[] = {KNIT_ACCUMULATE_MODES(KNIT_NAME)};
constexpr std::string_view kCollectiveKinds[] = {KNIT_COLLECTIVE_KINDS(KNIT_NAME)};
#undef KNIT_NAME
#define KNIT_X(id, set, kind) #id,
constexpr std::string_view kActFuncs[] = {KNIT_ACT_FUNCS(KNIT_X)};
#undef KNIT_X
#define KNIT_X(id, gen) #id,
constexpr std::string_view kTargets[] = {KNIT_TARGETS(KNIT_X)};
#undef KNIT_X
#define KNIT_X(id, gen) gen,
constexpr int kNcVersions[] = {KNIT_TARGETS(KNIT_X)};
#undef KNIT_X

template <class E, size_t N>
std::optional<E> find_name(const std::string_view (&names)[N], std::string_view text) {
  for (size_t i = 0; i < N; ++i)
    if (names[i] == text) return static_cast<E>(i);
  return std::nullopt;
}

}  // namespace

int dtype_size(DType t) { return kDTypes[static_cast<int>(t)].bytes; }
DTypeKind dtype_kind(DType t) { return kDTypes[static_cast<int>(t)].kind; }
int nc_version(Target t) { return kNcVersions[static_cast<int>(t)]; }
AluClass alu_class(AluOp op) { return kAluOps[static_cast<int>(op)].cls; }
bool alu_is_reduction(AluOp op) { return kAluOps[static_cast<int>(op)].reduction; }

std::string_view to_string(DType v) { return kDTypes[static_cast<int>(v)].name; }
std::string_view to_string(AluOp v) { return kAluOps[static_cast<int>(v)].name; }
std::string_view to_string(Buffer v) { return kBuffers[static_cast<int>(v)]; }
std::string_view to_string(Engine v) { return kEngines[static_cast<int>(v)]; }
std::string_view to_string(Target v) { return kTargets[static_cast<int>(v)]; }
std::string_view to_string(ActFunc v) { return kActFuncs[static_cast<int>(v)]; }
std::string_view to_string(ReduceCmd v) { return kReduceCmds[static_cast<int>(v)]; }
std::string_view to_string(DgeMode v) { return kDgeModes[static_cast<int>(v)]; }
std::string_view to_string(OobMode v) { return kOobModes[static_cast<int>(v)]; }
std::string_view to_string(MatmulPerfMode v) { return kPerfModes[static_cast<int>(v)]; }
std::string_view to_string(Accumulate v) { return kAccumulate[static_cast<int>(v)]; }
std::string_view to_string(CollectiveKind v) { return kCollectiveKinds[static_cast<int>(v)]; }

template <>
std::optional<DType> parse_enum<DType>(std::string_view text) {
  for (size_t i = 0; i < std::size(kDTypes); ++i)
    if (kDTypes[i].name == text) return static_cast<DType>(i);
  return std::nullopt;
}
template <>
std::optional<AluOp> parse_enum<AluOp>(std::string_view text) {
  for (size_t i = 0; i < std::size(kAluOps); ++i)
    if (kAluOps[i].name == text) return static_cast<AluOp>(i);
  return std::nullopt;
}
#define KNIT_PARSE(E, table)                              \
  template <>                                             \
  std::optional<E> parse_enum<E>(std::string_view text) { \
    return find_name<E>(table, text);                     \
  }
KNIT_PARSE(Buffer, kBuffers)
KNIT_PARSE(Engine, kEngines)
KNIT_PARSE(Target, kTargets)
KNIT_PARSE(ActFunc, kActFuncs)
KNIT_PARSE(ReduceCmd, kReduceCmds)
KNIT_PARSE(DgeMode, kDgeModes)
KNIT_PARSE(OobMode, kOobModes)
KNIT_PARSE(MatmulPerfMode, kPerfModes)
KNIT_PARSE(Accumulate, kAccumulate)
KNIT_PARSE(CollectiveKind, kCollectiveKinds)
#undef KNIT_PARSE

namespace act_sets {  // each set named by its first function; `none` loads no table
constexpr std::optional<ActFunc> none;
#define KNIT_X(id, set, kind) constexpr std::optional<ActFunc> id = ActFunc::id;
KNIT_ACT_FUNCS(KNIT_X)
#undef KNIT_X
}  // namespace act_sets

std::optional<ActFunc> act_table_set(ActFunc f) {
  switch (f) {
#define KNIT_X(id, set, kind) \
  case ActFunc::id: return act_sets::set;
    KNIT_ACT_FUNCS(KNIT_X)
#undef KNIT_X
  }
  return std::nullopt;
}

}  // namespace knit::ir
