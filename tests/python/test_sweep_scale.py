"""A sweep of 216 configurations of the blocked matmul on a real multi-node Ray cluster (a head
node and a second worker node, separate raylet processes on this machine, started by Ray's own
ray.cluster_utils.Cluster and stopped at the end; reached through KNIT_RAY_ADDRESS like any
cluster) equals the process pool's sweep, and a sample of it equals the in-process sweep
(docs/sweep.md, "Determinism"; throughput in docs/performance.md)."""
import os
import sys
import time

import pytest

import knit
import knit.typing as nt

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
STAGES_DIR = os.path.join(REPO, "examples", "kernels", "python", "matmul")
sys.path.insert(0, STAGES_DIR)
import stages  # noqa: E402

# 6 x 3 x 6 block sizes (tiles_m=3 and tiles_k=3 do not divide: assert failures) x 2 shapes (K x M x N).
SPACE = {"shape": ["1024x1024x2048", "2048x1024x1024"], "tiles_m": [1, 2, 3, 4, 8, 16], "tiles_n": [1, 2, 4],
         "tiles_k": [1, 2, 3, 4, 8, 16]}


def inputs(config):
    k, m, n = (int(d) for d in config["shape"].split("x"))
    return nt.tensor[[k, m], "bfloat16"], nt.tensor[[k, n], "bfloat16"]


@pytest.fixture(scope="module")
def two_node_cluster():
    pytest.importorskip("ray", reason="Ray is optional (pip install 'knit[ray]'); ./dev installs it")
    from ray.cluster_utils import Cluster

    before = os.environ.get("PYTHONPATH")
    # The nodes' workers inherit this environment: Knit from this checkout.
    os.environ["PYTHONPATH"] = os.pathsep.join([os.path.join(REPO, "python")] + ([before] if before else []))
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        yield cluster
    finally:
        import ray

        ray.shutdown()
        cluster.shutdown()  # stops the processes it started, and only those
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before


def timed_sweep(space, executor):
    start = time.perf_counter()
    result = knit.sweep(stages.blocked_mnk, space, inputs, target="trn2", executor=executor)
    return result, time.perf_counter() - start


@pytest.mark.slow
def test_a_216_point_sweep_on_a_two_node_ray_cluster_equals_the_pool_and_inline(two_node_cluster, monkeypatch):
    import ray

    monkeypatch.setenv("KNIT_RAY_ADDRESS", two_node_cluster.address)
    on_ray, ray_s = timed_sweep(SPACE, None)  # no executor named: KNIT_RAY_ADDRESS sends it to the cluster
    assert on_ray.executor == "ray" and len(on_ray.points) == 216
    assert len([n for n in ray.nodes() if n["Alive"]]) == 2
    monkeypatch.delenv("KNIT_RAY_ADDRESS")
    pooled, pool_s = timed_sweep(SPACE, "process")
    assert [p.measured() for p in on_ray.points] == [p.measured() for p in pooled.points]
    sample = [p.config for p in on_ray.points[::9]]
    inline, inline_s = timed_sweep(sample, "inline")
    assert [same(p) for p in inline.points] == [same(p) for p in on_ray.points[::9]]
    for p in on_ray.points:  # the kernel's assert fails exactly where a block does not divide its matrix
        if blocks_divide(p.config):
            assert p.ok or "[capacity]" in p.error, p.error  # else only a block too large for SBUF fails
        else:
            assert "AssertionError: assert M % BM == 0" in p.error
    assert 0 < len(on_ray.failures) < 216
    print(f"\n216 points: ray {216 / ray_s:.1f}/s, pool {216 / pool_s:.1f}/s; "
          f"{len(sample)} points inline {len(sample) / inline_s:.1f}/s")


def same(point):
    """What must agree between sweeps of different spaces: all but the index and wall times."""
    return {k: v for k, v in point.measured().items() if k != "index"}


def blocks_divide(config):
    k, m, n = (int(d) for d in config["shape"].split("x"))
    return m % (config["tiles_m"] * 128) == 0 and n % (config["tiles_n"] * 512) == 0 and \
        k % (config["tiles_k"] * 128) == 0
