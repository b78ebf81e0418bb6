#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <cstdlib>

// The suite checks the native path on small kernels, which would otherwise stay on the reference
// executors (below the JIT's break-even, docs/jit.md): compile every kernel.
static const bool kJitEveryKernel = (setenv("KNIT_JIT_THRESHOLD", "0", /*overwrite=*/0), true);
