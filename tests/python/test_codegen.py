"""The codegen backend: knit.compile(...) lowers a kernel's IR to an engine program (verify ->
legalize -> allocate -> engines -> dependences -> synchronize) that the simulator runs with its
queues interleaved in program order, round robin or at random.

Every check compares against something computed independently of the engine program: the IR on
the reference interpreter (byte for byte), the example's own NumPy ``reference()``, NumPy, the
kernel's loop structure (instruction and byte counts worked out by hand below) or the documented
binary layout of an engine program.
"""
import functools
import glob
import os
import re
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes")

import knit  # noqa: E402  (tests/python/conftest.py puts python/ on sys.path)
import knit.isa as nisa  # noqa: E402
import knit.language as nl  # noqa: E402
from kernel_test_util import load_example, randn, source_line  # noqa: E402
from knit import _core  # noqa: E402
from knit.errors import KnitError  # noqa: E402

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_EXAMPLES = os.path.join(_REPO, "examples", "kernels", "python")
BF16 = np.dtype(ml_dtypes.bfloat16)

TARGETS = ["trn1", "trn2", "trn3"]
# SBUF bytes per partition (24 / 28 / 32 MiB over 128 partitions) and PSUM (8 banks x 2 KiB),
# docs/architecture.md, "Memory model".
SBUF_BYTES = {"trn1": 192 * 1024, "trn2": 224 * 1024, "trn3": 256 * 1024}
PSUM_BYTES = 16 * 1024
PSUM_BANK = 2048
QUEUES = ["pe", "act", "dve", "pool", "dma0", "dma1", "dma2", "dma3"]
DMA_QUEUES = QUEUES[4:]
# Every interleaving the simulator offers; "random" with three seeds.
SCHEDULES = [("program_order", 0), ("round_robin", 0), ("random", 1), ("random", 2), ("random", 3)]


# ---- shared helpers ---------------------------------------------------------------------------


def raw(a):
    """The bytes of an array (or each array of a tuple) for byte-identical comparisons."""
    if isinstance(a, tuple):
        return tuple(raw(x) for x in a)
    return np.ascontiguousarray(a).view(np.uint8).tobytes()


def hosts(compiled, arrays):
    """Arguments for EngineProgram.run: (dtype, shape, bytes) per tensor parameter."""
    specs = compiled.core.param_specs()
    return [(dt, list(a.shape), np.ascontiguousarray(a).tobytes()) for (dt, _), a in zip(specs, arrays)]


def run_program(program, compiled, arrays, schedule="random", seed=0, check_races=True):
    """Runs an EngineProgram directly; returns the raw bytes of each output."""
    outs, _, _, _ = program.run(hosts(compiled, arrays), "error", schedule, seed, check_races)
    return tuple(r for _, _, r in outs)


def assert_schedules_match_reference(compiled, inputs):
    """Every schedule gives exactly the reference interpreter's output; returns that output."""
    want = compiled.reference(*inputs)
    for schedule, seed in SCHEDULES:
        got = compiled.run(*inputs, schedule=schedule, seed=seed)
        assert raw(got) == raw(want), f"{schedule} (seed {seed}) differs from the reference interpreter"
    assert raw(compiled(*inputs)) == raw(want)  # the default (round robin)
    return want


# Disassembly: "region N: body [b, e)", then per instruction "  <queue>.<pos>  [wait q>=n ...; ]<ir text>",
# operand placements (deeper indented) and "  sync     <ir text>" for the instructions between regions.
_ASM_REGION = re.compile(r"^region (\d+): body \[(\d+), (\d+)\)$")
_ASM_INSTR = re.compile(r"^  (pe|act|dve|pool|dma[0-3])\.(\d+) +(?:wait ((?:\w+>=\d+ ?)+); )?(\S.*)$")
_ASM_SYNC = re.compile(r"^  sync +(\S.*)$")


def parse_asm(asm):
    """[(region, queue, position, [(queue, count)], instruction text)] and the sync instructions."""
    instrs, syncs, region = [], [], None
    for line in asm.splitlines():
        if m := _ASM_REGION.match(line):
            region = int(m.group(1))
        elif m := _ASM_INSTR.match(line):
            waits = [(q, int(n)) for q, n in re.findall(r"(\w+)>=(\d+)", m.group(3) or "")]
            instrs.append((region, m.group(1), int(m.group(2)), waits, m.group(4)))
        elif m := _ASM_SYNC.match(line):
            syncs.append(m.group(1))
    return instrs, syncs


