"""Profile.summary_json: neuron-profile's summary names over the simulated run, checked against
byte counts and FLOPs computed by hand from the matmul example's loop structure."""
import os
import sys

import numpy as np

import knit

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "kernels", "python"))
from matmul import matmul_kernel  # noqa: E402


def test_summary_json_counts_hbm_traffic_and_flops():
    K, M, N = 384, 256, 1024
    a = np.ones((K, M), np.float32)
    b = np.ones((K, N), np.float32)
    prof = knit.profile(matmul_kernel, a, b, target="trn2")
    s = prof.summary_json()
    tiles_m, tiles_n, tiles_k = M // 128, N // 512, K // 128
    # Every (m, n, k) loads a [128, 128] lhsT tile and a [128, 512] rhs tile; every (m, n) stores [128, 512].
    reads = tiles_m * tiles_n * tiles_k * (128 * 128 + 128 * 512) * 4
    writes = M * N * 4
    assert s["hbm_read_bytes"] == reads and s["hbm_write_bytes"] == writes
    assert s["hardware_flops"] == 2.0 * K * M * N
    assert s["total_time"] == prof.total_ns / 1e9
    for key in ("hfu_estimated_percent", "mfu_estimated_percent", "tensor_engine_active_time_percent",
                "dma_active_time_percent"):
        assert 0 < s[key] <= 100, key
    assert s["scalar_engine_active_time_percent"] == 0 and s["gpsimd_engine_active_time_percent"] == 0
    np.testing.assert_array_equal(prof.outputs, np.full((M, N), K, np.float32))
