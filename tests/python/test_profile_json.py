"""Profile.summary_json: neuron-profile's summary names over the simulated run, checked against
byte counts and FLOPs computed by hand from the matmul example's loop structure."""
import os
import sys

import numpy as np
import pytest

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
    # The PSUM evictions leave their engine open: VectorE or, from trn2, ScalarE; never GpSimd,
    # which cannot read PSUM.
    assert s["gpsimd_engine_active_time_percent"] == 0
    assert s["vector_engine_active_time_percent"] + s["scalar_engine_active_time_percent"] > 0
    np.testing.assert_array_equal(prof.outputs, np.full((M, N), K, np.float32))


# The per-core HBM bandwidth (GB/s) and bf16 peak (TFLOPS) of docs/simulator.md's machine table.
HBM_GBPS = {"trn1": 410, "trn2": 362, "trn3": 612}


def test_summary_json_mbu_is_hbm_bytes_over_the_core_bandwidth_for_the_run():
    K, M, N = 256, 128, 512
    a = np.ones((K, M), np.float32)
    b = np.ones((K, N), np.float32)
    for target, gbps in HBM_GBPS.items():
        prof = knit.profile(matmul_kernel, a, b, target=target)
        s = prof.summary_json()
        hbm_bytes = (K * M + K * N) * 4 + M * N * 4  # each input tile read once (one m, n tile), out written once
        assert s["hbm_read_bytes"] + s["hbm_write_bytes"] == hbm_bytes
        expected = 100 * hbm_bytes / (gbps * prof.total_ns)  # GB/s = bytes/ns
        assert s["mbu_estimated_percent"] == pytest.approx(expected, rel=1e-12)
        assert s["hbm_mbu_estimated_percent"] == s["mbu_estimated_percent"]
        assert s["dma_transfer_total_bytes"] == prof.dma_bytes >= hbm_bytes
    # hw-model.md: the profiler's peak_flops_bandwidth_ratio on NC-v2 is 91.75 TFLOPS / 410 GB/s = 223.78.
    prof = knit.profile(matmul_kernel, a, b, target="trn1")
    assert round(prof.summary_json()["peak_flops_bandwidth_ratio"], 2) == 223.78
