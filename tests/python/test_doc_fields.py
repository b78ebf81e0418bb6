"""docs/ir.md's table "Fields and defaults of every instruction" against the op table.

The instruction list, each op's fields in print order and their defaults come from
`knit._core.op_table()` (KNIT_OPS and each op struct's `fields()`). A default the table gives
must equal the op table's. The op table says None both for a required operand and for an
optional one that defaults to absent, so those fields are told apart with the IR text printer:
a required field must print when given a view (or a register, for fields marked "(register)")
and must not take `none`; a field documented `=none` must parse `none` and print without it.

docs/architecture.md's instruction semantics table must have one row per op too."""
import re
from pathlib import Path

import pytest

from knit import _core

REPO = Path(__file__).resolve().parents[2]

# {op text name: [(field, default), ...]} in KNIT_OPS order.
OPS = {row["name"]: row["fields"] for row in _core.op_table()}


def split_fields(cell):
    """'dst, axes=[], dge_mode=unknown' -> ['dst', 'axes=[]', 'dge_mode=unknown'] (commas inside
    brackets do not split)."""
    out, depth, cur = [], 0, ""
    for ch in cell:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def doc_table():
    """{op: [(field, default or None, kind or None)]} from docs/ir.md."""
    text = (REPO / "docs/ir.md").read_text()
    section = text.split("### Fields and defaults of every instruction", 1)[1].split("\n#", 1)[0]
    rows = {}
    for line in section.splitlines():
        m = re.fullmatch(r"\| (`.*?`) \| (.*) \|", line.strip())
        if not m:
            continue
        names = re.findall(r"`(\w+)`", m.group(1))
        fields = []
        for item in split_fields(m.group(2).replace("—", "")):
            f = re.fullmatch(r"(\w+)(?:=(\S+))?(?: \((\w+)\))?", item)
            assert f, f"docs/ir.md: cannot read field {item!r} of {names}"
            fields.append((f.group(1), f.group(2), f.group(3)))
        for name in names:
            rows[name] = fields
    assert rows, "docs/ir.md: the fields table was not found"
    return rows


DOC = doc_table()


def test_every_op_has_a_row():
    assert sorted(set(OPS) - set(DOC)) == [], "ops missing from docs/ir.md's fields table"
    assert sorted(set(DOC) - set(OPS)) == [], "docs/ir.md's fields table lists ops that do not exist"


@pytest.mark.parametrize("op", sorted(OPS))
def test_fields_in_print_order(op):
    documented = [f for f, _, _ in DOC.get(op, [])]
    actual = [f for f, _ in OPS[op]]
    assert documented == actual, f"docs/ir.md, {op}: fields {documented}, but the op table has {actual}"


def doc_value(text):
    """A default as docs/ir.md writes it, as op_table() gives it: `false` -> False, `[]` -> [],
    `1` -> 1.0 (compared as a number), `none` -> None, enum names stay strings."""
    if text in ("true", "false"):
        return text == "true"
    if text == "none":
        return None
    if text == "[]":
        return []
    try:
        return float(text)
    except ValueError:
        return text


def same_default(documented, actual):
    if isinstance(documented, float) and not isinstance(actual, bool) and isinstance(actual, (int, float)):
        return documented == float(actual)
    return documented == actual


def printed(op, field, value, must_parse=True):
    """The instruction line the printer writes for `op field=value` (nothing else set); None
    when it does not parse and must_parse is False."""
    text = (f'kernel "k" target=trn2 {{\n  tensor %0 "t" sbuf float32[4, 4]\n'
            f"  {op} {field}={value}\n  return\n}}\n")
    try:
        out = _core.roundtrip_ir(text)
    except Exception as e:  # the parser's message names the op and field
        if not must_parse:
            return None
        pytest.fail(f"docs/ir.md, {op}.{field}={value}: does not parse: {e}")
    return out.splitlines()[2].strip()


@pytest.mark.parametrize("op", sorted(OPS))
def test_defaults(op):
    actual = dict(OPS[op])
    for field, default, kind in DOC.get(op, []):
        if field not in actual:
            continue  # test_fields_in_print_order reports it
        if default == "none" and actual[field] == "none":
            continue  # an enum whose value is named none (nc_matmul's perf_mode)
        if default is not None and default != "none":
            assert same_default(doc_value(default), actual[field]), (
                f"docs/ir.md, {op}.{field}: documented default {default}, the op table's is {actual[field]!r}")
            continue
        assert actual[field] is None, (
            f"docs/ir.md, {op}.{field}: the op table's default is {actual[field]!r}; the table should give it")
        # None in the op table: a required operand or an optional one that defaults to absent.
        line = printed(op, field, "none", must_parse=False)
        if default == "none":
            assert line is not None and f"{field}=" not in line, (
                f"docs/ir.md, {op}.{field}: documented =none, but `none` is not its default ({line})")
        else:
            value = "r0" if kind == "register" else "%0@0[[4,4],[1,4]]"
            line_given = printed(op, field, value)
            assert f"{field}={value}" in line_given, f"docs/ir.md, {op}.{field}: does not print when given"
            assert line is None or f"{field}=" in line, (
                f"docs/ir.md, {op}.{field}: its default is none; the table should say {field}=none")


def test_semantics_table_has_every_op():
    text = (REPO / "docs/architecture.md").read_text()
    section = text.split("### Instruction semantics", 1)[1]
    rows = re.findall(r"^\| \d+ \| `(\w+)` \|", section, re.MULTILINE)
    assert sorted(set(OPS) - set(rows)) == [], "ops missing from architecture.md's instruction semantics table"
    assert sorted(set(rows) - set(OPS)) == [], "architecture.md's semantics table lists ops that do not exist"
