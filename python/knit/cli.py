"""The knit command line: run, inspect and profile a kernel file, Python or C++.

    knit run examples/kernels/cpp/matmul.cpp              # result check, latency, engine summary
    knit run examples/kernels/python/rmsnorm.py --shape 256x1024 --shape 1024 --target trn3
    knit ir FILE[::KERNEL] ...      the traced tile IR
    knit asm FILE[::KERNEL] ...     the engine program
    knit profile FILE ... --trace out.json --plot out.png
    knit memory FILE[::KERNEL] ... --svg map.svg   where each SBUF/PSUM tensor is placed, over time
    knit sweep FILE[::KERNEL] --param tiles_m=1,2,4 --shape 1024x512 ...   ranked table (docs/sweep.md)
    knit lint FILE.cpp              static checks of a C++ kernel file
    knit cache info | clear

Every command takes --json: it then prints one JSON document on stdout, its result or its error
(docs/cli.md), and sends what it would otherwise print there to stderr. Inputs are random
(seeded) arrays of the --shape/--dtype given, or of the file's own `knit-run:` lines (see
_kernel_file). Exit status: 0 success, 1 a failed check or a kernel error,
2 a usage error. docs/cpp.md describes it all.
"""
import ast
import collections
import contextlib
import os
import sys
import time
import traceback
import warnings
from typing import Any

import numpy as np

from . import _cli_json, _cli_memory, _cli_sweep, _kernel_file, cache
from ._cli_json import ArgumentError
from ._kernel_file import UsageError
from .errors import KnitError
from .profile import profile as profile_kernel
from .testing import ALL_TARGETS
from .testing.compare import fmt_atol, mismatch_report, reference_inputs, tolerance_for
from .typing import TensorType


def _kernel_options(parser):
    """The options every kernel command takes (all default to None so that a file's knit-run
    lines can fill what the command line leaves out)."""
    parser.add_argument("file", metavar="FILE[::KERNEL]", help="a Python or C++ kernel file, optionally ::kernel")
    parser.add_argument("--shape", action="append", metavar="DIMS[:DTYPE]",
                        help="one per tensor argument, in order: 256x512 or 256x512:bfloat16")
    parser.add_argument("--dtype", metavar="DTYPE", help="dtype of --shape entries without one (default float32)")
    parser.add_argument("--param", action="append", metavar="NAME=VALUE",
                        help="a non-tensor argument of a Python kernel (a Python literal), e.g. epsilon=1e-5")
    parser.add_argument("--target", choices=ALL_TARGETS, help="the NeuronCore generation (default: the kernel's, "
                                                           "else $KNIT_TARGET, else trn2)")
    parser.add_argument("--seed", type=int, help="seed of the random inputs (default 0)")
    parser.add_argument("--int-range", metavar="LOW:HIGH", help="range of integer inputs (default 0:16)")
    parser.add_argument("--cxxflag", action="append", metavar="FLAG",
                        help="an extra compiler flag for a C++ file (-DN=4, -I/path); repeatable")
    _json_option(parser)


def _json_option(parser, what="print one JSON document (docs/cli.md) instead of text"):
    parser.add_argument("--json", action="store_true", help=what)


COMMANDS = ("run", "ir", "asm", "profile", "memory", "sweep", "lint", "cache")