def ir_body(ir):
    """The body instructions of IR text, in order (no declarations, no return)."""
    lines = [line.strip() for line in ir.splitlines()[1:-1]]
    return [line for line in lines if not line.startswith(("param ", "tensor ", "return"))]


# ---- the example kernels ----------------------------------------------------------------------


def _rn(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


ALL = tuple(TARGETS)
CASES = {
    # id: (file under examples/kernels/python, kernel, inputs(rng), targets, tolerance vs reference())
    # Small shapes with a ragged last row tile where the kernel allows one; the tolerance is a
    # loose relative error against max|reference| ("mx": the example's quantization bound).
    "tensor_add": ("tensor_add.py", "tensor_add_kernel", lambda r: [_rn(r, 200, 64), _rn(r, 200, 64)], ALL, 1e-6),
    "matmul": ("matmul.py", "matmul_kernel", lambda r: [_rn(r, 256, 128), _rn(r, 256, 512)], ALL, 1e-5),
    "matmul_bf16": ("matmul.py", "matmul_kernel",
                    lambda r: [_rn(r, 256, 128, dtype=BF16), _rn(r, 256, 512, dtype=BF16)], ALL, 1e-2),
    "transpose": ("transpose.py", "transpose_kernel", lambda r: [_rn(r, 256, 128)], ALL, 0.0),
    "softmax": ("softmax.py", "softmax_kernel", lambda r: [_rn(r, 200, 256) * 4], ALL, 1e-5),
    "rmsnorm": ("rmsnorm.py", "rmsnorm_kernel", lambda r: [_rn(r, 200, 256), _rn(r, 256)], ALL, 1e-5),
    "rmsnorm_backward": ("rmsnorm_backward.py", "rmsnorm_backward_kernel",  # two outputs: (dx, dw)
                         lambda r: [_rn(r, 200, 256), _rn(r, 256), _rn(r, 200, 256)], ALL, 1e-5),
    "layernorm": ("layernorm.py", "layernorm_kernel",
                  lambda r: [_rn(r, 200, 256) * 3 + 1, _rn(r, 256), _rn(r, 256)], ALL, 1e-5),
    "attention": ("attention.py", "attention_kernel", lambda r: [_rn(r, 256, 128) for _ in range(3)], ALL, 1e-5),
    "attention_bf16": ("attention.py", "attention_kernel",  # bf16 takes the dma_transpose path
                       lambda r: [_rn(r, 256, 128, dtype=BF16) for _ in range(3)], ALL, 1e-2),
    "mx_matmul": ("mx_matmul.py", "mx_matmul_kernel",
                  lambda r: [_rn(r, 128, 64, dtype=BF16), _rn(r, 128, 128, dtype=BF16)], ("trn3",), "mx"),
    "legacy_tensor_add": ("legacy/tensor_add.py", "tensor_add_kernel",
                          lambda r: [_rn(r, 200, 64), _rn(r, 200, 64)], ALL, 1e-6),
    "legacy_matmul": ("legacy/matmul.py", "matmul_kernel", lambda r: [_rn(r, 256, 128), _rn(r, 256, 512)], ALL, 1e-5),
    "legacy_softmax": ("legacy/softmax.py", "softmax_kernel", lambda r: [_rn(r, 200, 256) * 4], ALL, 1e-5),
}
UNSUPPORTED = {"mx_matmul": "nc_matmul_mx / quantize_mx need NeuronCore gen4 (trn3)"}


SCRIPTS = {"profile_matmul.py"}  # demo scripts over the kernels (./dev demo), run by the test below


def test_every_example_file_is_covered():
    files = glob.glob(os.path.join(_EXAMPLES, "*.py")) + glob.glob(os.path.join(_EXAMPLES, "legacy", "*.py"))
    assert {os.path.relpath(f, _EXAMPLES) for f in files} - SCRIPTS == {path for path, *_ in CASES.values()}


@pytest.mark.slow
def test_profile_demo_script_runs():
    """examples/kernels/python/profile_matmul.py prints the engine program, its stats, a profile
    checked against NumPy (its own assert) and a timing-only benchmark."""
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(knit.__file__))))
    r = subprocess.run([sys.executable, os.path.join(_EXAMPLES, "profile_matmul.py")], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "# engine program of kernel 'matmul_kernel' for trn2" in r.stdout
    assert "semaphore waits:" in r.stdout and "kernel matmul_kernel on trn2" in r.stdout
    assert "p50 = " in r.stdout


@functools.cache
def compiled_case(case, target):
    """(module, Compiled, inputs, reference-interpreter output) of one example on one target."""
    path, kernel_name, make, _, _ = CASES[case]
    module = load_example(path)
    inputs = make(np.random.default_rng(0))
    compiled = knit.compile(getattr(module, kernel_name), *inputs, target=target)
    return module, compiled, inputs, compiled.reference(*inputs)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", list(CASES))
def test_example_matches_its_numpy_reference(case, target):
    """The reference interpreter's output is the example's answer (so the byte comparisons below
    do not compare garbage with garbage)."""
    if target not in CASES[case][3]:
        pytest.skip(f"{case}: {UNSUPPORTED[case]}")
    module, compiled, inputs, out = compiled_case(case, target)
    tol = CASES[case][4]
    x = [a.astype(np.float64) for a in inputs]
    wants = module.reference(*x)
    outs, wants = (out, wants) if isinstance(out, tuple) else ((out,), (wants,))
    assert len(outs) == len(wants)
    for got, want in zip(outs, wants):
        want = np.asarray(want, np.float64)
        got = np.asarray(got).astype(np.float64)
        assert got.shape == want.shape and np.all(np.isfinite(got))
        err = np.abs(got - want)
        if tol == "mx":
            assert np.all(err <= module.quantization_bound(*inputs))
        else:
            assert err.max() <= tol * np.abs(want).max(), f"max error {err.max():.3g}"


@pytest.mark.parametrize("schedule,seed", SCHEDULES)
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", list(CASES))
def test_example_engine_program_matches_reference_interpreter(case, target, schedule, seed):
    if target not in CASES[case][3]:
        pytest.skip(f"{case}: {UNSUPPORTED[case]}")
    _, compiled, inputs, want = compiled_case(case, target)
    assert compiled.program.target == target
    got = compiled.run(*inputs, schedule=schedule, seed=seed, check_races=True)
    assert raw(got) == raw(want)


@pytest.mark.parametrize("case", sorted(UNSUPPORTED))
@pytest.mark.parametrize("target", [t for t in TARGETS if t != "trn3"])
def test_skipped_targets_are_really_rejected(case, target):
    path, kernel_name, make, _, _ = CASES[case]
    kernel = getattr(load_example(path), kernel_name)
    with pytest.raises(KnitError) as info:
        knit.compile(kernel, *make(np.random.default_rng(0)), target=target).program
    assert info.value.rule == "target"


# ---- statistics (hand-counted from matmul.py's loops) ---------------------------------------------


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), BF16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("target", TARGETS)
def test_matmul_stats_match_the_loop_structure(target, dtype):
    K, M, N = 384, 256, 1024
    module = load_example("matmul.py")
    rng = np.random.default_rng(2)
    lhsT, rhs = _rn(rng, K, M, dtype=dtype), _rn(rng, K, N, dtype=dtype)
    compiled = knit.compile(module.matmul_kernel, lhsT, rhs, target=target)
    s = compiled.stats
    n_m, n_n, n_k = M // 128, N // 512, K // 128  # blocks of 128 rows, 512 columns, 128-deep chunks
    blocks, es = n_m * n_n, dtype.itemsize
    # One nc_matmul per (m, n, k); two loads per (m, n, k) and one store per (m, n).
    assert s["instructions"]["pe"] == blocks * n_k == 12
    n_dma = 2 * blocks * n_k + blocks
    assert sum(s["instructions"][q] for q in DMA_QUEUES) == n_dma == 28
    # The 24 loads round-robin over dma0-dma2; the 4 stores take dma3.
    assert [s["instructions"][q] for q in DMA_QUEUES] == [8, 8, 8, 4]
    # One PSUM eviction (tensor_copy, engine left open) per block: on VectorE, or from trn2 on
    # ScalarE too (GpSimd cannot read PSUM); trn1's ScalarE has no tensor_copy.
    assert s["instructions"]["dve"] + s["instructions"]["act"] == blocks
    assert target != "trn1" or s["instructions"]["act"] == 0
    assert s["instructions"]["pool"] == s["instructions"]["sync"] == 0
    # Loads: [128, 128] lhsT and [128, 512] rhs tiles; stores: [128, 512] result blocks.
    dma_bytes = blocks * n_k * (128 * 128 + 128 * 512) * es + blocks * 128 * 512 * es
    assert s["dma_bytes"] == dma_bytes == {4: 4980736, 2: 2490368}[es]
    assert 0 < s["semaphore_waits"] <= s["dependences"]
    # At least one lhsT, rhs and result tile at once; the fp32 accumulator fills one 2 KiB bank.
    assert (128 + 512 + 512) * es <= s["sbuf_high_water"] <= SBUF_BYTES[target]
    assert PSUM_BANK <= s["psum_high_water"] <= PSUM_BYTES and s["psum_high_water"] % PSUM_BANK == 0
    assert f"DMA bytes: {dma_bytes}" in s["summary"]
    assert f"semaphore waits: {s['semaphore_waits']} (for {s['dependences']} " in s["summary"]
    want = module.reference(lhsT, rhs)
    got = compiled.run(lhsT, rhs, schedule="random", seed=7).astype(np.float64)
    assert np.abs(got - want).max() <= (1e-5 if es == 4 else 1e-2) * np.abs(want).max()


