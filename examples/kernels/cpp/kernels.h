// Example kernels written against the header-only C++ API. Each is an ordinary function of
// tensor handles; trace it with knit::trace and run it with knit::run (see demo.cpp).
#pragma once

#include <knit/knit.h>

namespace knit::examples {

// out = a + b, element-wise, for [rows, cols] tensors (rows tiled by 128).
nl::tensor tensor_add(nl::tensor a, nl::tensor b);

// out[M, N] = lhsT[K, M].T @ rhs[K, N]; K, M multiples of 128, N a multiple of 512.
// Accumulates over K in fp32 PSUM; out has rhs's dtype.
nl::tensor matmul(nl::tensor lhsT, nl::tensor rhs);

// Row softmax of a [rows, cols] tensor: exp(x - max) / sum(exp(x - max)) along cols.
nl::tensor softmax(nl::tensor x);

// RMSNorm: out = x / sqrt(mean(x^2, cols) + 1e-6) * w, for x [rows, cols] and w [cols].
nl::tensor rmsnorm(nl::tensor x, nl::tensor w);

// out[N, M] = x[M, N].T via the Tensor Engine, 128x128 tiles (M, N multiples of 128).
nl::tensor transpose(nl::tensor x);

// Embedding lookup: out[r, :] = table[ids[r], :] for table [vocab, dim] and int32 ids [n].
// Gathers 128 rows per indirect DMA (vector_offset) in a device loop.
nl::tensor gather_rows(nl::tensor table, nl::tensor ids);

}  // namespace knit::examples