def build_parser():
    parser = _cli_json.Parser(prog="knit", description="Run, inspect and profile NKI-style kernels "
                                                              "(Python or C++) on Knit's simulator.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = commands.add_parser("run", help="run a kernel on random inputs: result check, latency, engine summary")
    _kernel_options(run)
    run.add_argument("--backend", choices=("jit", "jit-strict", "jit-fallback", "reference"),
                     help="execution backend (default jit)")
    run.add_argument("--reference", metavar="FUNC_OR_EXPR",
                     help="what to check against: a function of the file (Python) or a NumPy expression over "
                          "the inputs x0, x1, ... and --param names (default: the file's `reference` function, if any)")
    run.add_argument("--rtol", type=float, help="relative tolerance of the reference check")
    run.add_argument("--atol", type=float, help="absolute tolerance of the reference check")
    run.add_argument("--no-interpreter-check", action="store_true",
                     help="skip re-running on the reference interpreter to compare bytes")
    for name, what in (("ir", "print the traced tile IR"), ("asm", "print the engine program")):
        _kernel_options(commands.add_parser(name, help=what))
    prof = commands.add_parser("profile", help="simulated timing: summary, Perfetto trace, timeline plot")
    _kernel_options(prof)
    prof.add_argument("--trace", metavar="OUT.json", help="write a Chrome/Perfetto trace")
    prof.add_argument("--plot", metavar="OUT.png", help="write an engine timeline plot (needs matplotlib)")
    prof.add_argument("--html", metavar="OUT.html", help="write a self-contained HTML report: summary, timeline, "
                      "SBUF/PSUM occupancy, DMA bandwidth and the annotated source (docs/profiling.md)")
    prof.add_argument("--timing-only", action="store_true", help="simulate timing only (no data computed)")
    prof.add_argument("--by-line", action="store_true",
                      help="print the kernel's source annotated with each line's time, waits and share of the "
                           "critical path (with --json: the per-line JSON of docs/cli.md)")
    prof.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"),
                      help="instead of FILE: compare two --by-line --json outputs, per engine and per line")
    memory = commands.add_parser("memory", help="where each SBUF / PSUM tensor is placed over its live range")
    _kernel_options(memory)
    _cli_memory.add_options(memory)
    sweep = commands.add_parser("sweep", help="simulate a kernel over a grid of parameters and shapes; ranked table")
    _kernel_options(sweep)
    _cli_sweep.add_options(sweep)
    lint = commands.add_parser("lint", help="static checks of a C++ kernel file (Clang AST)")
    lint.add_argument("file", metavar="FILE")
    lint.add_argument("--cxxflag", action="append", metavar="FLAG", help="an extra compiler flag; repeatable")
    _json_option(lint)
    cache_cmd = commands.add_parser("cache", help="the disk cache of compiled code and programs")
    cache_cmd.add_argument("action", choices=("info", "clear"))
    _json_option(cache_cmd)
    return parser


def _merge_directives(parser, args):
    """Fill options the command line left out from the file's knit-run lines (written for
    `knit run`; the other commands take the options they share with it)."""
    path, _ = _kernel_file.split_target(args.file)
    extra = _kernel_file.directive_args(path) if os.path.isfile(path) else []
    if not extra:
        return args
    try:
        from_file = parser.parse_args(["run", args.file] + _join_cxxflags(extra))
    except ArgumentError:
        raise UsageError(f"{path}: its knit-run line has options `knit run` does not take: {' '.join(extra)}") from None
    for name, value in vars(from_file).items():
        # (--json is the command line's choice: main already chose the output's form from it)
        if name != "json" and hasattr(args, name) and getattr(args, name) in (None, False):
            setattr(args, name, value)
    return args


class Job:
    """One kernel of one file with its inputs, as the options describe."""

    def __init__(self, args):
        path, wanted = _kernel_file.split_target(args.file)
        self.path = path
        started = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:  # Clang's, printed like a compiler's
            warnings.simplefilter("always", UserWarning)
            kernels, self.module, self.load_note = _kernel_file.load_kernels(path, args.cxxflag or ())
        for w in caught:
            print(w.message, file=sys.stderr)
        self.load_s = time.perf_counter() - started
        self.name, self.kernel = _kernel_file.pick_kernel(kernels, wanted, path)
        if not args.shape:
            raise UsageError(f"{path}: give the kernel's tensor arguments with --shape (one per tensor, in order, "
                             f"e.g. --shape 256x512:bfloat16), or put them in a `knit-run:` comment line in the file")
        self.shapes = [_kernel_file.parse_shape(s, args.dtype or "float32") for s in args.shape]
        self.params = dict(_parse_param(p) for p in (args.param or ()))
        self.target = args.target
        self.seed = 0 if args.seed is None else args.seed
        self.int_range = _parse_range(args.int_range or "0:16")

    def inputs(self):
        return _kernel_file.make_inputs(self.shapes, self.seed, self.int_range)

    def placeholders(self):
        return [TensorType(shape, dtype) for shape, dtype in self.shapes]

    def compile(self, inputs):
        started = time.perf_counter()
        compiled = self.kernel.compile(*inputs, target=self.target, **self.params)
        _ = compiled.program  # lowering to the engine program is part of compiling
        return compiled, time.perf_counter() - started

    def file_function(self, name):
        """The Python file's own function `name` (reference, tolerance, ...), or None."""
        fn = getattr(self.module, name, None) if self.module is not None else None
        return fn if callable(fn) else None

    def describe_inputs(self):
        return ", ".join(f"{'x'.join(map(str, s))} {d}" for s, d in self.shapes)


