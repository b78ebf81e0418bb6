"""Instructions and errors name the user's line. knit._source.located_at pins that line while a
call made earlier is emitted later (a deferred legacy result goes through knit.isa's functions,
which find the line with user_location())."""
import re

import numpy as np
import pytest

import knit.legacy as nki
import knit.legacy.isa as nisa
import knit.legacy.language as nl
from kernel_test_util import source_line
from knit._source import call_at, located_at, user_location


def test_located_at_pins_user_location_and_restores_it():
    here = user_location()
    assert here is not None and here[0] == __file__
    with located_at(("kernel.py", 7, 0)):
        assert user_location() == ("kernel.py", 7, 0)
        with located_at(("kernel.py", 9, 0)):
            assert user_location() == ("kernel.py", 9, 0)
        assert user_location() == ("kernel.py", 7, 0)
    assert user_location()[0] == __file__


def test_located_at_restores_after_an_error():
    with pytest.raises(RuntimeError), located_at(("kernel.py", 7, 0)):
        raise RuntimeError
    assert user_location()[0] == __file__


def test_call_at_pins_for_one_call_and_returns_its_value():
    assert call_at(("kernel.py", 3, 0), user_location) == ("kernel.py", 3, 0)
    with pytest.raises(ZeroDivisionError):
        call_at(("kernel.py", 3, 0), lambda: 1 / 0)
    assert user_location()[0] == __file__


def test_a_deferred_legacy_result_carries_the_line_of_its_call():
    @nki.jit
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        x = nl.load(a)
        y = nisa.activation(nl.exp, x)  # DEFERRED-EXP
        z = nisa.tensor_scalar(x, np.multiply, 2.0)  # DEFERRED-MUL
        nl.store(out, nl.add(y, z))  # STORE
        return out

    a = np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32)
    assert np.allclose(kernel(a), np.exp(a) + 2 * a, rtol=1e-5, atol=1e-6)
    lines = {op: int(line) for op, line in re.findall(r"^\s*(?:%\S+ = )?(\w+)\b.*@ \"[^\"]+\":(\d+)",
                                                       kernel.compile(a).ir, re.MULTILINE)}
    assert lines["activation"] == source_line(__file__, "# DEFERRED-EXP")
    assert lines["tensor_scalar"] == source_line(__file__, "# DEFERRED-MUL")
