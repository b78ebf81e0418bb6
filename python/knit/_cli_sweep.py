"""`knit sweep FILE[::KERNEL]`: knit.sweep from the command line (docs/sweep.md, docs/cpp.md).

    knit sweep examples/kernels/python/matmul/stages.py::blocked_mn \\
        --param tiles_m=1,2,4 --param tiles_n=1,2 --shape 2048x1024:bfloat16 --shape 2048x2048:bfloat16

--param NAME=V1,V2,... gives a tunable's values (Python literals, split at top-level commas, so
(1,2) is one tuple); the grid is their product. --shape is one per tensor argument, as for `knit
run`; a --shape listing alternatives (A,B) sweeps shapes too: the i-th shape set takes the i-th
alternative of every --shape that has several (they must have the same number) and the one
shape of the others. The inputs are nt.tensor placeholders (timing-only simulation).
"""
from __future__ import annotations

import argparse
import ast
import json
import os
from typing import Any

from . import _kernel_file
from ._kernel_file import UsageError
from .isa import target_from_env
from .sweep import METRICS, SweepResult, sweep
from .typing import TensorType

SHAPES_KEY = "shapes"  # the config key of a swept shape set (only the inputs read it)


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--executor", choices=("inline", "process", "ray"),
                        help="where the points run (default: a local process pool; inline for < 4 points)")
    parser.add_argument("--ray", metavar="ADDRESS", help="run on the Ray cluster at ADDRESS ('auto': the one "
                                                          "`ray start` runs here); same as KNIT_RAY_ADDRESS")
    parser.add_argument("--metric", choices=sorted(METRICS), default="latency", help="what ranks the points")
    parser.add_argument("--out", metavar="RESULTS.csv|.json", help="write every point to a CSV or JSON file")
    parser.add_argument("--plot", metavar="OUT.png", help="latency per config and the Pareto front (matplotlib)")
    parser.add_argument("--resume", metavar="LOG.jsonl", help="append points to LOG as they finish; a rerun "
                                                               "skips the configs already there")
    parser.add_argument("--limit", type=int, metavar="N", help="print only the best N rows")


def split_top_level(text: str) -> list[str]:
    """`text` split at the commas outside brackets and quotes."""
    parts, depth, quote, start = [], 0, "", 0
    for i, c in enumerate(text):
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return parts + [text[start:]]


def parse_values(text: str) -> tuple[str, list[Any]]:
    """'tiles_m=1,2,4' -> ('tiles_m', [1, 2, 4])."""
    name, sep, values = text.partition("=")
    if not sep or not name.isidentifier() or not values:
        raise UsageError(f"--param {text!r}: write NAME=VALUE or NAME=V1,V2,..., e.g. tiles_m=1,2,4")
    out = []
    for piece in split_top_level(values):
        try:
            out.append(ast.literal_eval(piece.strip()))
        # TypeError: a literal literal_eval cannot build ({[]: 1}); RecursionError/MemoryError: deep nesting
        except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
            raise UsageError(f"--param {text!r}: {piece.strip()!r} is not a Python literal (4, 1e-5, True, "
                             f"'name')") from None
    return name, out


def shape_sets(specs: list[str], default_dtype: str) -> list[list[tuple]]:
    """The tensor arguments' (shape, dtype) lists, one per shape set (see the module docstring)."""
    alternatives = [[_kernel_file.parse_shape(a, default_dtype) for a in spec.split(",")] for spec in specs]
    counts = {len(a) for a in alternatives if len(a) > 1}
    if len(counts) > 1:
        raise UsageError(f"--shape: every --shape with alternatives needs the same number of them; got "
                         f"{', '.join(map(str, sorted(counts)))}")
    n = counts.pop() if counts else 1
    return [[a[i] if len(a) > 1 else a[0] for a in alternatives] for i in range(n)]


def _describe(shapes: list[tuple]) -> str:
    return " ".join("x".join(map(str, s)) + f":{d}" for s, d in shapes)


def cmd_sweep(args: argparse.Namespace, report: dict[str, Any]) -> int:
    """Run the sweep, print its table, write --out / --plot; `report` gets to_json's fields and
    `written` (what --json prints)."""
    if args.out and not args.out.endswith((".csv", ".json")):
        raise UsageError(f"--out {args.out}: name a .csv or a .json file")
    path, wanted = _kernel_file.split_target(args.file)
    kernels, _, _ = _kernel_file.load_kernels(path, args.cxxflag or ())
    name, kernel = _kernel_file.pick_kernel(kernels, wanted, path)
    if not args.shape:
        raise UsageError(f"{path}: give the kernel's tensor arguments with --shape (one per tensor, in order, e.g. "
                         f"--shape 256x512:bfloat16), or put them in a `knit-run:` comment line in the file")
    space: dict[str, list[Any]] = dict(parse_values(p) for p in args.param or ())
    sets = shape_sets(args.shape, args.dtype or "float32")
    if len(sets) > 1:
        space[SHAPES_KEY] = [_describe(s) for s in sets]
    by_name = {_describe(s): [TensorType(shape, dtype) for shape, dtype in s] for s in sets}

    def inputs(config: dict[str, Any]) -> list[TensorType]:
        return by_name[config.get(SHAPES_KEY, _describe(sets[0]))]

    if args.ray:
        os.environ["KNIT_RAY_ADDRESS"] = args.ray
    executor = args.executor or ("ray" if args.ray else None)
    result = sweep(kernel, space, inputs, target=args.target or target_from_env(), metric=args.metric,
                   executor=executor, resume=args.resume)
    print(result.table(args.limit))
    print(f"{len(result.points)} points in {result.wall_s:.2f} s ({result.executor})")
    report.update(json.loads(result.to_json()), written=_save(result, args))
    return 0 if any(p.ok for p in result.points) else 1


def _save(result: SweepResult, args: argparse.Namespace) -> dict[str, str]:
    """Write --out and --plot; {"out": path, "plot": path} of what was written."""
    written = {}
    if args.out:
        if args.out.endswith(".csv"):
            result.to_csv(args.out)
        else:
            result.to_json(args.out)
        written["out"] = args.out
        print(f"results written to {args.out}")
    if args.plot:
        written["plot"] = str(result.plot(args.plot))
        print(f"plot written to {written['plot']}")
    return written