def _parse_param(text):
    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier():
        raise UsageError(f"--param {text!r}: write NAME=VALUE, e.g. epsilon=1e-5")
    try:
        return name, ast.literal_eval(value)
    # TypeError: a literal literal_eval cannot build ({[]: 1}); RecursionError/MemoryError: deep nesting
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        raise UsageError(f"--param {text!r}: the value must be a Python literal (1e-5, 4, True, 'name')") from None


def _parse_range(text):
    low, sep, high = text.partition(":")
    try:
        low, high = int(low), int(high)
    except ValueError:
        raise UsageError(f"--int-range {text!r}: write LOW:HIGH, e.g. 0:1000") from None
    if not sep or high <= low:
        raise UsageError(f"--int-range {text!r}: HIGH must be greater than LOW")
    return low, high


def check_expression(spec):
    """A --reference that is not a Python expression fails before anything runs."""
    try:
        compile(spec, "--reference", "eval")
    except SyntaxError as e:
        raise UsageError(f"--reference {spec!r} is not a Python expression: {e.msg}") from None


def _outputs_tuple(result):
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def _reference_outputs(job, spec, ref_inputs):
    """The outputs (float64 arrays) of the reference `spec` (a function of the file, or a NumPy
    expression) on `ref_inputs` (the inputs as a reference sees them), and its label."""
    if job.file_function(spec) is not None:
        fn, label = job.file_function(spec), f"{spec}() of the file"
    else:  # (cmd_run checked it is an expression before running anything)
        names = {f"x{i}": a for i, a in enumerate(ref_inputs)}
        names.update(job.params, np=np)

        def fn(*_, **__):
            try:
                return eval(spec, {"__builtins__": __builtins__}, names)  # noqa: S307 (the user's own expression)
            except Exception as e:  # report any mistake in the expression as a usage error
                raise UsageError(f"--reference {spec!r}: {type(e).__name__}: {e}") from None
        label = f"NumPy expression {spec!r}"
    return _outputs_tuple(fn(*ref_inputs, **job.params)), label


def _file_tolerance(job, ref_inputs):
    """A Python file's own absolute tolerance: its `tolerance(*inputs)` (a scalar or one array
    per output element, e.g. a quantization error bound), or None."""
    fn = job.file_function("tolerance")
    return None if fn is None else np.asarray(fn(*ref_inputs, **job.params), dtype=np.float64)


def _check(against, output, passed, message=None, max_abs_error=None, rtol=None, atol=None):
    """One entry of `knit run --json`'s checks (docs/cli.md)."""
    return {"against": against, "output": output, "passed": passed, "message": message,
            "max_abs_error": max_abs_error, "rtol": rtol, "atol": atol}


def _check_against(outputs, expected, label, args, checks, file_atol=None):
    """Print the comparison of each output with the reference (knit.testing's rule and default
    tolerances for the output dtype) and append it to `checks`; True if all are within tolerance."""
    if len(expected) != len(outputs):
        message = f"it returns {len(expected)} arrays, the kernel {len(outputs)}"
        print(f"  check vs {label}: FAIL, {message}")
        checks.append(_check(label, None, False, message))
        return False
    ok = True
    for i, (got, want) in enumerate(zip(outputs, expected)):
        got, want = np.asarray(got), np.asarray(want, dtype=np.float64)
        if got.shape != want.shape:
            message = f"shape {got.shape} but the reference's is {want.shape}"
            print(f"  check output {i} vs {label}: FAIL, {message}")
            checks.append(_check(label, i, False, message))
            ok = False
            continue
        atol = args.atol if args.atol is not None or file_atol is None else file_atol
        rtol = args.rtol if args.rtol is not None or file_atol is None else 0.0
        tol, _ = tolerance_for(got.dtype, want, rtol, atol)
        report = mismatch_report(got, want, tol.rtol, tol.atol, name=f"output {i}")
        with np.errstate(invalid="ignore"):
            err = np.abs(got.astype(np.float64) - want)
        worst = np.unravel_index(np.nanargmax(err), err.shape) if err.size and not np.isnan(err).all() else None
        detail = (f"max abs error {float(err[worst]):.3g} at {tuple(int(k) for k in worst)}; " if worst else "")
        print(f"  check output {i} vs {label}: {'FAIL' if report else 'PASS'} "
              f"({detail}rtol {tol.rtol:.3g}, atol {fmt_atol(tol.atol)} for {got.dtype})")
        if report:
            print("    " + report.replace("\n", "\n    "))
        checks.append(_check(label, i, report is None, report, float(err[worst]) if worst else None, tol.rtol,
                             float(np.max(tol.atol, initial=0.0))))
        ok &= report is None
    return ok


