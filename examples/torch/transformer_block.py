"""A small transformer block trained on CPU with Knit ops, against the same block in pure torch.

    PYTHONPATH=python python3 examples/torch/transformer_block.py [--steps N]

The block is pre-norm, single-head, causal: x + Attn(RMSNorm(x)), then + MLP(RMSNorm(.)) with a
SiLU. In the Knit version the two RMSNorms (forward and backward Knit kernels), every matmul
(the Q/K/V/output projections, Q K^T, P V and both MLP layers) and the softmax are Knit ops
(examples/torch/ops.py) running on Knit's simulator; the causal mask, the SiLU, the residual
adds and the loss stay in torch. Both models start from the same weights and take the same SGD
steps on the same data; the script prints both loss trajectories, their largest relative
difference, and the simulated Trainium latency of each Knit op at the block's shapes.
"""
import argparse
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ops  # noqa: E402

SEQ, DIM, HIDDEN = 128, 128, 256  # the matmul example's tiling: multiples of 128
EPS = 1e-6  # the RMSNorm kernels' epsilon


def linear(x, w, use_knit):
    """x[T, D] @ w[D, F]: the Knit matmul takes the left operand transposed (lhsT[K, M])."""
    return ops.matmul(x.t().contiguous(), w) if use_knit else x @ w


def rmsnorm(x, w, use_knit):
    return ops.rmsnorm(x, w) if use_knit else x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w


def softmax(x, use_knit):
    return ops.softmax(x) if use_knit else torch.softmax(x, dim=-1)


class Block(torch.nn.Module):
    def __init__(self, use_knit, seed=0):
        super().__init__()
        self.use_knit = use_knit
        g = torch.Generator().manual_seed(seed)

        def param(*shape, scale):
            return torch.nn.Parameter(torch.randn(*shape, generator=g) * scale)

        self.norm1 = torch.nn.Parameter(torch.ones(DIM))
        self.norm2 = torch.nn.Parameter(torch.ones(DIM))
        self.wq, self.wk, self.wv, self.wo = (param(DIM, DIM, scale=DIM ** -0.5) for _ in range(4))
        self.w1 = param(DIM, HIDDEN, scale=DIM ** -0.5)
        self.w2 = param(HIDDEN, DIM, scale=HIDDEN ** -0.5)
        self.register_buffer("mask", torch.full((SEQ, SEQ), float("-inf")).triu(1))

    def forward(self, x):
        k = self.use_knit
        h = rmsnorm(x, self.norm1, k)
        q, kk, v = linear(h, self.wq, k), linear(h, self.wk, k), linear(h, self.wv, k)
        # scores = q @ kk.T: as lhsT = q.T and rhs = kk.T
        scores = (ops.matmul(q.t().contiguous(), kk.t().contiguous()) if k else q @ kk.t()) / math.sqrt(DIM)
        p = softmax(scores + self.mask, k)
        attn = ops.matmul(p.t().contiguous(), v) if k else p @ v
        x = x + linear(attn, self.wo, k)
        h = rmsnorm(x, self.norm2, k)
        return x + linear(torch.nn.functional.silu(linear(h, self.w1, k)), self.w2, k)


def train(model, data, steps, lr=0.05):
    """SGD on a regression target; returns the loss before each step."""
    x, target = data
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def make_data(seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(SEQ, DIM, generator=g)
    return x, torch.roll(x, 1, dims=0) * 0.5  # predict (half) the previous token


def op_latencies():
    """Simulated latency (µs, the default target) of each Knit op at the block's shapes."""
    x = torch.empty(SEQ, DIM)
    return {
        "rmsnorm [128x128]": ops.rmsnorm.latency_us(x, torch.empty(DIM)),
        "rmsnorm backward [128x128]": ops.rmsnorm.backward_op.latency_us(x, torch.empty(DIM), x),
        "matmul 128x128 @ 128x128 (projections, P V)":
            ops.matmul.latency_us(torch.empty(DIM, SEQ), torch.empty(DIM, DIM)),
        "matmul 128x128 @ 128x256 (MLP up)":
            ops.matmul.latency_us(torch.empty(DIM, SEQ), torch.empty(DIM, HIDDEN)),
        "matmul 128x256 @ 256x128 (MLP down)":
            ops.matmul.latency_us(torch.empty(HIDDEN, SEQ), torch.empty(HIDDEN, DIM)),
        "softmax [128x128]": ops.softmax.latency_us(torch.empty(SEQ, SEQ)),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    opts = parser.parse_args()
    data = make_data()
    reference = train(Block(use_knit=False), data, opts.steps)
    knit_losses = train(Block(use_knit=True), data, opts.steps)
    print(f"{'step':>4}  {'torch loss':>12}  {'knit loss':>12}  {'rel diff':>9}")
    for i, (a, b) in enumerate(zip(reference, knit_losses)):
        print(f"{i:>4}  {a:12.6f}  {b:12.6f}  {abs(a - b) / abs(a):9.2e}")
    worst = max(abs(a - b) / abs(a) for a, b in zip(reference, knit_losses))
    print(f"largest relative loss difference: {worst:.2e}")
    print("\nsimulated Trainium latency per Knit op call:")
    for name, us in op_latencies().items():
        print(f"  {name:46s} {us:8.2f} us")


if __name__ == "__main__":
    main()
