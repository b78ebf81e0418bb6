"""The defaults in the ISA functions' signatures are NKI's, and NKI's defaults are written once, in
the C++ op table (each op's fields() in ir/ops.h, knit._core.op_table()): a Python default that
names an instruction field must equal that field's default. None means "the instruction's
default" and always agrees."""
import enum
import inspect

import pytest

import knit.isa as nisa
import knit.legacy.isa as legacy_nisa
from knit import _core
from knit._operators import Op

# G1 (neuronxcc.nki) signatures whose documented default differs from the current API's, which
# the op table holds: {"op.field": G1 default}.
G1_DEFAULTS = {"range_select.reduce_cmd": "idle"}


def _normalized(value):
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, Op):
        return value.name
    if isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_normalized(v) for v in value]
    return value


def _mismatches(module, exceptions):
    out = []
    for row in _core.op_table():
        fn = getattr(module, row["name"], None)
        if fn is None:
            continue
        fields = dict(row["fields"])
        for p in inspect.signature(fn).parameters.values():
            if p.default is inspect.Parameter.empty or p.default is None or p.name not in fields:
                continue
            key = f"{row['name']}.{p.name}"
            core = exceptions.get(key, fields[p.name])
            if p.name == "engine" and module is legacy_nisa and p.default == 0:
                continue  # G1's engine number 0 is unknown_engine (legacy.isa._engine)
            ours, theirs = _normalized(p.default), _normalized(core)
            if ours != theirs:
                out.append(f"{module.__name__}.{key}: {p.default!r} in Python, {core!r} in the op table")
    return out


@pytest.mark.parametrize("module, exceptions", [(nisa, {}), (legacy_nisa, G1_DEFAULTS)],
                         ids=["knit.isa", "knit.legacy.isa"])
def test_isa_signature_defaults_are_the_op_tables(module, exceptions):
    assert not _mismatches(module, exceptions)


def test_the_g1_exceptions_are_real_differences():
    fields = {row["name"]: dict(row["fields"]) for row in _core.op_table()}
    for key, g1 in G1_DEFAULTS.items():
        op, field = key.split(".")
        assert fields[op][field] != g1, f"{key} agrees with the op table now; drop it from G1_DEFAULTS"