def _bit_identical(outputs, again):
    return len(outputs) == len(again) and all(
        np.asarray(a).tobytes() == np.asarray(b).tobytes() and np.asarray(a).shape == np.asarray(b).shape
        for a, b in zip(outputs, again))


def _arrays(arrays):
    return [{"shape": list(np.shape(a)), "dtype": str(np.asarray(a).dtype)} for a in arrays]


def _engines(prof):
    """{queue: busy ns, utilization, instructions} of the queues that ran instructions."""
    return {q: {"busy_ns": e.busy_ns, "utilization": e.utilization, "instructions": e.instructions}
            for q, e in prof.engines.items() if e.instructions}


def cmd_run(job, args, report):
    if args.backend:
        os.environ["KNIT_BACKEND"] = args.backend
    if args.reference is not None and job.file_function(args.reference) is None:
        check_expression(args.reference)
    inputs = job.inputs()
    compiled, compile_s = job.compile(inputs)
    where = "from the disk cache" if compiled.from_disk_cache else "traced and lowered"
    print(f"knit run {job.path}::{job.name} on {compiled.program.target} "
          f"({os.environ.get('KNIT_BACKEND', 'jit')} backend)")
    print(f"  inputs: {job.describe_inputs()} (random, seed {job.seed})")
    print(f"  load {1e3 * job.load_s:.0f} ms ({job.load_note}); compile {1e3 * compile_s:.0f} ms (program {where})")
    started = time.perf_counter()
    prof = profile_kernel(job.kernel, *inputs, target=job.target, **job.params)
    run_s = time.perf_counter() - started
    outputs = _outputs_tuple(prof.outputs)
    shapes = ", ".join(f"{'x'.join(map(str, np.shape(o)))} {np.asarray(o).dtype}" for o in outputs)
    print(f"  outputs: {shapes}; simulated in {1e3 * run_s:.0f} ms")
    checks: list[dict[str, Any]] = []
    report.update(kernel=job.name, file=job.path, target=compiled.program.target,
                  backend=os.environ.get("KNIT_BACKEND", "jit"), seed=job.seed,
                  inputs=[{"shape": list(s), "dtype": d} for s, d in job.shapes], params=job.params,
                  load_s=job.load_s, compile_s=compile_s, program_from_disk_cache=compiled.from_disk_cache,
                  simulate_s=run_s, outputs=_arrays(outputs), checks=checks)
    ok = True
    if not args.no_interpreter_check and os.environ.get("KNIT_BACKEND", "jit") != "reference":
        again = _outputs_tuple(compiled.reference(*inputs, **job.params))
        same = _bit_identical(outputs, again)
        print(f"  check vs reference interpreter: {'PASS, identical bytes' if same else 'FAIL, bytes differ'}")
        checks.append(_check("reference interpreter", None, same, None if same else "bytes differ"))
        ok &= same
    spec = args.reference if args.reference is not None else "reference" if job.file_function("reference") else None
    if spec is not None:
        ref_inputs = reference_inputs(inputs)  # float64 copies, made only when a reference uses them
        expected, label = _reference_outputs(job, spec, ref_inputs)
        ok &= _check_against(outputs, expected, label, args, checks, _file_tolerance(job, ref_inputs))
    else:
        print("  (no NumPy reference: pass --reference EXPR, or define reference() in a Python file)")
    print(prof.summary())
    report.update(passed=bool(ok), summary=prof.summary_json(), engines=_engines(prof))
    return 0 if ok else 1


def cmd_show(job, args, report):
    compiled, _ = job.compile(job.placeholders())
    text = compiled.ir if args.command == "ir" else compiled.asm
    if not args.json:  # (with --json the document holds it)
        print(text)
    report.update(kernel=job.name, file=job.path, target=compiled.program.target, text=text)
    if args.command == "ir":
        report.update(instructions=compiled.core.num_instructions, params=len(compiled.core.param_specs()),
                      outputs=len(compiled.core.output_specs()))
    else:
        stats = dict(compiled.program.stats())
        del stats["summary"]  # the same figures as text
        opcodes = collections.Counter(op for op, _, _ in compiled.program.source)
        report.update(stats, opcodes=dict(sorted(opcodes.items())))
    return 0


