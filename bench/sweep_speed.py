"""knit.sweep's points per second on each executor, in one run (docs/sweep.md, "Speed").

    PYTHONPATH=python python3 bench/sweep_speed.py [--no-ray]

The space: the blocked_mnk matmul of examples/kernels/python/matmul/stages.py, tiles_m x tiles_n
x tiles_k = 5 x 3 x 4 block sizes at two bf16 shapes, 4096^3 and the NKI matmul tutorial's
[8192, 4096] x [8192, 8192] (120 points; blocks too large for SBUF fail the verifier's capacity
check: points with their error). The disk cache is off (KNIT_CACHE=0), so every executor traces,
lowers and simulates every point. Each row's wall time includes starting its pool (a fresh
interpreter per worker importing Knit); Ray's cluster start is measured separately. The points of
every executor are checked equal to the inline ones. The output is also written to
bench/results/ (bench/record.py).
"""
import argparse
import concurrent.futures
import multiprocessing
import os
import time

os.environ["KNIT_CACHE"] = "0"  # before Knit starts: every point is traced and lowered afresh
os.environ.setdefault("KNIT_PROGRESS", "0")

import record  # noqa: E402  (bench/record.py: the measured checkout, the results file)

record.use_tree(os.path.join("examples", "kernels", "python", "matmul"))

import stages  # noqa: E402

import knit  # noqa: E402
import knit.typing as nt  # noqa: E402

# shape: K x M x N (lhsT [K, M], rhs [K, N]); 8192x4096x8192 is the NKI matmul tutorial's.
SPACE = {"shape": ["4096x4096x4096", "8192x4096x8192"], "tiles_m": [2, 4, 8, 16, 32], "tiles_n": [1, 2, 4],
         "tiles_k": [2, 4, 8, 16]}


def inputs(config):
    k, m, n = (int(d) for d in config["shape"].split("x"))
    return nt.tensor[[k, m], "bfloat16"], nt.tensor[[k, n], "bfloat16"]


def timed(label, executor, reference=None):
    start = time.perf_counter()
    result = knit.sweep(stages.blocked_mnk, SPACE, inputs, target="trn2", executor=executor)
    wall = time.perf_counter() - start
    same = "" if reference is None else (
        "same points" if [p.measured() for p in result.points] == [p.measured() for p in reference.points]
        else "DIFFERENT POINTS")
    n = len(result.points)
    print(f"{label:<28}{n:>7}{len(result.failures):>8}{wall:>9.2f}{n / wall:>10.1f}  {same}", flush=True)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray rows")
    args = parser.parse_args()
    with record.recorded("sweep_speed"):
        run(args.no_ray)


def run(no_ray):
    cores = os.cpu_count() or 1
    print(f"blocked_mnk sweep, {cores} cores, KNIT_CACHE=0, load average {os.getloadavg()[0]:.1f} at the start")
    print(f"{'executor':<28}{'points':>7}{'failed':>8}{'wall s':>9}{'points/s':>10}")
    inline = timed("inline", "inline")
    spawn = multiprocessing.get_context("spawn")
    for workers in sorted({1, cores}):
        with concurrent.futures.ProcessPoolExecutor(workers, mp_context=spawn) as pool:
            timed(f"process pool, {workers} worker(s)", pool, inline)
    timed(f"process (default, {cores})", "process", inline)
    if no_ray:
        return
    try:
        import ray
    except ImportError:
        print("ray: not installed (pip install ray)")
        return
    # The workers import the measured checkout's knit and stages.py.
    os.environ["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(knit.__file__)),
                                                os.path.dirname(stages.__file__)])
    start = time.perf_counter()
    ray.init(num_cpus=cores, include_dashboard=False, log_to_driver=False)
    print(f"(ray.init of a local {cores}-CPU cluster: {time.perf_counter() - start:.1f} s, not counted)")
    timed(f"ray, local, {cores} CPUs", "ray", inline)
    timed("ray again (warm workers)", "ray", inline)
    ray.shutdown()
    two_nodes(inline)


def two_nodes(inline):
    """A head node and a worker node of 1 CPU each (separate raylets, as on two machines)."""
    import ray
    from ray.cluster_utils import Cluster

    start = time.perf_counter()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        os.environ["KNIT_RAY_ADDRESS"] = cluster.address
        print(f"(a 2-node cluster, 1 CPU each: {time.perf_counter() - start:.1f} s to start, not counted)")
        timed("ray, 2 nodes x 1 CPU", "ray", inline)
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()
