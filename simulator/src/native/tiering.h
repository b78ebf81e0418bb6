// When compiling a kernel's instruction bodies pays for itself (NativeExecutor::start, docs/jit.md
// "When the JIT compiles"): the reference executors run each element of work about 11 ns slower
// than a compiled body, and building a body costs milliseconds, so a kernel compiles once the
// work it does (with the work of earlier runs of the same shapes in this process) would have
// paid for building the bodies it needs that are neither compiled yet nor in the disk cache.
#pragma once

#include <cstdint>

#include "knit/jit/specializer.h"

namespace knit::sim::native {

// Calibrated on a 2-core AMD EPYC VM (docs/performance.md, "When the JIT compiles"): the
// reference executors' time per element of static work less the native bodies' (7.6-13.1 ns
// over the example kernels, of which the bodies take 0.18-1.30), one body built by LLVM (CPU time;
// the builds of a batch run on the compiling threads side by side), the setup of a batch that
// builds anything, and loading one module from the disk cache.
constexpr double kSavedNsPerElement = 11.0;
constexpr double kBuildNsPerBody = 9.0e6;
constexpr double kBuildNsPerMatmulBody = 40.0e6;  // knit_matmul_body: blocked GEMM loops, more code
constexpr double kBuildSetupNs = 10.0e6;
constexpr double kLoadNsPerModule = 2.0e6;

// The elements of work whose interpreting costs as much as getting `pending` ready (of the
// kernel's `requests`, `dynamic_bodies` more to build on first use), when `threads` compile.
int64_t break_even_work(const std::vector<codegen::SpecializeRequest>& requests,
                        const codegen::Specializer::Pending& pending, int64_t dynamic_bodies, int threads);

// The process's ledger of work the reference executors did for kernels below the break-even,
// by a key of the kernel's static shapes: repeated runs of one small kernel add up, and once
// they would have paid for compiling it, the next run compiles.
int64_t interpreted_work(uint64_t shapes_key);
void add_interpreted_work(uint64_t shapes_key, int64_t work);

}  // namespace knit::sim::native
