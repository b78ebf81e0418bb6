"""When the JIT backend compiles: the example kernels at small and realistic sizes, each run on the
reference backend, compiled (jit-strict, cold and warm), and on the default backend, whose cost
model (simulator/src/native/tiering.h) decides per run whether building the kernel's bodies pays.

    python3 bench/jit_tiering.py              # about 1 min on 2 cores
    python3 bench/jit_tiering.py --markdown

Every case runs in two fresh processes with KNIT_CACHE=0 (nothing compiled yet, in memory or on
disk): one times the reference backend and then the default backend's first run (its decision:
interpreted or compiled, and the static work and break-even it compared); the other times a
jit-strict run that compiles every body (cold) and a second run (warm). From these:
  ref ns/el    reference time / static work: what the cost model's kSavedNsPerElement stands for
               (less the warm native time per element)
  build        cold - warm: building the kernel's bodies, which the model estimates per body
  default      the default backend's first run against the better of the two choices it had
               (the reference backend, or compiling cold): 1.0x is the right choice.
  decision     from the default run's counts: compiled when any instruction ran natively
  native / interpreted, output
               the default run's instruction counts, and whether its output and the compiled
               run's are the reference backend's bytes.

The output is also written to bench/results/ (bench/record.py).
"""
import argparse
import json
import os
import subprocess
import sys
import time

# bench/ is the script's folder, on sys.path
import record
from jit_speed import EXAMPLES, ROOT, fmt_time, machine_lines, same_bytes

# name: (example module, kernel, shapes, dtype)
CASES = {
    "tensor_add 300x1024": ("tensor_add", "tensor_add_kernel", [(300, 1024), (300, 1024)], "float32"),
    "softmax 300x1024": ("softmax", "softmax_kernel", [(300, 1024)], "float32"),
    "rmsnorm 300x1024 bf16": ("rmsnorm", "rmsnorm_kernel", [(300, 1024), (1024,)], "bfloat16"),
    "layernorm 300x1000": ("layernorm", "layernorm_kernel", [(300, 1000), (1000,), (1000,)], "float32"),
    "matmul 512x256x1024": ("matmul", "matmul_kernel", [(512, 256), (512, 1024)], "float32"),
    "attention 512 bf16": ("attention", "attention_kernel", [(512, 128)] * 3, "bfloat16"),
    "attention 1024 bf16": ("attention", "attention_kernel", [(1024, 128)] * 3, "bfloat16"),
    "attention 2048 bf16": ("attention", "attention_kernel", [(2048, 128)] * 3, "bfloat16"),
    "softmax 2048x2048": ("softmax", "softmax_kernel", [(2048, 2048)], "float32"),
    "matmul 2048^3 bf16": ("matmul", "matmul_kernel", [(2048, 2048), (2048, 2048)], "bfloat16"),
    "attention 4096 bf16": ("attention", "attention_kernel", [(4096, 128)] * 3, "bfloat16"),
}


def child(name, mode):
    """Runs in a fresh process: prints the timings of `mode` ("decide" or "strict") as JSON."""
    sys.path[:0] = [EXAMPLES, os.path.join(ROOT, "python")]
    import importlib

    import ml_dtypes
    import numpy as np

    import knit

    module, kernel, shapes, dtype = CASES[name]
    rng = np.random.default_rng(0)
    dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float32
    args = [rng.standard_normal(s).astype(np.float32).astype(dt) for s in shapes]
    c = knit.compile(getattr(importlib.import_module(module), kernel), *args)
    _ = c.program  # the property traces and lowers on first access: do it outside the timings

    outputs = {}

    def timed(backend):
        t = time.perf_counter()
        outputs[backend] = c.run(*args, backend=backend, check_races=False)
        return time.perf_counter() - t

    if mode == "decide":
        out = {"reference": min(timed("reference"), timed("reference")), "default": timed("jit")}
        out.update(work=c.last_run["work"], break_even=c.last_run["break_even"], native=c.last_run["native"],
                   interpreted=c.last_run["interpreted"])
    else:
        out = {"cold": timed("jit-strict"), "warm": min(timed("jit-strict"), timed("jit-strict"))}
        timed("reference")
    # After the timings: the runs' outputs against the reference backend's.
    out["same"] = all(same_bytes(o, outputs["reference"]) for o in outputs.values())
    print(json.dumps(out))


def measure(name, mode):
    env = dict(os.environ, KNIT_CACHE="0", KNIT_PROGRESS="0")
    env.pop("KNIT_JIT_THRESHOLD", None)
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name, mode], env=env,
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{name} ({mode}) failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--child", nargs=2, metavar=("CASE", "MODE"), help=argparse.SUPPRESS)
    opts = ap.parse_args()
    if opts.child:
        return child(*opts.child)
    with record.recorded("jit_tiering"):
        table(opts.markdown)


def table(markdown):
    for line in machine_lines():
        print(line)
    header = ["case", "work", "reference", "ref ns/el", "compiled cold", "build", "warm", "warm ns/el",
              "default 1st run", "decision", "default vs best", "native / interpreted", "output"]
    rows = []
    for name in CASES:
        d, s = measure(name, "decide"), measure(name, "strict")
        work = d["work"]
        best = min(d["reference"], s["cold"])
        decision = "compiled" if d["native"] > 0 else "interpreted"
        rows.append([name, f"{work / 1e6:.2f} M", fmt_time(d["reference"]), f"{d['reference'] / work * 1e9:.1f}",
                     fmt_time(s["cold"]), fmt_time(s["cold"] - s["warm"]), fmt_time(s["warm"]),
                     f"{s['warm'] / work * 1e9:.2f}",
                     fmt_time(d["default"]), f"{decision} (break-even {d['break_even'] / 1e6:.2f} M)",
                     f"{d['default'] / best:.2f}x", f"{d['native']} / {d['interpreted']}",
                     "same bytes as reference" if d["same"] and s["same"] else "DIFFERS from reference"])
        print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for r in rows:
            print("| " + " | ".join(r) + " |")
    else:
        widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
        for r in [header] + rows:
            print("  ".join(str(x).ljust(w) for x, w in zip(r, widths)))


if __name__ == "__main__":
    main()