# ---- disassembly ----------------------------------------------------------------------------------


def _matmul_program():
    module = load_example("matmul.py")
    rng = np.random.default_rng(3)
    return knit.compile(module.matmul_kernel, _rn(rng, 256, 256), _rn(rng, 256, 1024), target="trn2")


def test_asm_lists_every_instruction_once_on_its_queue():
    compiled = _matmul_program()
    instrs, syncs = parse_asm(compiled.asm)
    assert syncs == []
    body = ir_body(compiled.ir)
    assert Counter(text for *_, text in instrs) == Counter(body)
    assert [text for *_, text in instrs] == body  # listed in body order
    # Each queue's positions count up from 0; the counts are the stats'.
    per_queue = {q: [pos for _, queue, pos, _, _ in instrs if queue == q] for q in QUEUES}
    for q, positions in per_queue.items():
        assert positions == list(range(len(positions))), q
        assert len(positions) == compiled.stats["instructions"][q]
    # The queue fits the instruction; loads go round robin over dma0-dma2 in body order, stores
    # (a dst in HBM: a param or the shared_hbm output) to dma3.
    hbm = set(re.findall(r"^\s*(?:param|tensor) (%\d+) \S+ (?:hbm|shared_hbm) ", compiled.ir, re.M))
    assert hbm
    dmas = [(queue, text.split()[1].split("=")[1].split("@")[0] in hbm) for _, queue, _, _, text in instrs
            if text.startswith("dma_copy ")]
    loads = [queue for queue, store in dmas if not store]
    assert loads == [DMA_QUEUES[i % 3] for i in range(len(loads))]
    assert {queue for queue, store in dmas if store} == {"dma3"}
    for _, queue, _, _, text in instrs:
        op = text.split()[0]
        assert queue in {"nc_matmul": ("pe",), "tensor_copy": ("dve", "act")}.get(op, (queue,)), text
        assert queue.startswith("dma") == (op == "dma_copy"), text


