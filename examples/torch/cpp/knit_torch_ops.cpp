// The C++ example kernels (examples/kernels/cpp) as PyTorch operators in the namespace knit_cpp,
// registered with TORCH_LIBRARY through <knit/torch.h>. Built as a shared library when the
// installed torch is found (examples/torch/cpp/CMakeLists.txt); load it with
//   torch.ops.load_library("build/examples/torch/cpp/libknit_torch_ops.so")
// and call torch.ops.knit_cpp.rmsnorm(x, w), ... like any other op.
#include <knit/torch.h>

#include "kernels.h"

using knit::torch::cpu_kernel;
using knit::torch::meta_kernel;
namespace ex = knit::examples;

TORCH_LIBRARY(knit_cpp, m) {
  m.def("tensor_add(Tensor a, Tensor b) -> Tensor");
  m.def("softmax(Tensor x) -> Tensor");
  m.def("rmsnorm(Tensor x, Tensor w) -> Tensor");
  m.def("matmul(Tensor lhsT, Tensor rhs) -> Tensor");
}

TORCH_LIBRARY_IMPL(knit_cpp, CPU, m) {
  m.impl("tensor_add", cpu_kernel("tensor_add", ex::tensor_add));
  m.impl("softmax", cpu_kernel("softmax", ex::softmax));
  m.impl("rmsnorm", cpu_kernel("rmsnorm", ex::rmsnorm));
  m.impl("matmul", cpu_kernel("matmul", ex::matmul));
}

TORCH_LIBRARY_IMPL(knit_cpp, Meta, m) {
  m.impl("tensor_add", meta_kernel("tensor_add", ex::tensor_add));
  m.impl("softmax", meta_kernel("softmax", ex::softmax));
  m.impl("rmsnorm", meta_kernel("rmsnorm", ex::rmsnorm));
  m.impl("matmul", meta_kernel("matmul", ex::matmul));
}
