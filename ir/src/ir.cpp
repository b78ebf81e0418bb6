#include "knit/ir/ir.h"

#include <functional>
#include <numeric>

namespace knit::ir {

Kernel::Kernel() = default;
Kernel::Kernel(const Kernel&) = default;
Kernel::Kernel(Kernel&&) noexcept = default;
Kernel& Kernel::operator=(const Kernel&) = default;
Kernel& Kernel::operator=(Kernel&&) noexcept = default;
Kernel::~Kernel() = default;

int64_t TensorDecl::num_elements() const {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

int64_t TensorDecl::partitions() const { return is_on_chip(buffer) && !shape.empty() ? shape[0] : 1; }

int64_t TensorDecl::partition_elements() const {
  const int64_t p = partitions();
  return p == 0 ? 0 : num_elements() / p;
}

std::vector<int64_t> View::shape() const {
  std::vector<int64_t> s;
  s.reserve(dims.size());
  for (const ApDim& d : dims) s.push_back(d.num);
  return s;
}

int64_t View::num_elements() const {
  int64_t n = 1;
  for (const ApDim& d : dims) n *= d.num;
  return n;
}

const TensorDecl& Kernel::tensor(int id) const {
  if (id < 0 || id >= static_cast<int>(tensors.size()))
    internal_error("tensor id " + std::to_string(id) + " is not declared in kernel '" + name + "'");
  return tensors[id];
}

namespace {
constexpr std::string_view kOpNames[] = {
#define KNIT_X(type, name) #name,
    KNIT_OPS(KNIT_X)
#undef KNIT_X
};
}  // namespace

// Enumerators that would be C++ keywords carry a trailing '_' (while_, if_, else_); their text
// names do not.
static constexpr std::string_view text_name(std::string_view enumerator) {
  return enumerator.ends_with('_') ? enumerator.substr(0, enumerator.size() - 1) : enumerator;
}

std::string_view opcode_name(Opcode op) { return text_name(kOpNames[static_cast<int>(op)]); }

OpVariant default_op(Opcode op) {
  switch (op) {
#define KNIT_X(type, name) \
  case Opcode::name: return type{};
    KNIT_OPS(KNIT_X)
#undef KNIT_X
  }
  return std::monostate{};
}

std::optional<Opcode> parse_opcode(std::string_view name) {
  for (size_t i = 0; i < std::size(kOpNames); ++i)
    if (text_name(kOpNames[i]) == name) return static_cast<Opcode>(i);
  return std::nullopt;
}

}  // namespace knit::ir
