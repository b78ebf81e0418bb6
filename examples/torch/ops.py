"""The example kernels of examples/kernels/python as PyTorch operators (namespace knit_examples).

    import ops                      # this file, with examples/torch on sys.path
    y = ops.rmsnorm(x, w)           # == torch.ops.knit_examples.rmsnorm(x, w)

Each op is one ``knit.torch.op`` line. rmsnorm is differentiable through a backward written as
a Knit kernel (rmsnorm_backward.py); matmul and softmax through backward functions that call
Knit ops (matmul) or plain torch (softmax's y * (g - sum(g * y))).
"""
import os
import sys

import torch

import knit.torch

_KERNELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernels", "python")
sys.path.insert(0, os.path.normpath(_KERNELS))

from attention import attention_kernel  # noqa: E402
from layernorm import layernorm_kernel  # noqa: E402
from matmul import matmul_kernel  # noqa: E402
from rmsnorm import rmsnorm_kernel  # noqa: E402
from rmsnorm_backward import rmsnorm_backward_kernel  # noqa: E402
from softmax import softmax_kernel  # noqa: E402
from tensor_add import tensor_add_kernel  # noqa: E402
from transpose import transpose_kernel  # noqa: E402

tensor_add = knit.torch.op("knit_examples::tensor_add", tensor_add_kernel)
transpose = knit.torch.op("knit_examples::transpose", transpose_kernel)
softmax = knit.torch.op("knit_examples::softmax", softmax_kernel)
layernorm = knit.torch.op("knit_examples::layernorm", layernorm_kernel)
attention = knit.torch.op("knit_examples::attention", attention_kernel)
rmsnorm = knit.torch.op("knit_examples::rmsnorm", rmsnorm_kernel)
matmul = knit.torch.op("knit_examples::matmul", matmul_kernel)  # lhsT[K, M], rhs[K, N] -> lhsT.T @ rhs

# RMSNorm: the backward kernel is called as rmsnorm_backward(x, w, grad) and returns (dx, dw).
rmsnorm.register_backward(rmsnorm_backward_kernel)


def _matmul_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _matmul_backward(ctx, grad):
    lhsT, rhs = ctx.saved_tensors
    # out = lhsT.T @ rhs: d lhsT = rhs @ grad.T, d rhs = lhsT @ grad, each again a Knit matmul
    # (matmul(a, b) = a.T @ b, so the left operands go in transposed).
    d_lhsT = matmul(rhs.t().contiguous(), grad.t().contiguous())
    d_rhs = matmul(lhsT.t().contiguous(), grad.contiguous())
    return d_lhsT, d_rhs


matmul.register_backward(_matmul_backward, setup_context=_matmul_setup)


def _softmax_setup(ctx, inputs, output):
    ctx.save_for_backward(output)


def _softmax_backward(ctx, grad):
    (y,) = ctx.saved_tensors
    return y * (grad - (grad * y).sum(dim=-1, keepdim=True))


softmax.register_backward(_softmax_backward, setup_context=_softmax_setup)

# Every op this file exports, with inputs of shapes its kernel accepts (for opcheck and the docs).
OPS = {
    "tensor_add": (tensor_add, lambda: (torch.randn(200, 64), torch.randn(200, 64))),
    "transpose": (transpose, lambda: (torch.randn(256, 128),)),
    "softmax": (softmax, lambda: (torch.randn(200, 256),)),
    "layernorm": (layernorm, lambda: (torch.randn(200, 256), torch.randn(256), torch.randn(256))),
    "attention": (attention, lambda: tuple(torch.randn(128, 128) for _ in range(3))),
    "rmsnorm": (rmsnorm, lambda: (torch.randn(200, 256), torch.randn(256))),
    "matmul": (matmul, lambda: (torch.randn(128, 128), torch.randn(128, 256))),
}
