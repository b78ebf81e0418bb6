"""Schedule a tiled matmul onto a NeuronCore model and time it.

Prints the start of the engine program (which queue runs each instruction, its semaphore waits
and concrete SBUF/PSUM addresses), its statistics, then the simulated profile on trn2 with real
data (checked against NumPy) and a timing-only benchmark at a large shape from placeholders.
Writes a Perfetto trace to /tmp/knit_matmul_trace.json (open it in ui.perfetto.dev).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import knit  # noqa: E402
import knit.language as nl  # noqa: E402
import knit.typing as nt  # noqa: E402
from matmul import matmul_kernel  # noqa: E402

rng = np.random.default_rng(0)
lhsT = rng.standard_normal((512, 256)).astype(np.float32)
rhs = rng.standard_normal((512, 1024)).astype(np.float32)

compiled = knit.compile(matmul_kernel, lhsT, rhs, target="trn2")
print("\n".join(compiled.asm.splitlines()[:14]))
print("...\n" + compiled.stats["summary"])

prof = knit.profile(matmul_kernel, lhsT, rhs, target="trn2")
assert np.allclose(prof.outputs, lhsT.T @ rhs, rtol=1e-4, atol=1e-3)
print(prof.summary())
print("trace:", prof.save_trace("/tmp/knit_matmul_trace.json"))

bench = knit.benchmark(matmul_kernel, nt.tensor[[4096, 2048], nl.bfloat16], nt.tensor[[4096, 2048], nl.bfloat16],
                       target="trn2")
print(f"timing-only [4096,2048]^T @ [4096,2048] bf16 on trn2: p50 = "
      f"{bench.benchmark_result.nc_latency.get_latency_percentile(50):.1f} us")
