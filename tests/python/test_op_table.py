"""The instruction list walked through every front end: each IR instruction that moves tensor data
is reachable from the Python ISA (knit.isa) and the C++ ISA (<knit/isa.h>) under its NKI name, and
the hardware limits the front ends show are the C++ core's."""
import pathlib
import re

import pytest

import knit.isa as nisa
import knit.language as nl
from knit import _core

REPO = pathlib.Path(__file__).resolve().parents[2]

def data_ops():
    return [row for row in _core.op_table() if row["role"] in ("compute", "dma")]


def test_the_op_table_lists_every_instruction_once_with_its_fields():
    rows = _core.op_table()
    names = [row["name"] for row in rows]
    assert len(names) == len(set(names))
    assert {"dma_copy", "nc_matmul", "tensor_tensor", "loop", "core_barrier"} <= set(names)
    by_name = {row["name"]: row for row in rows}
    # Spot checks against NKI's documented signatures and defaults.
    assert [f for f, _ in by_name["tensor_tensor"]["fields"]] == ["dst", "data1", "data2", "op", "engine"]
    assert dict(by_name["tensor_scalar"]["fields"])["reverse0"] is False
    assert dict(by_name["tensor_scalar"]["fields"])["op1"] == "bypass"
    assert dict(by_name["activation"]["fields"])["scale"] == 1.0
    assert by_name["nc_matmul"]["engine"] == "tensor" and by_name["dma_copy"]["role"] == "dma"
    assert by_name["loop"]["role"] == "block" and by_name["loop"]["engine"] == "sync"


@pytest.mark.parametrize("row", data_ops(), ids=lambda row: row["name"])
def test_every_data_instruction_has_a_python_isa_function(row):
    name = row["name"]
    assert callable(getattr(nisa, name, None)), f"knit.isa has no {name}(); add it (docs/architecture.md)"


@pytest.mark.parametrize("row", data_ops(), ids=lambda row: row["name"])
def test_every_data_instruction_has_a_cpp_isa_function(row):
    name = row["name"]
    header = (REPO / "dsl/include/knit/isa.h").read_text()
    assert re.search(rf"\b{name}\(", header), f"<knit/isa.h> has no isa::{name}(); add it (docs/architecture.md)"


def test_tile_sizes_are_the_cores():
    limits = _core.tile_size()
    assert limits["pmax"] == 128 and limits["psum_bank_fmax_bytes"] == 2048
    for key, value in limits.items():
        assert getattr(nl.tile_size, key) == value, key


def test_target_info_reports_each_generations_memory():
    trn1, trn3 = _core.target_info("trn1"), _core.target_info("trn3")
    assert trn1["sbuf_partition_bytes"] == 192 * 1024  # 24 MiB over 128 partitions
    assert trn3["sbuf_partition_bytes"] == 256 * 1024
    assert trn1["psum_bank_bytes"] == 2048
    with pytest.raises(ValueError, match="unknown target"):
        _core.target_info("trn9")


def test_alu_ops_and_activation_functions_come_from_the_core():
    alu = {row["name"]: row for row in _core.alu_ops()}
    assert alu["add"]["reduction"] and not alu["subtract"]["unary"] and alu["square"]["unary"]
    assert alu["bitwise_and"]["bitvec"]
    acts = _core.act_funcs()
    assert "exp" in acts and "gelu_apprx_tanh" in acts and len(acts) == len(set(acts))
    for name in acts:
        assert hasattr(nl, name), f"nl.{name} is missing"
