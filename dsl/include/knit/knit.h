// #include <knit/knit.h> — write Knit kernels in C++.
//
//   knit::nl::tensor add(knit::nl::tensor a, knit::nl::tensor b) { ... isa calls ... return out; }
//   ir::Kernel k = knit::trace("add", add, {knit::arg({256, 512}, knit::nl::float32, "a"), ...});
//   std::vector<knit::HostTensor> out = knit::run(k, {a_host, b_host});
//
// A kernel is an ordinary C++ function of tensor handles returning its output tensor(s) (one
// nl::tensor, a std::vector or a std::tuple of them, or void). trace() runs it once: C++ loops
// unroll, and every nl::/isa:: call appends to the IR with its source line. run() executes the
// IR on the reference interpreter.
#pragma once

#include <source_location>
#include <tuple>
#include <type_traits>
#include <utility>

#include "knit/ir/text.h"
#include "knit/isa.h"
#include "knit/nl.h"
#include "knit/sim/interpreter.h"

// The vectors of Knit's types a kernel uses: instantiated once in Knit's library
// (frontend/src/kernel_templates.cpp), so that a C++ kernel file calls them instead of
// compiling them again, most of what remained of its compile time (docs/cpp.md).
#define KNIT_KERNEL_VECTORS(X) \
  X(int64_t)                   \
  X(int)                       \
  X(knit::ir::View)            \
  X(knit::ir::ApDim)           \
  X(knit::ir::RegTerm)         \
  X(knit::ir::Index)           \
  X(knit::nl::tensor)          \
  X(knit::ArgSpec)

namespace knit {

using sim::HostTensor;

struct ArgSpec {
  std::vector<int64_t> shape;
  ir::DType dtype = ir::DType::float32;
  std::string name;
};
inline ArgSpec arg(std::vector<int64_t> shape, ir::DType dtype, std::string name = "") {
  return {std::move(shape), dtype, std::move(name)};
}

}  // namespace knit

#define KNIT_X(type) extern template class std::vector<type>;
KNIT_KERNEL_VECTORS(KNIT_X)
#undef KNIT_X

namespace knit {

namespace detail {

template <class T>
struct fn_traits : fn_traits<decltype(&T::operator())> {};
template <class R, class... A>
struct fn_traits<R (*)(A...)> {
  static constexpr size_t arity = sizeof...(A);
};
template <class R, class... A>
struct fn_traits<R(A...)> : fn_traits<R (*)(A...)> {};
template <class C, class R, class... A>
struct fn_traits<R (C::*)(A...) const> : fn_traits<R (*)(A...)> {};
template <class C, class R, class... A>
struct fn_traits<R (C::*)(A...)> : fn_traits<R (*)(A...)> {};

inline void collect(std::vector<int>& ids, const nl::tensor& t) { ids.push_back(t.id()); }
inline void collect(std::vector<int>& ids, const std::vector<nl::tensor>& ts) {
  for (const nl::tensor& t : ts) ids.push_back(t.id());
}
template <class... T>
void collect(std::vector<int>& ids, const std::tuple<T...>& ts) {
  std::apply([&](const auto&... t) { (collect(ids, t), ...); }, ts);
}

template <class Fn, size_t... I>
std::vector<int> call_kernel(Fn& fn, const std::vector<nl::tensor>& params, std::index_sequence<I...>) {
  std::vector<int> outputs;
  if constexpr (std::is_void_v<decltype(fn(params[I]...))>) fn(params[I]...);
  else collect(outputs, fn(params[I]...));
  return outputs;
}

}  // namespace detail

// Traces `fn` into a verified IR kernel. Rule violations throw knit::Error (UserError) naming
// the kernel line.
template <class Fn>
ir::Kernel trace(std::string name, Fn&& fn, const std::vector<ArgSpec>& args, ir::Target target = ir::Target::trn2,
                 std::source_location l = std::source_location::current()) {
  using Traits = detail::fn_traits<std::remove_cvref_t<std::remove_pointer_t<std::decay_t<Fn>>>>;
  constexpr size_t N = Traits::arity;
  if (args.size() != N)
    user_error(loc_of(l), "kernel-args",
               "kernel '" + name + "' takes " + std::to_string(N) + " tensors but " + std::to_string(args.size()) +
                   " argument specs were given");
  frontend::Builder builder(name, target);
  frontend::Builder::Scope scope(builder);
  std::vector<nl::tensor> params;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string pname = args[i].name.empty() ? "arg" + std::to_string(i) : args[i].name;
    const int id = builder.add_param(pname, args[i].dtype, args[i].shape, loc_of(l));
    params.emplace_back(id, ir::full_view(builder.tensor(id), id));
  }
  builder.set_outputs(detail::call_kernel(fn, params, std::make_index_sequence<N>{}));
  return builder.finish();
}

// Runs a traced kernel on the reference interpreter. Returns the kernel's outputs; arguments
// the kernel wrote to are updated in `args`.
inline std::vector<HostTensor> run(const ir::Kernel& kernel, std::vector<HostTensor>& args,
                                   const sim::InterpretOptions& options = {}) {
  return sim::interpret(kernel, args, options).outputs;
}
inline std::vector<HostTensor> run(const ir::Kernel& kernel, std::vector<HostTensor>&& args,
                                   const sim::InterpretOptions& options = {}) {
  return sim::interpret(kernel, args, options).outputs;
}

// ---- kernels of a file Knit compiles itself (knit run FILE.cpp, knit.cpp.load) -------------
//
//   nl::tensor rmsnorm(nl::tensor x, nl::tensor w) { ... }
//   KNIT_KERNEL(rmsnorm)
//
// KNIT_KERNEL(fn) marks a kernel function for Knit's in-process C++ compiler (frontend/cpp):
// write it next to the function, in the same namespace, with the function's plain name. It
// emits a C-linkage entry point knit_kernel_entry_<fn> describing the kernel, which the compiler
// finds in the file's module; in an ordinary build (linked into your own program) it is unused.
struct KernelEntry {
  const char* name = nullptr;  // as written in KNIT_KERNEL(...)
  size_t arity = 0;            // tensor parameters
  std::source_location where;  // the KNIT_KERNEL line: where the kernel's parameters are declared
  ir::Kernel (*trace)(const std::string& name, const std::vector<ArgSpec>& args, ir::Target target,
                      std::source_location where) = nullptr;
};

namespace detail {
template <auto Fn>
KernelEntry entry_of(const char* name, std::source_location where = std::source_location::current()) {
  using Traits = fn_traits<std::remove_cvref_t<std::remove_pointer_t<decltype(Fn)>>>;
  return {name, Traits::arity, where,
          [](const std::string& n, const std::vector<ArgSpec>& args, ir::Target t, std::source_location l) {
            return knit::trace(n, Fn, args, t, l);
          }};
}
}  // namespace detail

#define KNIT_KERNEL(fn) \
  extern "C" void knit_kernel_entry_##fn(::knit::KernelEntry* out) { *out = ::knit::detail::entry_of<&fn>(#fn); }

}  // namespace knit
