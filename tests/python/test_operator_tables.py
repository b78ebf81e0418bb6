"""The Python API reads the C++ tables instead of keeping copies: every ALU operator and activation
function of the core (KNIT_ALU_OPS, KNIT_ACT_FUNCS) is an nl.* operator object in both API
generations, every nl.* operator names only what the core knows, and nl.tile_size is the core's."""
import pytest

import knit.language as nl
import knit.legacy.language as legacy_nl
from knit import _core
from knit._operators import NUMPY_NAMES, OPERATOR_ONLY, Op

ALU = {row["name"]: row for row in _core.alu_ops()}
ACT = set(_core.act_funcs())
APIS = [pytest.param(nl, id="knit.language"), pytest.param(legacy_nl, id="knit.legacy.language")]


def _operators(module):
    return {name: value for name, value in vars(module).items() if isinstance(value, Op)}


@pytest.mark.parametrize("api", APIS)
def test_every_core_alu_op_is_an_nl_operator(api):
    missing = [name for name in ALU if getattr(getattr(api, name, None), "alu", None) != name]
    assert not missing, f"{api.__name__} has no operator for the C++ ALU ops {missing} (knit/_operators.py)"


@pytest.mark.parametrize("api", APIS)
def test_every_core_activation_function_is_an_nl_operator(api):
    missing = [name for name in sorted(ACT) if getattr(getattr(api, name, None), "act", None) != name]
    assert not missing, f"{api.__name__} has no operator for the C++ activation functions {missing}"


@pytest.mark.parametrize("api", APIS)
def test_every_nl_operator_names_only_what_the_core_knows(api):
    ops = _operators(api)
    assert ops, api.__name__
    unknown = [(name, op.alu, op.act) for name, op in ops.items()
               if (op.alu is not None and op.alu not in ALU) or (op.act is not None and op.act not in ACT)]
    assert not unknown, f"{api.__name__} operators name ALU ops / activations the core lacks: {unknown}"


def test_the_current_api_has_exactly_the_cores_operators():
    """knit.language's operator objects are the C++ tables' names, no more (the legacy API adds
    G1 calls such as nl.sum and nl.negative that lower to other instructions)."""
    assert set(_operators(nl)) == set(ALU) | ACT


def test_python_only_operator_facts_name_core_operators():
    assert OPERATOR_ONLY <= set(ALU) | ACT
    assert {v for v in NUMPY_NAMES.values() if v is not None} <= set(ALU) | ACT


def test_operator_only_names_are_not_calls_in_the_current_api():
    for name in OPERATOR_ONLY:
        assert getattr(nl, name).fn is None, name
    assert nl.add.fn is not None and nl.exp.fn is not None


@pytest.mark.parametrize("api", APIS)
def test_tile_size_is_the_cores(api):
    limits = _core.tile_size()
    shown = {name: value for name, value in vars(api.tile_size).items() if not name.startswith("_")}
    assert shown == limits
    assert set(api.tile_size.__annotations__) == set(limits), "the typed names of nl.tile_size drifted from C++"


def test_python_reduction_tables_name_only_legal_reductions():
    """The legacy facade's masked-reduction identities and its nl.sum/max/min/prod operators are
    kept in Python (the identity of a *masked* reduction is not the accumulator reset the core
    knows); every operator they name must be a legal reduction in the core's table."""
    from knit.legacy import _ops
    from knit.legacy.language import _REDUCTIONS

    legal = {name for name, row in ALU.items() if row["reduction"]}
    assert set(_ops._IDENTITY) <= legal
    assert {alu for alu in _REDUCTIONS.values() if alu is not None} <= legal