def test_asm_names_the_kernel_source_lines():
    compiled = _matmul_program()
    path = os.path.join(_EXAMPLES, "matmul.py")
    with open(path) as f:
        source = f.read().splitlines()
    instrs, _ = parse_asm(compiled.asm)
    for *_, text in instrs:
        m = re.search(r'@ "([^"]+)":(\d+)$', text)
        assert m and os.path.samefile(m.group(1), path), text
        op = text.split()[0]
        assert f"nisa.{op}(" in source[int(m.group(2)) - 1], text  # the line that issued it
    lines = {int(m) for m in re.findall(r'matmul\.py":(\d+)', compiled.asm)}
    markers = ["nisa.dma_copy(dst=lhsT_tile", "nisa.dma_copy(dst=rhs_tile", "nisa.nc_matmul(",
               "nisa.tensor_copy(", "nisa.dma_copy(dst=result"]
    assert lines == {source_line(path, marker) for marker in markers}


def test_asm_matmul_waits_for_the_dma_loads_it_consumes():
    compiled = _matmul_program()
    instrs, _ = parse_asm(compiled.asm)
    # Happens-before from the waits alone: what each instruction knows complete when it starts.
    known, last_of_queue, by_pos = [], {}, {}
    for i, (_, queue, pos, waits, _) in enumerate(instrs):
        clock = dict(known[last_of_queue[queue]]) if queue in last_of_queue else {}
        for q, count in waits:
            for k, v in known[by_pos[(q, count - 1)]].items():
                clock[k] = max(clock.get(k, 0), v)
        clock[queue] = pos + 1
        known.append(clock)
        last_of_queue[queue] = by_pos[(queue, pos)] = i
    tensor = lambda text, operand: re.search(operand + r"=(%\d+)", text).group(1)  # noqa: E731
    matmuls = 0
    for i, (_, queue, _, waits, text) in enumerate(instrs):
        if not text.startswith("nc_matmul "):
            continue
        matmuls += 1
        assert waits, f"no wait on {text}"
        for operand in ("stationary", "moving"):
            loads = [j for j in range(i) if instrs[j][4].startswith("dma_copy ")
                     and tensor(instrs[j][4], "dst") == tensor(text, operand)]
            assert loads, operand
            _, dq, dpos, _, _ = instrs[loads[-1]]
            assert known[i].get(dq, 0) >= dpos + 1, f"{text} does not wait for its {operand} load on {dq}"
    assert matmuls == 8
    first = next(line for line in compiled.asm.splitlines() if "nc_matmul " in line)
    assert re.search(r"pe\.0 +wait dma0>=1 dma1>=1; nc_matmul ", first), first


