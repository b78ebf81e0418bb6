"""pytest plugin for kernel tests on Knit's simulator (docs/testing.md).

Loaded by the `pytest11` entry point "knit.pytest_plugin" when Knit is installed, or with
``-p knit.pytest_plugin`` / ``pytest_plugins = ["knit.pytest_plugin"]``; the entry point has the
module's own name so that pytest sees both ways as one plugin and never registers it twice.

  --knit-target T     run kernels on T (trn1, trn2, trn3), a comma list or "all"; the
                      knit_target fixture is parametrized over them, and every other kernel call
                      of the session runs on the first (through NEURON_PLATFORM_TARGET_OVERRIDE)
  --knit-backend B    execute engine programs on B (jit, jit-strict, jit-fallback, reference: KNIT_BACKEND)
  --knit-trace-dir D  where failing latency / utilization checks save Perfetto traces
                      (default: knit-traces in pytest's temporary folder)
  --knit-durations N  after the session, the time its kernel runs took (in total, by test file,
                      and the N slowest tests; 0: every test), with the instructions that ran
                      natively and interpreted (counted by the jit backends)
  @pytest.mark.knit_latency   marks latency tests (select with -m knit_latency, or skip them)

A failing knit.testing timing check adds its trace path to the test's report (a "knit trace"
section, and the junit-xml property knit_trace).
"""
import collections
import os
import time

import pytest

from . import _kernel
from .testing import timing
from .testing.targets import ALL_TARGETS

_BACKENDS = ("jit", "jit-strict", "jit-fallback", "reference")
_ENV = {"knit_target": "NEURON_PLATFORM_TARGET_OVERRIDE", "knit_backend": "KNIT_BACKEND"}


def pytest_addoption(parser):
    group = parser.getgroup("knit", "Knit kernel tests on the simulator")
    group.addoption("--knit-target", default=None, metavar="TARGET",
                    help="NeuronCore target(s) for kernels: trn1, trn2, trn3, a comma list, or all "
                         "(default: $NEURON_PLATFORM_TARGET_OVERRIDE, else trn2)")
    group.addoption("--knit-backend", default=None, choices=_BACKENDS,
                    help="engine-program backend (default: $KNIT_BACKEND, else jit)")
    group.addoption("--knit-trace-dir", default=None, metavar="DIR",
                    help="folder for the Perfetto traces of failing latency checks")
    group.addoption("--knit-durations", default=None, type=int, metavar="N",
                    help="report the time kernel runs took: in total, by file, and the N slowest tests (0: all)")


def _targets(value):
    """The targets --knit-target names, in order, checked."""
    if value is None:
        from .isa import target_from_env

        return [target_from_env()]
    names = list(ALL_TARGETS) if value.strip().lower() == "all" else [v.strip().lower() for v in value.split(",")]
    unknown = [n for n in names if n not in ALL_TARGETS]
    if unknown or not names:
        raise pytest.UsageError(f"--knit-target: unknown target(s) {unknown}; use {', '.join(ALL_TARGETS)} or all")
    return names


@pytest.hookimpl(trylast=True)  # after pytest's tmp_path plugin has set up its base folder
def pytest_configure(config):
    config.addinivalue_line("markers", "knit_latency: a simulated-latency test of a Knit kernel (deterministic)")
    config._knit_targets = _targets(config.getoption("knit_target"))
    # Environment switches Knit reads at call time; restored when the session ends.
    config._knit_saved_env = {}
    values = {"knit_target": config._knit_targets[0] if config.getoption("knit_target") else None,
              "knit_backend": config.getoption("knit_backend")}
    for option, var in _ENV.items():
        if values[option] is not None:
            config._knit_saved_env[var] = os.environ.get(var)
            os.environ[var] = values[option]
    trace_dir = config.getoption("knit_trace_dir")
    if trace_dir is None and hasattr(config, "_tmp_path_factory"):
        trace_dir = str(config._tmp_path_factory.getbasetemp() / "knit-traces")
    timing.trace_dir = os.path.abspath(trace_dir) if trace_dir else None
    if config.getoption("knit_durations") is not None:
        config._knit_runs = _RunTimes()
        _kernel.run_observers.append(config._knit_runs.observe)


