"""Property tests of the command line's text parsing (docs/reliability.md, "Fuzz targets"): the
`knit-run:` lines of a kernel file, --shape, --param, --int-range and the argument list as a
whole. They are Python, so hypothesis fuzzes them here instead of libFuzzer.

Any text gets either a parsed value or Knit's UsageError (which `knit` prints as
"knit: error: ..." with status 2); no other exception escapes. Well-formed text parses to what
it says (independently built: the test writes the line or shape from the values it expects).
"""
import os
import shlex

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import (  # noqa: E402
    HealthCheck,
    example,
    given,
    settings,
    strategies as st,  # noqa: E402
)

from knit import _kernel_file, cli  # noqa: E402
from knit._kernel_file import UsageError  # noqa: E402

# `./dev fuzz SECONDS` asks for more examples through KNIT_FUZZ_EXAMPLES.
FUZZ = settings(max_examples=int(os.environ.get("KNIT_FUZZ_EXAMPLES", "300")), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])

# Text a command line or a comment line can hold (no NUL: neither can).
LINE_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\n\r"), max_size=60)
TOKENS = st.lists(st.sampled_from(["--shape", "--param", "--int-range", "--dtype", "--seed", "--target",
                                   "--cxxflag", "--reference", "--rtol", "--atol", "--backend", "--help",
                                   "256x512", "4:bfloat16", "x", ":", "=", "-1", "0:0", "eps=1e-5",
                                   "'", '"', "\\", "#", "//", "knit-run:", "trn2"]) | LINE_TEXT, max_size=8)


def _write(tmp_path, text, name="kernel.txt"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


@FUZZ
@given(lines=st.lists(st.one_of(LINE_TEXT, LINE_TEXT.map(lambda t: "# knit-run:" + t),
                                LINE_TEXT.map(lambda t: "// knit-run: " + t)), max_size=6))
def test_any_knit_run_lines_give_flags_or_a_usage_error(tmp_path, lines):
    path = _write(tmp_path, "\n".join(lines))
    try:
        argv = _kernel_file.directive_args(path)
    except UsageError as e:
        assert "knit-run line" in str(e)
        return
    assert all(isinstance(a, str) for a in argv)


@FUZZ
@given(flags=st.lists(st.lists(LINE_TEXT, min_size=1, max_size=4), max_size=3), comment=st.sampled_from(["#", "//"]))
def test_a_knit_run_line_reads_back_the_flags_it_was_written_with(tmp_path, flags, comment):
    text = "".join(f"{comment} knit-run: {shlex.join(line)}\nbody line\n" for line in flags)
    assert _kernel_file.directive_args(_write(tmp_path, text)) == [a for line in flags for a in line]


SHAPE_TEXT = st.one_of(LINE_TEXT, st.lists(st.integers(-3, 2**70), min_size=1, max_size=4).map(
    lambda ds: "x".join(map(str, ds))), st.tuples(LINE_TEXT, LINE_TEXT).map(":".join))


@FUZZ
@given(text=SHAPE_TEXT)
def test_any_shape_text_gives_a_shape_or_a_usage_error(text):
    try:
        shape, dtype = _kernel_file.parse_shape(text, "float32")
    except UsageError as e:
        assert str(e).startswith(f"--shape {text!r}")
        return
    assert shape and all(isinstance(d, int) and d > 0 for d in shape)
    assert dtype is not None


@FUZZ
@given(dims=st.lists(st.integers(1, 4096), min_size=1, max_size=4),
       dtype=st.sampled_from(["", "float32", "bfloat16", "int32", "uint8", "float16"]))
def test_a_well_formed_shape_reads_back(dims, dtype):
    text = "x".join(map(str, dims)) + (f":{dtype}" if dtype else "")
    shape, parsed = _kernel_file.parse_shape(text, "float32")
    assert shape == tuple(dims)
    assert str(parsed) == (dtype or "float32")


# Literals, including the ones Python's parser accepts but literal_eval cannot build (a dict
# keyed by a list, a set of sets) and deep nesting.
PARAM_VALUE = st.one_of(LINE_TEXT, st.sampled_from(["{[]: 1}", "{{}}", "{[1]}", "(" * 300 + ")" * 300,
                                                   "[" * 50 + "]" * 50, "9" * 5000, "1e999", "-'a'",
                                                   "b'\\xff'", "...", "1+2j", "{1: 2}"]))


@FUZZ
@given(name=st.one_of(st.sampled_from(["eps", "n", "_"]), LINE_TEXT), value=PARAM_VALUE)
@example(name="eps", value="{[]: 1}")  # once a TypeError out of ast.literal_eval
@example(name="eps", value="(" * 300 + ")" * 300)
def test_any_param_gives_a_value_or_a_usage_error(name, value):
    text = f"{name}={value}"
    try:
        parsed_name, _ = cli._parse_param(text)
    except UsageError as e:
        assert str(e).startswith("--param")
        return
    assert parsed_name == name


@FUZZ
@given(text=st.one_of(LINE_TEXT, st.tuples(st.integers(-2**70, 2**70), st.integers(-2**70, 2**70)).map(
    lambda lh: f"{lh[0]}:{lh[1]}")))
def test_any_int_range_gives_a_range_or_a_usage_error(text):
    try:
        low, high = cli._parse_range(text)
    except UsageError:
        return
    assert low < high


@FUZZ
@given(command=st.sampled_from(["run", "ir", "asm", "profile"]), directive=TOKENS, argv=TOKENS)
def test_the_command_line_ends_in_a_usage_error_never_a_traceback(tmp_path, capsys, command, directive, argv):
    """A kernel file of no known kind (so nothing is imported or compiled) with a random knit-run
    line, and random options: `knit` exits with status 2 (argparse's or Knit's usage error)."""
    path = _write(tmp_path, f"# knit-run: {shlex.join(directive)}\n")
    try:
        status = cli.main([command, path, *argv])
    except SystemExit as e:  # argparse: a bad command line (2), or --help (0)
        status = e.code
    assert status in (0, 2)
    capsys.readouterr()