# ---- over-subscribed SBUF -----------------------------------------------------------------------------


@knit.jit
def sbuf_hog(a, n):
    """n live [128, 20000] float32 tiles (80000 bytes per partition each), summed at the end in a
    device loop of one iteration: tiles used in a device loop are never spilled to HBM."""
    tiles = []
    for i in range(n):
        t = nl.ndarray((128, 20000), nl.float32, buffer=nl.sbuf, name=f"big{i}")  # HOG_TILE
        nisa.dma_copy(dst=t, src=a)
        tiles.append(t)

    def add_all(_):
        for t in tiles[1:]:
            nisa.tensor_tensor(dst=tiles[0], data1=tiles[0], data2=t, op=nl.add)

    nl.fori_loop(0, 1, add_all)
    out = nl.ndarray((128, 20000), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=tiles[0])
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_oversubscribed_sbuf_is_a_lowering_error_naming_the_live_tensors(target):
    tile_bytes, capacity = 20000 * 4, SBUF_BYTES[target]
    n = capacity // tile_bytes + 1  # one tile more than fits
    a = np.zeros((128, 20000), np.float32)
    line = source_line(__file__, "# HOG_TILE")
    fits = knit.compile(sbuf_hog, a, n - 1, target=target)  # one fewer fits
    assert fits.stats["sbuf_high_water"] == (n - 1) * tile_bytes
    compiled = knit.compile(sbuf_hog, a, n, target=target)  # tracing and verifying succeed
    with pytest.raises(KnitError) as info:
        compiled.program
    e = info.value
    assert (e.kind, e.rule, e.line) == ("user", "capacity", line) and os.path.samefile(e.file, __file__)
    assert f"'big{n - 1}' needs {tile_bytes} bytes per partition" in e.message
    assert f"{capacity} bytes per partition on {target}, {(n - 1) * tile_bytes} held by the tensors alive" in e.message
    alive = re.findall(r"'(big\d+)' (\d+) bytes at byte \d+ \((.+):(\d+)\)", e.message)
    assert [name for name, *_ in alive] == [f"big{i}" for i in range(n - 1)]
    for _, nbytes, file, lineno in alive:
        assert int(nbytes) == tile_bytes and os.path.samefile(file, __file__) and int(lineno) == line
    with pytest.raises(KnitError, match=r"\[capacity\]"):
        sbuf_hog(a, n)  # calling the kernel lowers it too


# ---- multi-core (LNC2), device-loop, HBM-scratch and indirect kernels -----------------------------


@knit.jit
def swap_halves(a):
    """LNC2: each core loads its half of the rows and sends it to the other core, which stores it."""
    rank = nl.program_id(0)
    n, f = a.shape
    h = n // 2
    out = nl.ndarray((n, f), a.dtype, buffer=nl.shared_hbm)
    mine = nl.ndarray((h, f), a.dtype, buffer=nl.sbuf)
    got = nl.ndarray((h, f), a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=a[rank * h:(rank + 1) * h, :])
    nisa.tensor_scalar(dst=mine, data=mine, op0=nl.multiply, operand0=float(rank + 2))
    nisa.sendrecv(src=mine, dst=got, send_to_rank=1 - rank, recv_from_rank=1 - rank, pipe_id=0)
    nisa.dma_copy(dst=out[rank * h:(rank + 1) * h, :], src=got)
    return out


@knit.jit
def column_sums_lnc2(a):
    """LNC2: each core sums half of the rows into a shared scratch row; after the barrier each core
    reads both partial rows and stores the total."""
    rank = nl.program_id(0)
    n, f = a.shape
    h = n // 2
    partial = nl.ndarray((2, f), nl.float32, buffer=nl.shared_hbm, name="partial")
    out = nl.ndarray((2, f), nl.float32, buffer=nl.shared_hbm, name="out")
    t = nl.ndarray((1, h * f), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[rank * h:(rank + 1) * h, :].reshape((1, h * f)))
    s = nl.ndarray((1, f), nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=s, op=nl.add, data=t.reshape((1, h, f)).permute(0, 2, 1), axis=2)
    nisa.dma_copy(dst=partial[rank:rank + 1, :], src=s)
    nisa.core_barrier(partial, (0, 1))
    both = nl.ndarray((2, f), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=both, src=partial)
    total = nl.ndarray((1, f), nl.float32, buffer=nl.sbuf)
    nisa.tensor_partition_reduce(dst=total, op=nl.add, data=both)
    nisa.dma_copy(dst=out[rank:rank + 1, :], src=total)
    return out