class _RunTimes:
    """Kernel runs of the session by test (--knit-durations): [seconds, runs, native, interpreted]."""

    def __init__(self):
        self.by_test: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0, 0, 0])
        self.current = "(outside tests)"
        self.start = time.perf_counter()

    def observe(self, seconds, last_run):
        row = self.by_test[self.current]
        row[0] += seconds
        row[1] += 1
        row[2] += last_run.get("native", 0)
        row[3] += last_run.get("interpreted", 0)

    def report(self, write, slowest):
        total = [sum(r[k] for r in self.by_test.values()) for k in range(4)]
        session = time.perf_counter() - self.start
        write(f"{total[1]} kernel runs took {total[0]:.2f} s of the session's {session:.2f} s "
              f"({100 * total[0] / max(session, 1e-9):.0f}%); instructions: {total[2]} native, {total[3]} interpreted")
        by_file: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0])
        for test, row in self.by_test.items():
            by_file[test.split("::")[0]][0] += row[0]
            by_file[test.split("::")[0]][1] += row[1]
        write("by test file:")
        for name, (seconds, runs) in sorted(by_file.items(), key=lambda kv: -kv[1][0]):
            write(f"  {seconds:8.2f} s {runs:6d} runs  {name}")
        tests = sorted(self.by_test.items(), key=lambda kv: -kv[1][0])
        write(f"slowest {'tests' if not slowest else min(slowest, len(tests))} by kernel-run time:")
        for test, (seconds, runs, native, interpreted) in tests[:slowest or None]:
            write(f"  {seconds:8.3f} s {runs:6d} runs  {native:7d} native {interpreted:7d} interpreted  {test}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    runs = getattr(item.config, "_knit_runs", None)
    if runs is not None:
        runs.current = item.nodeid
    try:
        yield
    finally:
        if runs is not None:
            runs.current = "(outside tests)"


def pytest_terminal_summary(terminalreporter, config):
    runs = getattr(config, "_knit_runs", None)
    if runs is None:
        return
    terminalreporter.section("knit: kernel runs (--knit-durations)")
    runs.report(terminalreporter.write_line, config.getoption("knit_durations"))


def pytest_unconfigure(config):
    for var, old in getattr(config, "_knit_saved_env", {}).items():
        if old is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = old
    timing.trace_dir = None
    runs = getattr(config, "_knit_runs", None)
    if runs is not None and runs.observe in _kernel.run_observers:
        _kernel.run_observers.remove(runs.observe)


def pytest_report_header(config):
    backend = config.getoption("knit_backend") or os.environ.get("KNIT_BACKEND", "jit")
    return f"knit: targets {', '.join(config._knit_targets)}, backend {backend}"


def _parametrized_by_test(metafunc, name):
    """Whether the test's own @pytest.mark.parametrize already gives `name` (it then wins)."""
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0] if mark.args else mark.kwargs.get("argnames", ())
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        if name in names:
            return True
    return False


def pytest_generate_tests(metafunc):
    if "knit_target" in metafunc.fixturenames and not _parametrized_by_test(metafunc, "knit_target"):
        targets = metafunc.config._knit_targets
        metafunc.parametrize("knit_target", targets, ids=targets, indirect=True)


@pytest.fixture
def knit_target(request):
    """The NeuronCore target this test runs on ("trn1", "trn2" or "trn3"): one test per target
    chosen with --knit-target (default: the session's target)."""
    return getattr(request, "param", request.config._knit_targets[0])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    timing.current_test = item.nodeid
    try:
        yield
    finally:
        timing.current_test = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    path = getattr(call.excinfo.value, "trace_path", None) if call.excinfo else None
    if report.failed and path:
        report.sections.append(("knit trace", f"Perfetto trace of the failing run: {path} (open in ui.perfetto.dev)"))
        report.user_properties.append(("knit_trace", path))