def cmd_profile(job, args, report):
    inputs = job.placeholders() if args.timing_only else job.inputs()
    prof = profile_kernel(job.kernel, *inputs, target=job.target, **job.params)
    if args.by_line:
        lines = prof.by_line()
        report.update(lines.to_json())
        if not args.json:
            print(lines.annotate())
    else:
        report.update(kernel=prof.kernel_name, target=prof.target, **prof.summary_json())
        if not args.json:
            print(prof.summary())
    written = report.setdefault("written", {})
    if args.trace:
        written["trace"] = prof.save_trace(args.trace)
        print(f"trace written to {written['trace']} (open in ui.perfetto.dev)")
    if args.plot:
        written["plot"] = prof.plot(args.plot)
        print(f"timeline plot written to {written['plot']}")
    if args.html:
        written["html"] = prof.save_html(args.html)
        print(f"HTML report written to {written['html']} (open it in a browser)")
    return 0


def cmd_lint(args, report):
    from . import cpp
    findings = cpp.lint(args.file, args.cxxflag or ())
    for finding in findings:
        print(finding)
    print(f"{len(findings)} finding(s) in {args.file}")
    report.update(file=args.file, findings=[vars(f) for f in findings])
    return 1 if findings else 0


def cmd_cache(args, report):
    report["action"] = args.action
    if args.action == "clear":
        report["removed"] = cache.clear()
        print(f"removed {report['removed']} cache entries")
    else:
        report["info"] = cache.info()
        for key, value in report["info"].items():
            print(f"{key}: {value}")
    return 0


def _join_cxxflags(argv):
    """`--cxxflag -DN=4` as `--cxxflag=-DN=4`: argparse would read the flag's value as an option."""
    out, it = [], iter(argv)
    for a in it:
        out.append(f"--cxxflag={next(it, '')}" if a == "--cxxflag" else a)
    return out


def cmd_compare(argv, report):
    """`knit profile --compare A.json B.json [--json]` (no kernel file: it reads two profiles)."""
    from ._compare import compare_profiles
    parser = _cli_json.Parser(prog="knit profile", description="compare two by-line profiles")
    parser.add_argument("--compare", nargs=2, required=True, metavar=("A.json", "B.json"))
    _json_option(parser, "print the comparison as JSON (docs/cli.md)")
    args = parser.parse_args(argv)
    try:
        comparison = compare_profiles(*args.compare)
    except KnitError as e:  # an unreadable profile: a mistake on the command line
        raise UsageError(str(e)) from None
    report.update(comparison.to_json())
    if not args.json:
        print(comparison)
    return 0


def _dispatch(parser, argv, report):
    """Run the command `argv` names, filling `report` (its --json document's fields); the exit status."""
    if argv[:1] == ["profile"] and "--compare" in argv:
        return cmd_compare(argv[1:], report)
    args = parser.parse_args(argv)
    if args.command == "lint":
        return cmd_lint(args, report)
    if args.command == "cache":
        return cmd_cache(args, report)
    args = _merge_directives(parser, args)
    if args.command == "sweep":
        return _cli_sweep.cmd_sweep(args, report)
    job = Job(args)
    return {"run": cmd_run, "ir": cmd_show, "asm": cmd_show, "profile": cmd_profile,
            "memory": _cli_memory.cmd_memory}[args.command](job, args, report)


def main(argv=None):
    parser = build_parser()
    argv = _join_cxxflags(sys.argv[1:] if argv is None else list(argv))
    as_json = "--json" in argv
    command = argv[0] if argv[:1] and argv[0] in COMMANDS else None
    report: dict[str, Any] = {}
    error: BaseException | None = None
    with _cli_json.stdout_to_stderr() if as_json else contextlib.nullcontext():
        try:
            status = _dispatch(parser, argv, report)
        except ArgumentError as e:
            status, error = 2, e
            if not as_json:
                _cli_json.print_argument_error(e)
        except UsageError as e:
            status, error = 2, e
            print(f"knit: error: {e}", file=sys.stderr)
        except KnitError as e:
            status, error = 1, e
            print(str(e), file=sys.stderr)
        except BrokenPipeError:  # `knit asm ... | head`: the reader left; so do we, quietly
            _silence_stdout()
            return 0
        except Exception as e:  # a bug in the kernel's Python (or Knit's): a traceback, or a JSON error
            if not as_json:
                raise
            traceback.print_exc()
            status, error = 1, e
    if as_json:
        try:
            print(_cli_json.document(command, report, error), flush=True)
        except BrokenPipeError:
            _silence_stdout()
    return status


def _silence_stdout():
    """After the reader of stdout left: nothing more to write, and no error at exit's flush."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())
