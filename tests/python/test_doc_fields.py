"""docs/ir.md's table "Fields and defaults of every instruction" against the op table.

The instruction list and each op's fields, in print order, come from KNIT_OPS and the `fields()`
methods in ir/include/knit/ir/ops.h and ops_control.h (knit._core does not list them). Each
default the table gives is checked with the IR text printer itself: an instruction parsed with
`field=<default>` must print without that field, because the printer leaves out exactly the
fields equal to their defaults. A field the table lists without a default must print when given
a view (or a register, for fields marked "(register)") and must not take `none` as its default,
so it is a required operand.

docs/architecture.md's instruction semantics table must have one row per op too."""
import re
from pathlib import Path

import pytest

from knit import _core

REPO = Path(__file__).resolve().parents[2]
OPS_HEADERS = [REPO / "ir/include/knit/ir/ops.h", REPO / "ir/include/knit/ir/ops_control.h"]


def op_table():
    """{op text name: [field, ...]} in KNIT_OPS order, read from the headers."""
    source = "\n".join(h.read_text() for h in OPS_HEADERS)
    fields_of = {}
    for m in re.finditer(r"struct (\w+) \{(.*?)\n\};", source, re.S):
        body = re.search(r"void fields\(F&& f\) \{(.*?)\}", m.group(2), re.S)
        fields_of[m.group(1)] = re.findall(r'f\("(\w+)"', body.group(1)) if body else []
    table = re.search(r"#define KNIT_OPS\(X\)(.*?)\n\n", source, re.S).group(1)
    ops = {}
    for struct, name in re.findall(r"X\((\w+), (\w+)\)", table):
        assert struct in fields_of, f"KNIT_OPS names struct {struct}, which the headers do not define"
        ops[name.rstrip("_")] = fields_of[struct]
    assert len(ops) > 40, "reading KNIT_OPS from ops.h failed; update op_table() for its new form"
    return ops


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


OPS = op_table()
DOC = doc_table()


def test_every_op_has_a_row():
    assert sorted(set(OPS) - set(DOC)) == [], "ops missing from docs/ir.md's fields table"
    assert sorted(set(DOC) - set(OPS)) == [], "docs/ir.md's fields table lists ops that do not exist"


@pytest.mark.parametrize("op", sorted(OPS))
def test_fields_in_print_order(op):
    documented = [f for f, _, _ in DOC.get(op, [])]
    assert documented == OPS[op], f"docs/ir.md, {op}: fields {documented}, but ops.h prints {OPS[op]}"


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
    for field, default, kind in DOC.get(op, []):
        if default is not None:
            line = printed(op, field, default)
            assert f"{field}=" not in line, f"docs/ir.md, {op}.{field}: the default is not {default} (prints `{line}`)"
        else:
            value = "r0" if kind == "register" else "%0@0[[4,4],[1,4]]"
            line = printed(op, field, value)
            assert f"{field}={value}" in line, f"docs/ir.md, {op}.{field}: has a default; the table should give it"
            # An optional operand (std::optional<View>, Operand) takes `none` and omits it.
            line = printed(op, field, "none", must_parse=False)
            assert line is None or f"{field}=" in line, f"docs/ir.md, {op}.{field}: its default is none; the table should say {field}=none"


def test_semantics_table_has_every_op():
    text = (REPO / "docs/architecture.md").read_text()
    section = text.split("### Instruction semantics", 1)[1]
    rows = re.findall(r"^\| \d+ \| `(\w+)` \|", section, re.M)
    assert sorted(set(OPS) - set(rows)) == [], "ops missing from architecture.md's instruction semantics table"
    assert sorted(set(rows) - set(OPS)) == [], "architecture.md's semantics table lists ops that do not exist"
