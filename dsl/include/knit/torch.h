// #include <knit/torch.h> — C++ Knit kernels as PyTorch operators (TORCH_LIBRARY).
//
//   TORCH_LIBRARY(my_ops, m) { m.def("rmsnorm(Tensor x, Tensor w) -> Tensor"); }
//   TORCH_LIBRARY_IMPL(my_ops, CPU, m) { m.impl("rmsnorm", knit::torch::cpu_kernel("rmsnorm", rmsnorm)); }
//   TORCH_LIBRARY_IMPL(my_ops, Meta, m) { m.impl("rmsnorm", knit::torch::meta_kernel("rmsnorm", rmsnorm)); }
//
// cpu_kernel traces the kernel for the inputs' shapes and dtypes (once per distinct signature),
// lowers it to an engine program and runs it on Knit's simulator (the native JIT path by
// default, KNIT_BACKEND as in Python); meta_kernel traces only, to give the output's shape and
// dtype without computing anything (what torch.compile and opcheck's fake-tensor checks use).
// The kernel is an ordinary header-only-API function of nl::tensor handles returning one
// nl::tensor; the op's inputs are all tensors. Build against the libtorch that ships with the
// installed torch (examples/torch/cpp/CMakeLists.txt shows how).
#pragma once

#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "knit/codegen/lower.h"
#include "knit/knit.h"

namespace knit::torch {

// Knit dtype <-> ATen scalar type for the element types both have with the same encoding.
inline ir::DType knit_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return ir::DType::float32;
    case at::kBFloat16: return ir::DType::bfloat16;
    case at::kHalf: return ir::DType::float16;
    case at::kInt: return ir::DType::int32;
    case at::kShort: return ir::DType::int16;
    case at::kChar: return ir::DType::int8;
    case at::kByte: return ir::DType::uint8;
    case at::kFloat8_e5m2: return ir::DType::float8_e5m2;
    case at::kFloat8_e4m3fn: return ir::DType::float8_e4m3fn;
    default: TORCH_CHECK(false, "knit: torch dtype ", t, " has no Knit counterpart");
  }
}

inline at::ScalarType aten_dtype(ir::DType t) {
  switch (t) {
    case ir::DType::float32: return at::kFloat;
    case ir::DType::bfloat16: return at::kBFloat16;
    case ir::DType::float16: return at::kHalf;
    case ir::DType::int32: return at::kInt;
    case ir::DType::int16: return at::kShort;
    case ir::DType::int8: return at::kChar;
    case ir::DType::uint8: return at::kByte;
    case ir::DType::float8_e5m2: return at::kFloat8_e5m2;
    case ir::DType::float8_e4m3fn: return at::kFloat8_e4m3fn;
    default:
      TORCH_CHECK(false, "knit: the kernel returns ", std::string(ir::to_string(t)), ", which torch has no dtype for");
  }
}

namespace detail {

template <size_t>
using tensor_ref = const at::Tensor&;

// One kernel's traces (and, once something runs them, engine programs) by input signature.
template <class Fn>
class Traced {
 public:
  Traced(std::string name, Fn fn) : name_(std::move(name)), fn_(fn) {}

  const ir::Kernel& kernel(const std::vector<at::Tensor>& inputs) { return entry(inputs).kernel; }

  const codegen::EngineProgram& program(const std::vector<at::Tensor>& inputs) {
    Entry& e = entry(inputs);
    std::lock_guard<std::mutex> lock(mutex_);
    if (!e.program) e.program = std::make_unique<codegen::EngineProgram>(codegen::lower(e.kernel));
    return *e.program;
  }

 private:
  struct Entry {
    ir::Kernel kernel;
    std::unique_ptr<codegen::EngineProgram> program;
  };