@knit.jit
def scaled_tile_sums(a):
    """A device loop (dynamic_range): per 128-row tile, t = 2 * a_tile (VectorE), acc += t
    (GpSimd), and the running sum is stored after every tile."""
    n, f = a.shape
    out = nl.ndarray((n, f), nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, f), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for i in nl.dynamic_range(n // 128):
        t = nl.ndarray((128, f), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[nl.ds(i * 128, 128), :])
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add, engine=nisa.gpsimd_engine)
        nisa.dma_copy(dst=out[nl.ds(i * 128, 128), :], src=acc)
    return out


@knit.jit
def sum_first_n_tiles(a, n_tiles):
    """fori_loop with a trip count read from a tensor at run time; acc persists across iterations."""
    f = a.shape[1]
    nt = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=nt, src=n_tiles)
    count = nisa.register_alloc()
    nisa.register_load(count, nt)
    acc = nl.ndarray((128, f), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)

    def body(i):
        t = nl.ndarray((128, f), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[nl.ds(i * 128, 128), :])
        nisa.activation(dst=t, op=nl.copy, data=t, scale=3.0)
        nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)

    nl.fori_loop(0, count, body)
    out = nl.ndarray((128, f), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=acc)
    return out


@knit.jit
def hbm_scratch_round_trip(a):
    """Dependences through HBM: tiles (+1) go to an nl.hbm scratch tensor, then come back in
    reverse block order (x2) on other DMA queues."""
    n, f = a.shape
    scratch = nl.ndarray((n, f), a.dtype, buffer=nl.hbm)
    out = nl.ndarray((n, f), a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        t = nl.ndarray((128, f), a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, :])
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
        nisa.dma_copy(dst=scratch[i * 128:(i + 1) * 128, :], src=t)
    for i in nl.affine_range(n // 128):
        j = n // 128 - 1 - i
        u = nl.ndarray((128, f), a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=u, src=scratch[j * 128:(j + 1) * 128, :])
        nisa.activation(dst=u, op=nl.copy, data=u, scale=2.0)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=u)
    return out


