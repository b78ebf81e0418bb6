"""Four public-benchmark kernel patterns (LoRA, SwiGLU, GQA attention, batched softmax), written
the straightforward way an NKI author writes them, for tests/python/test_psum_pressure.py. Each
factory takes `dynamic`: the outer row loop is an on-device loop (nl.dynamic_range: one traced
body, so realistic shapes compile quickly) or unrolled (nl.affine_range). Operands arrive
pre-transposed where the Tensor Engine wants the contraction dim on partitions (xT is [K, M]).
"""
import knit
import knit.isa as nisa
import knit.language as nl

P = 128  # partitions
BANK_N = 512  # fp32 elements of one PSUM bank per partition


def _rows(count, dynamic):
    return nl.dynamic_range(count) if dynamic else nl.affine_range(count)


def _rows_of(m, size=P):
    """Row slice of block m (a register in a dynamic loop)."""
    return nl.ds(m * size, size)


def _load(src, shape, dtype=nl.float32):
    t = nl.ndarray(shape, dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=src)
    return t


def _store_from_psum(dst, acc, shape):
    o = nl.ndarray(shape, nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=o, src=acc)
    nisa.dma_copy(dst=dst, src=o)


def lora(dynamic):
    """out[M, N] = x @ W + (x @ A) @ B, x given as xT [K, M]; A [K, R], B [R, N], R <= 128."""

    def lora_kernel(xT, w, a, b):
        K, M = xT.shape
        N, R = w.shape[1], a.shape[1]
        out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
        for m in _rows(M // P, dynamic):
            xs = [_load(xT[k * P:(k + 1) * P, _rows_of(m)], (P, P)) for k in range(K // P)]
            xaT_ps = nl.ndarray((R, P), nl.float32, buffer=nl.psum)  # (x @ A).T for this row block
            for k in range(K // P):
                nisa.nc_matmul(dst=xaT_ps, stationary=_load(a[k * P:(k + 1) * P, :], (P, R)), moving=xs[k],
                               accumulate=k > 0)
            xaT = nl.ndarray((R, P), nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=xaT, src=xaT_ps)
            for n in range(N // BANK_N):
                cols = slice(n * BANK_N, (n + 1) * BANK_N)
                acc = nl.ndarray((P, BANK_N), nl.float32, buffer=nl.psum)
                for k in range(K // P):
                    nisa.nc_matmul(dst=acc, stationary=xs[k], moving=_load(w[k * P:(k + 1) * P, cols], (P, BANK_N)),
                                   accumulate=k > 0)
                nisa.nc_matmul(dst=acc, stationary=xaT, moving=_load(b[:, cols], (R, BANK_N)), accumulate=True)
                _store_from_psum(out[_rows_of(m), cols], acc, (P, BANK_N))
        return out

    return knit.jit(lora_kernel)


def swiglu(dynamic):
    """out[M, K] = (silu(x @ Wg) * (x @ Wu)) @ Wd, x given as xT [K, M]; Wg, Wu [K, F], Wd [F, K].
    The hidden activations are made transposed (hT [F, M], 128 x 128 blocks) to feed the down
    projection as its stationary operand."""

    def swiglu_kernel(xT, wg, wu, wd):
        K, M = xT.shape
        F = wg.shape[1]
        out = nl.ndarray((M, K), nl.float32, buffer=nl.shared_hbm)
        for m in _rows(M // P, dynamic):
            xs = [_load(xT[k * P:(k + 1) * P, _rows_of(m)], (P, P)) for k in range(K // P)]
            hT = []
            for f in range(F // P):
                fc = slice(f * P, (f + 1) * P)
                g_ps = nl.ndarray((P, P), nl.float32, buffer=nl.psum)
                u_ps = nl.ndarray((P, P), nl.float32, buffer=nl.psum)
                for k in range(K // P):
                    kr = slice(k * P, (k + 1) * P)
                    nisa.nc_matmul(dst=g_ps, stationary=_load(wg[kr, fc], (P, P)), moving=xs[k], accumulate=k > 0)
                    nisa.nc_matmul(dst=u_ps, stationary=_load(wu[kr, fc], (P, P)), moving=xs[k], accumulate=k > 0)
                g = nl.ndarray((P, P), nl.float32, buffer=nl.sbuf)
                nisa.activation(dst=g, op=nl.silu, data=g_ps)
                h = nl.ndarray((P, P), nl.float32, buffer=nl.sbuf)
                nisa.tensor_tensor(dst=h, data1=g, data2=u_ps, op=nl.multiply)
                hT.append(h)
            for j in range(K // BANK_N):
                cols = slice(j * BANK_N, (j + 1) * BANK_N)
                acc = nl.ndarray((P, BANK_N), nl.float32, buffer=nl.psum)
                for f in range(F // P):
                    nisa.nc_matmul(dst=acc, stationary=hT[f], moving=_load(wd[f * P:(f + 1) * P, cols], (P, BANK_N)),
                                   accumulate=f > 0)
                _store_from_psum(out[_rows_of(m), cols], acc, (P, BANK_N))
        return out

    return knit.jit(swiglu_kernel)


def _softmax_rows(score_tiles, n_keys):
    """exp(s - rowmax) for score tiles [P, 512] in PSUM (all live until the max is known), their
    row sums, in SBUF: returns (probability tiles unnormalized, 1 / row sum)."""
    maxes = nl.ndarray((P, len(score_tiles)), nl.float32, buffer=nl.sbuf)
    for c, s in enumerate(score_tiles):
        nisa.tensor_reduce(dst=maxes[:, c:c + 1], op=nl.maximum, data=s, axis=1)
    neg_max = nl.ndarray((P, 1), nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=maxes, axis=1, negate=True)
    sums = nl.ndarray((P, len(score_tiles)), nl.float32, buffer=nl.sbuf)
    probs = []
    for c, s in enumerate(score_tiles):
        p = nl.ndarray((P, BANK_N), nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=p, op=nl.exp, data=s, bias=neg_max)
        nisa.tensor_reduce(dst=sums[:, c:c + 1], op=nl.add, data=p, axis=1)
        probs.append(p)
    total = nl.ndarray((P, 1), nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=total, op=nl.add, data=sums, axis=1)
    inv = nl.ndarray((P, 1), nl.float32, buffer=nl.sbuf)
    nisa.reciprocal(dst=inv, data=total)
    return probs, inv


def batched_softmax(dynamic):
    """out[b] = softmax(A[b] @ B[b]) over its last dim; A given as aT [Bt, K, M], B [Bt, K, N],
    K <= 128, N a multiple of 512: every score tile of a row block stays in PSUM until the row
    max is known."""

    def bmm_softmax_kernel(aT, b):
        Bt, K, M = aT.shape
        N = b.shape[2]
        out = nl.ndarray((Bt, M, N), nl.float32, buffer=nl.shared_hbm)
        for i in range(Bt):
            bs = [_load(b[i, :, c * BANK_N:(c + 1) * BANK_N], (K, BANK_N)) for c in range(N // BANK_N)]
            for m in _rows(M // P, dynamic):
                at = _load(aT[i, :, _rows_of(m)], (K, P))
                scores = []
                for c in range(N // BANK_N):
                    s = nl.ndarray((P, BANK_N), nl.float32, buffer=nl.psum)
                    nisa.nc_matmul(dst=s, stationary=at, moving=bs[c], accumulate=False)
                    scores.append(s)
                probs, inv = _softmax_rows(scores, N)
                for c, p in enumerate(probs):
                    o = nl.ndarray((P, BANK_N), nl.float32, buffer=nl.sbuf)
                    nisa.tensor_scalar(dst=o, data=p, op0=nl.multiply, operand0=inv)
                    nisa.dma_copy(dst=out[i, _rows_of(m), c * BANK_N:(c + 1) * BANK_N], src=o)
        return out

    return knit.jit(bmm_softmax_kernel)


def gqa(dynamic):
    """Grouped-query attention, one batch: out[h] = softmax(q[h] @ k[g].T / sqrt(D)) @ v[g] with
    g = h // (QH // KH). q given as qT [QH, D, S], k as kT [KH, D, S], v [KH, S, D]; D = 128, S a
    multiple of 512. Scores of a 128-query block stay in PSUM until the row max is known; the
    probabilities are transposed on the Tensor Engine (into PSUM) to multiply V."""

    def gqa_kernel(qT, kT, v):
        QH, D, S = qT.shape
        KH = kT.shape[0]
        out = nl.ndarray((QH, S, D), nl.float32, buffer=nl.shared_hbm)
        for h in range(QH):
            g = h // (QH // KH)
            ks = [_load(kT[g, :, c * BANK_N:(c + 1) * BANK_N], (D, BANK_N)) for c in range(S // BANK_N)]
            vs = [_load(v[g, j * P:(j + 1) * P, :], (P, D)) for j in range(S // P)]
            for m in _rows(S // P, dynamic):
                qt = nl.ndarray((D, P), nl.float32, buffer=nl.sbuf)
                nisa.tensor_scalar(dst=qt, data=_load(qT[h, :, _rows_of(m)], (D, P)), op0=nl.multiply,
                                   operand0=D ** -0.5)
                scores = []
                for c in range(S // BANK_N):
                    s = nl.ndarray((P, BANK_N), nl.float32, buffer=nl.psum)
                    nisa.nc_matmul(dst=s, stationary=qt, moving=ks[c], accumulate=False)
                    scores.append(s)
                probs, inv = _softmax_rows(scores, S)
                acc = nl.ndarray((P, D), nl.float32, buffer=nl.psum)
                for j in range(S // P):
                    pT_ps = nl.ndarray((P, P), nl.float32, buffer=nl.psum)
                    p = probs[j * P // BANK_N]
                    col = j * P % BANK_N
                    nisa.nc_transpose(dst=pT_ps, data=p[:, col:col + P])
                    pT = nl.ndarray((P, P), nl.float32, buffer=nl.sbuf)
                    nisa.tensor_copy(dst=pT, src=pT_ps)
                    nisa.nc_matmul(dst=acc, stationary=pT, moving=vs[j], accumulate=j > 0)
                o = nl.ndarray((P, D), nl.float32, buffer=nl.sbuf)
                nisa.tensor_scalar(dst=o, data=acc, op0=nl.multiply, operand0=inv)
                nisa.dma_copy(dst=out[h, _rows_of(m), :], src=o)
        return out

    return knit.jit(gqa_kernel)


def batched_softmax_phases():
    """The batched softmax benchmark as its published NKI kernel is laid out (legacy API, block
    tensors, loops unrolled): out[b] = softmax(A[b] @ B[b]) over its last dim, A given as
    aT [Bt, K, M]. Every score tile of a batch ([M / 128, N / 512] blocks of [128, 512]) is
    copied to one SBUF block tensor in phase 1 (row maxima), exponentiated in place in phase 2
    (row sums) and normalized in phase 3: M * N * 4 / 128 bytes per partition are live from
    phase 1 to phase 3 (512 KiB at M = N = 4096), more than SBUF holds."""
    import numpy as np

    import knit.legacy as legacy
    import knit.legacy.isa as lnisa
    import knit.legacy.language as lnl

    def bmm_softmax_phases(aT, b):
        Bt, K, M = aT.shape
        N = b.shape[2]
        rows, cols = M // P, N // BANK_N
        out = lnl.ndarray((Bt, M, N), dtype=np.float32, buffer=lnl.shared_hbm)
        for i in lnl.affine_range(Bt):
            scores = lnl.ndarray((rows, cols, lnl.par_dim(P), BANK_N), dtype=np.float32, buffer=lnl.sbuf)
            bs = [lnl.load(b[i, :, c * BANK_N:(c + 1) * BANK_N]) for c in range(cols)]
            neg_max = []
            for m in lnl.affine_range(rows):
                at = lnl.load(aT[i, :, m * P:(m + 1) * P])
                row_max = None
                for c in lnl.affine_range(cols):
                    scores[m, c] = lnl.copy(lnisa.nc_matmul(at, bs[c]))
                    cm = lnl.max(scores[m, c], axis=1)
                    row_max = cm if row_max is None else lnl.maximum(row_max, cm)
                neg_max.append(lnl.negative(row_max))
            inv = []
            for m in lnl.affine_range(rows):
                total = None
                for c in lnl.affine_range(cols):
                    scores[m, c] = lnl.exp(lnl.add(scores[m, c], neg_max[m]))
                    s = lnl.sum(scores[m, c], axis=1)
                    total = s if total is None else lnl.add(total, s)
                inv.append(lnl.reciprocal(total))
            for m in lnl.affine_range(rows):
                for c in lnl.affine_range(cols):
                    lnl.store(out[i, m * P:(m + 1) * P, c * BANK_N:(c + 1) * BANK_N],
                              value=lnl.multiply(scores[m, c], inv[m]))
        return out

    return legacy.jit(bmm_softmax_phases)
