"""Mixture-of-experts dispatch and combine over R ranks, expert r on rank r: two ``cc.all_to_all``.

Each rank has already routed its tokens (top-1): tokens [R*C, D] holds C tokens for each
expert, the block of rows j*C .. (j+1)*C going to expert j (unused slots are zero padding, as
with a fixed expert capacity C), and gates [R*C, 1] holds each token's router weight. Then:

  1. dispatch: ``cc.all_to_all`` sends block j to rank j; rank r receives [R*C, D] whose
     block s is the C tokens that rank s routed to expert r;
  2. expert: rank r applies its own weights, relu(tokens @ W_r) with W_r [D, F]: the received
     tokens are transposed on the Tensor Engine (features onto partitions) and multiplied by
     W_r in one ``nc_matmul``;
  3. combine: a second ``cc.all_to_all`` sends each block back to the rank it came from, which
     now holds, in block j, expert j's outputs for its own tokens, in their original order;
  4. each output row is scaled by its token's gate (``tensor_scalar`` with a [rows, 1] operand).

Run it: ``PYTHONPATH=python python3 examples/kernels/python/collectives/moe_dispatch.py``.
"""
import numpy as np

import knit
import knit.collectives as cc
import knit.isa as nisa
import knit.language as nl


@knit.jit
def moe_kernel(tokens, gates, expert_w, n_ranks):
    """tokens: [R*C, D], block j for expert j; gates: [R*C, 1]; expert_w: [D, F], this rank's
    expert. R*C <= 128, D <= 128, F <= 512. n_ranks: the number of ranks R. Returns [R*C, F]:
    row i is gates[i] * relu(tokens[i] @ W_j), j the expert of row i's block."""
    N, D = tokens.shape
    F = expert_w.shape[1]
    P = nl.tile_size.pmax
    assert N % n_ranks == 0, "tokens holds one block of C rows per rank"
    assert gates.shape == (N, 1) and expert_w.shape[0] == D
    assert N <= P and D <= P and F <= nl.tile_size.gemm_moving_fmax
    group = cc.ReplicaGroup([list(range(n_ranks))])

    # 1. Dispatch: block j of every rank goes to rank j.
    send = nl.ndarray((N, D), dtype=tokens.dtype, buffer=nl.shared_hbm, name="moe_send")
    received = nl.ndarray((N, D), dtype=tokens.dtype, buffer=nl.shared_hbm, name="moe_received")
    nisa.dma_copy(dst=send, src=tokens)
    cc.all_to_all([send], [received], group, 0)

    # 2. This rank's expert on every token it received: relu(received @ W_r).
    rows = nl.ndarray((N, D), dtype=tokens.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=rows, src=received)
    rows_t_psum = nl.ndarray((D, N), dtype=tokens.dtype, buffer=nl.psum)
    nisa.nc_transpose(dst=rows_t_psum, data=rows)
    rows_t = nl.ndarray((D, N), dtype=tokens.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=rows_t, src=rows_t_psum)
    w_tile = nl.ndarray((D, F), dtype=expert_w.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=w_tile, src=expert_w)
    y_psum = nl.ndarray((N, F), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=y_psum, stationary=rows_t, moving=w_tile)
    y_tile = nl.ndarray((N, F), dtype=tokens.dtype, buffer=nl.sbuf)
    nisa.activation(dst=y_tile, op=nl.relu, data=y_psum)

    # 3. Combine: block s of the expert's output goes back to rank s.
    expert_out = nl.ndarray((N, F), dtype=tokens.dtype, buffer=nl.shared_hbm, name="moe_expert_out")
    returned = nl.ndarray((N, F), dtype=tokens.dtype, buffer=nl.shared_hbm, name="moe_returned")
    nisa.dma_copy(dst=expert_out, src=y_tile)
    cc.all_to_all([expert_out], [returned], group, 0)

    # 4. Scale each token's output by its gate.
    back = nl.ndarray((N, F), dtype=tokens.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=back, src=returned)
    gate_tile = nl.ndarray((N, 1), dtype=gates.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=gate_tile, src=gates)
    out_tile = nl.ndarray((N, F), dtype=tokens.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=out_tile, data=back, op0=nl.multiply, operand0=gate_tile)
    out = nl.ndarray((N, F), dtype=tokens.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=out_tile)
    return out


def route(x, logits, capacity):
    """Top-1 routing on the host: x [T, D] and router logits [T, R] -> (tokens [R*C, D] with
    the tokens of expert j in block j, zero-padded to C rows, gates [R*C, 1] (the softmax weight
    of the chosen expert), slots [T]: the row of each token in tokens, or -1 if its expert was
    full)."""
    n_experts = logits.shape[1]
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    choice = probs.argmax(axis=1)
    tokens = np.zeros((n_experts * capacity, x.shape[1]), np.float32)
    gates = np.zeros((n_experts * capacity, 1), np.float32)
    slots = np.full(len(x), -1)
    filled = [0] * n_experts
    for t, j in enumerate(choice):
        if filled[j] < capacity:
            slots[t] = j * capacity + filled[j]
            tokens[slots[t]], gates[slots[t], 0] = x[t], probs[t, j]
            filled[j] += 1
    return tokens, gates, slots


def run(tokens, gates, expert_w, n_ranks):
    """The MoE step on n_ranks simulated ranks: tokens, gates and expert_w are lists with one
    array per rank. Returns each rank's output (a list)."""
    return knit.simulate(moe_kernel, ranks=n_ranks)(tokens, gates, expert_w, n_ranks)


def reference(tokens, gates, expert_w):
    """Rank r's output from all ranks' inputs (lists), in float64: row i of block j is
    gates[r][i] * relu(tokens[r][i] @ expert_w[j])."""
    n_ranks = len(tokens)
    c = tokens[0].shape[0] // n_ranks
    outs = []
    for tok, gate in zip(tokens, gates):
        blocks = [np.maximum(np.asarray(tok[j * c:(j + 1) * c], np.float64) @ np.asarray(expert_w[j], np.float64),
                             0.0) for j in range(n_ranks)]
        outs.append(np.concatenate(blocks) * np.asarray(gate, np.float64))
    return outs


def main(n_ranks=4):
    rng = np.random.default_rng(0)
    T, D, F = 32, 64, 64
    C = 2 * T // n_ranks  # capacity factor 2: room for twice an even share of a rank's tokens
    routed = [route(rng.standard_normal((T, D)).astype(np.float32), rng.standard_normal((T, n_ranks)), C)
              for _ in range(n_ranks)]
    tokens = [tok for tok, _, _ in routed]
    gates = [gate for _, gate, _ in routed]
    expert_w = [(rng.standard_normal((D, F)) / np.sqrt(D)).astype(np.float32) for _ in range(n_ranks)]
    outs = run(tokens, gates, expert_w, n_ranks)
    error = max(float(np.max(np.abs(o - ref))) for o, ref in zip(outs, reference(tokens, gates, expert_w)))
    dropped = sum(int(np.sum(slots < 0)) for _, _, slots in routed)
    print(f"moe_dispatch on {n_ranks} ranks: {T} tokens per rank ({dropped} over capacity), max abs error {error:.3g}")


if __name__ == "__main__":
    main()