@knit.jit
def gather_rows(table, idx):
    """Indirect DMA: rows of `table` picked by an index tile that an earlier DMA loads."""
    n, f = idx.shape[0], table.shape[1]
    it = nl.ndarray((n, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=it, src=idx)
    t = nl.ndarray((n, f), table.dtype, buffer=nl.sbuf)
    nisa.memset(dst=t, value=-1.0)
    nisa.dma_copy(dst=t, src=table.ap([[f, n], [1, f]], offset=0, vector_offset=it, indirect_dim=0))
    out = nl.ndarray((n, f), table.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def _swap_halves_numpy(a):
    h = a.shape[0] // 2
    return np.concatenate([a[h:] * np.float32(3), a[:h] * np.float32(2)])


def _column_sums_numpy(a):
    h = a.shape[0] // 2
    halves = [a[:h].sum(axis=0, dtype=np.float64), a[h:].sum(axis=0, dtype=np.float64)]
    return np.tile(halves[0] + halves[1], (2, 1))


def _scaled_tile_sums_numpy(a):
    acc, out = np.zeros((128, a.shape[1]), np.float32), []
    for i in range(a.shape[0] // 128):  # the kernel's fp32 order
        acc = acc + a[i * 128:(i + 1) * 128] * np.float32(2)
        out.append(acc)
    return np.concatenate(out)


def _sum_first_n_numpy(a, n):
    acc = np.zeros((128, a.shape[1]), np.float32)
    for i in range(int(n[0, 0])):
        acc = acc + a[i * 128:(i + 1) * 128] * np.float32(3)
    return acc


# id: (kernel, inputs, NumPy answer, exact?, targets)
MORE_KERNELS = {
    "lnc2_sendrecv": (swap_halves[2], lambda: [randn(256, 16, seed=4)], _swap_halves_numpy, True, ("trn2", "trn3")),
    "lnc2_core_barrier": (column_sums_lnc2[2], lambda: [randn(8, 4, seed=5)], _column_sums_numpy, False,
                          ("trn2", "trn3")),
    "dynamic_range": (scaled_tile_sums, lambda: [randn(512, 64, seed=6)], _scaled_tile_sums_numpy, True, ALL),
    "fori_loop": (sum_first_n_tiles, lambda: [randn(512, 8, seed=7), np.array([[3]], np.int32)], _sum_first_n_numpy,
                  True, ALL),
    "hbm_scratch": (hbm_scratch_round_trip, lambda: [randn(512, 64, seed=8)],
                    lambda a: np.concatenate([(a[i * 128:(i + 1) * 128] + 1) * 2 for i in (3, 2, 1, 0)]), True, ALL),
    "indirect_gather": (gather_rows, lambda: [randn(100, 32, seed=9),
                                              np.random.default_rng(9).integers(0, 100, (128, 1)).astype(np.int32)],
                        lambda table, idx: table[idx[:, 0]], True, ALL),
}
MULTI_REGION = {"lnc2_sendrecv", "lnc2_core_barrier", "dynamic_range", "fori_loop"}  # with sync instructions


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", list(MORE_KERNELS))
def test_multicore_device_loop_and_indirect_kernels_under_every_schedule(name, target):
    kernel, make, numpy_answer, exact, targets = MORE_KERNELS[name]
    inputs = make()
    if target not in targets:
        with pytest.raises(KnitError) as info:  # LNC2 needs gen3: checked, then skipped
            knit.compile(kernel, *inputs, target=target).program
        assert info.value.rule == "target"
        pytest.skip("sendrecv / core_barrier need NeuronCore gen3 or newer (trn2+)")
    compiled = knit.compile(kernel, *inputs, target=target)
    assert (compiled.stats["instructions"]["sync"] > 0) == (name in MULTI_REGION)  # several regions
    got = assert_schedules_match_reference(compiled, inputs)
    want = numpy_answer(*inputs)
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# ---- text form ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["matmul", "lnc2_sendrecv", "dynamic_range"])
def test_text_round_trip(name):
    if name == "matmul":
        _, compiled, inputs, want = compiled_case("matmul", "trn2")
    else:
        kernel, make, *_ = MORE_KERNELS[name]
        inputs = make()
        compiled = knit.compile(kernel, *inputs, target="trn3")
        want = compiled.reference(*inputs)
    text = compiled.program.to_text()
    assert text.startswith(compiled.program.text) and "\nengine_program cores=" in text
    decoded = _core.EngineProgram.from_text(text)
    assert decoded.to_text() == text  # print -> parse -> print is the identity
    assert decoded.asm == compiled.asm
    assert decoded.target == compiled.program.target and decoded.text == compiled.program.text
    assert decoded.stats() == compiled.stats
    for schedule, seed in SCHEDULES:
        assert run_program(decoded, compiled, inputs, schedule, seed) == (raw(want),)


def test_text_form_counts_match_the_stats():
    _, compiled, _, _ = compiled_case("matmul", "trn2")
    text = compiled.program.to_text()
    s = compiled.stats
    head = re.search(r"^engine_program cores=1 sbuf_high_water=(\d+) psum_high_water=(\d+) dependences=(\d+) \{$",
                     text, re.M)
    assert tuple(map(int, head.groups())) == (s["sbuf_high_water"], s["psum_high_water"], s["dependences"])
    assert len(re.findall(r"\w+>=\d+", text[text.index("\nengine_program"):])) == s["semaphore_waits"]
    for q in QUEUES:  # "    <queue>: <index> [wait(...)] <index> ...", one line per region using it
        lines = re.findall(rf"^    {q}: (.*)$", text, re.M)
        assert sum(len(re.sub(r" wait\([^)]*\)", "", line).split()) for line in lines) == s["instructions"][q], q


def without_waits(program):
    """The program with every semaphore wait removed (edited as text)."""
    return _core.EngineProgram.from_text(re.sub(r" wait\([^)]*\)", "", program.to_text()))


def test_program_without_waits_is_caught_by_the_race_checker():
    """The race checker is what makes the schedule tests meaningful: the same program with its
    semaphore waits removed is reported as a race."""
    _, compiled, inputs, _ = compiled_case("matmul", "trn2")
    stripped = without_waits(compiled.program)
    assert stripped.stats()["semaphore_waits"] == 0
    with pytest.raises(KnitError) as info:
        run_program(stripped, compiled, inputs, "program_order")
    assert info.value.rule == "race" and "no semaphore wait orders the two" in info.value.message


def test_program_without_waits_is_a_race_under_round_robin_too():
    _, compiled, inputs, _ = compiled_case("matmul", "trn2")
    stripped = without_waits(compiled.program)
    with pytest.raises(KnitError) as info:
        run_program(stripped, compiled, inputs, "round_robin")
    assert info.value.rule == "race", info.value.message


_RUN_DECODED = """
import sys
import numpy as np
from knit import _core
text = open(sys.argv[1]).read()
a = np.random.default_rng(0).standard_normal((256, 128)).astype(np.float32)
b = np.random.default_rng(1).standard_normal((256, 512)).astype(np.float32)
try:
    program = _core.EngineProgram.from_text(text)
    program.run([("float32", [256, 128], a.tobytes()), ("float32", [256, 512], b.tobytes())], "error",
                "program_order", 0, True)
    print("ran")
except _core.KnitError as e:
    print("KnitError", e.rule)
"""


@pytest.mark.parametrize("field,value", [("offset", 2 ** 40), ("partition", 1000), ("offset", 2 ** 63 - 1),
                                         ("partition", 2 ** 63 - 1)])
def test_program_with_an_allocation_outside_sbuf_is_rejected(field, value, tmp_path):
    _, compiled, _, _ = compiled_case("matmul", "trn2")
    text = re.sub(rf"(  alloc %\d+ .*?\b{field}=)\d+", lambda m: m.group(1) + str(value), compiled.program.to_text(),
                  count=1)
    path = tmp_path / "program.txt"
    path.write_text(text)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(knit.__file__))))
    r = subprocess.run([sys.executable, "-c", _RUN_DECODED, str(path)], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, f"crashed with exit code {r.returncode}: {r.stderr[-500:]}"
    assert r.stdout.startswith("KnitError corrupt-program"), r.stdout


# ---- KNIT_DEBUG dumps -------------------------------------------------------------------------------------


def _fresh_kernel():
    """A new kernel object each call (Compiled objects, and so lowering, are cached per kernel)."""

    @knit.jit
    def debug_dump_kernel(a):
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.activation(dst=t, op=nl.exp, data=t)
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    return debug_dump_kernel


PASSES = ["verify", "legalize", "allocate", "engines", "dependences", "program"]


def test_knit_debug_writes_numbered_pass_dumps(monkeypatch, tmp_path):
    monkeypatch.setenv("KNIT_DEBUG", "1")
    monkeypatch.setenv("KNIT_DEBUG_DIR", str(tmp_path))
    a = randn(128, 32)
    compiled = knit.compile(_fresh_kernel(), a, target="trn1")
    asm = compiled.asm  # lowers
    folder = tmp_path / "debug_dump_kernel"
    names = sorted(os.listdir(folder))
    assert names == [f"{i:02d}-{name}.txt" for i, name in enumerate(PASSES, 1)]
    assert (folder / names[-1]).read_text() == asm
    assert (folder / names[0]).read_text() == compiled.ir
    engines = (folder / "04-engines.txt").read_text()
    assert "# dma0" in engines and "# act" in engines and "# dma3" in engines  # the load, exp, the store
    np.testing.assert_allclose(compiled(a), np.exp(a), rtol=1e-6)


def test_no_dumps_without_knit_debug(monkeypatch, tmp_path):
    monkeypatch.delenv("KNIT_DEBUG", raising=False)
    monkeypatch.setenv("KNIT_DEBUG_DIR", str(tmp_path))
    knit.compile(_fresh_kernel(), randn(128, 32)).asm
    assert os.listdir(tmp_path) == []


# ---- default target -------------------------------------------------------------------------------------


def test_target_comes_from_the_environment_unless_given(monkeypatch):
    a = randn(128, 32)
    monkeypatch.delenv("NEURON_PLATFORM_TARGET_OVERRIDE", raising=False)
    assert knit.compile(_fresh_kernel(), a).program.target == "trn2"
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn1")
    compiled = knit.compile(_fresh_kernel(), a)
    assert compiled.program.target == "trn1" and 'target=trn1' in compiled.ir.splitlines()[0]
    assert knit.compile(_fresh_kernel(), a, target="trn3").program.target == "trn3"  # explicit target= wins
    pinned = knit.jit(platform_target="trn3")(_fresh_kernel().fn)
    assert knit.compile(pinned, a).program.target == "trn3"  # jit's platform_target beats the environment
    assert knit.compile(pinned, a, target="trn2").program.target == "trn2"


def test_unknown_schedule_name_is_an_error():
    _, compiled, inputs, _ = compiled_case("matmul", "trn2")
    with pytest.raises(ValueError, match="program_order"):
        compiled.run(*inputs, schedule="randm")