  Entry& entry(const std::vector<at::Tensor>& inputs) {
    std::vector<ArgSpec> specs;
    std::string key;
    for (size_t i = 0; i < inputs.size(); ++i) {
      specs.push_back(arg(inputs[i].sizes().vec(), knit_dtype(inputs[i].scalar_type()), "arg" + std::to_string(i)));
      key += ir::to_string(specs.back().dtype);
      for (int64_t d : specs.back().shape) {
        key += ',';
        key += std::to_string(d);
      }
      key += ';';
    }
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(key);
    if (it == entries_.end()) it = entries_.emplace(key, Entry{knit::trace(name_, fn_, specs), nullptr}).first;
    return it->second;
  }

  std::string name_;
  Fn fn_;
  std::mutex mutex_;
  std::map<std::string, Entry> entries_;  // std::map: references stay valid as it grows
};

inline sim::Backend backend_from_env() {
  const char* env = std::getenv("KNIT_BACKEND");
  const std::string name = env ? env : "jit";
  if (name == "reference") return sim::Backend::reference;
  if (name == "jit-strict") return sim::Backend::jit_strict;
  return sim::Backend::jit;
}

inline at::Tensor run(const codegen::EngineProgram& program, const std::vector<at::Tensor>& inputs) {
  std::vector<HostTensor> hosts;
  std::vector<at::Tensor> contiguous;  // keeps the borrowed bytes alive for the run
  for (const at::Tensor& t : inputs) {
    contiguous.push_back(t.contiguous());
    HostTensor h;
    h.dtype = knit_dtype(t.scalar_type());
    h.shape = t.sizes().vec();
    h.borrowed = {static_cast<const uint8_t*>(contiguous.back().data_ptr()), static_cast<size_t>(t.nbytes())};
    hosts.push_back(std::move(h));
  }
  sim::InterpretOptions options;
  options.backend = backend_from_env();
  sim::RunResult r = sim::run_program(program, hosts, options);
  TORCH_CHECK(r.outputs.size() == 1, "knit: a C++ kernel registered with knit::torch returns one tensor");
  TORCH_CHECK(std::none_of(r.args_written.begin(), r.args_written.end(), [](bool w) { return w; }),
              "knit: the kernel writes one of its inputs; knit::torch registers functional ops only");
  const HostTensor& out = r.outputs[0];
  at::Tensor result = at::empty(out.shape, at::TensorOptions().dtype(aten_dtype(out.dtype)));
  std::memcpy(result.data_ptr(), out.bytes.data(), out.bytes.size());
  return result;
}

inline at::Tensor meta(const ir::Kernel& k) {
  const ir::TensorDecl& out = k.tensor(k.outputs.at(0));
  return at::empty(out.shape, at::TensorOptions().dtype(aten_dtype(out.dtype)).device(at::kMeta));
}

template <bool kMeta, class Fn, size_t... I>
auto make_impl(std::shared_ptr<Traced<Fn>> traced, std::index_sequence<I...>) {
  return [traced](tensor_ref<I>... inputs) -> at::Tensor {
    const std::vector<at::Tensor> args{inputs...};
    if constexpr (kMeta) return meta(traced->kernel(args));
    else return run(traced->program(args), args);
  };
}

template <bool kMeta, class Fn>
auto impl(std::string name, Fn fn) {
  using Traits = knit::detail::fn_traits<std::remove_cvref_t<std::remove_pointer_t<std::decay_t<Fn>>>>;
  return make_impl<kMeta>(std::make_shared<Traced<std::decay_t<Fn>>>(std::move(name), fn),
                          std::make_index_sequence<Traits::arity>{});
}

}  // namespace detail

// The CPU implementation of an op: runs `fn` on Knit's simulator. Pass it to m.impl in a
// TORCH_LIBRARY_IMPL(ns, CPU, m) block.
template <class Fn>
auto cpu_kernel(std::string name, Fn fn) {
  return detail::impl<false>(std::move(name), fn);
}

// The Meta implementation: the output's shape and dtype from a trace, no computation.
template <class Fn>
auto meta_kernel(std::string name, Fn fn) {
  return detail::impl<true>(std::move(name), fn);
}

}  // namespace knit::torch
