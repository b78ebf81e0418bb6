"""Unknown keyword arguments are errors in the whole public API (knit/_keywords.py): every
public callable of knit.isa, knit.language and the legacy facade (knit.legacy.isa /
knit.legacy.language, what neuronxcc.nki maps to) rejects a keyword it does not take with a
TypeError that names it, suggests the closest valid name, is raised before any instruction is
emitted and points at the kernel's line."""
import inspect

import numpy as np
import pytest

import knit
import knit.isa as nisa
import knit.language as nl
import knit.legacy as legacy
import knit.legacy.isa as lisa
import knit.legacy.language as lnl
from knit._keywords import IGNORED, UnknownKeywordError

BOGUS = "knit_bogus_keyword"
MODULES = {"nisa": nisa, "nl": nl, "legacy nisa": lisa, "legacy nl": lnl}


def _public_callables():
    for label, module in MODULES.items():
        for name in sorted(dir(module)):
            value = getattr(module, name)
            if name.startswith("_") or inspect.ismodule(value) or not callable(value):
                continue
            if isinstance(value, nl.Op) and value.fn is None:
                continue  # operator-only constants (nl.prelu, nl.bypass, nl.average) are not calls
            yield pytest.param(value, id=f"{label}.{name}")


@pytest.mark.parametrize("fn", list(_public_callables()))
def test_bogus_keyword_is_a_type_error(fn):
    if getattr(fn, "__knit_unsupported__", False):  # a G1 call Knit lacks: every call is an error
        with pytest.raises(knit.NkiValidationError, match="not supported"):
            fn(**{BOGUS: 1})
        return
    with pytest.raises(TypeError) as info:
        fn(**{BOGUS: 1})
    if not inspect.isclass(fn):  # a class without __init__ says "takes no arguments"
        assert BOGUS in str(info.value)


def test_every_api_function_is_checked():
    """The API functions themselves (not the classes and enums) go through the checker, so their
    errors name the function and suggest a name."""
    for label, module in MODULES.items():
        for name in dir(module):
            fn = getattr(module, name)
            own = getattr(fn, "__module__", "") in (module.__name__, "knit._wrappers")
            unsupported = getattr(fn, "__knit_unsupported__", False)
            if name.startswith("_") or not inspect.isfunction(fn) or not own or unsupported:
                continue
            assert hasattr(fn, "__knit_keywords__"), f"{label}.{name} does not check its keywords"


def test_ignored_keywords_name_real_functions():
    for qualified in IGNORED:
        prefix, _, name = qualified.partition(".")
        assert hasattr({"nisa": nisa, "nl": nl}[prefix], name), qualified


def _run(kernel, *args):
    return knit.simulate(kernel)(*args)


def test_misspelled_option_suggests_the_real_one():
    seen = {}

    def kernel(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        u = nl.ndarray(a.shape, a.dtype)
        try:
            nisa.tensor_scalar(u, t, nl.add, 1.0, reverse0=True, revers1=True)
        except TypeError as e:
            seen["error"] = e
        nisa.tensor_copy(u, t)
        nl.store(out, u)
        return out

    a = np.ones((4, 8), np.float32)
    _run(kernel, a)
    err = seen["error"]
    assert isinstance(err, UnknownKeywordError) and isinstance(err, knit.NkiValidationError)
    text = str(err)
    assert "nisa.tensor_scalar()" in text and "'revers1'" in text and "did you mean 'reverse1'" in text
    assert err.file == __file__ and err.rule == "unknown-keyword"
    assert "nisa.tensor_scalar(u, t, nl.add" in text  # the kernel's own line, with a caret


def test_unknown_keyword_emits_nothing():
    def kernel(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        with pytest.raises(TypeError, match="bogus"):
            nisa.activation(t, nl.exp, t, bogus=5)
        with pytest.raises(TypeError, match="did you mean 'keepdims'"):
            nl.sum(t, axis=1, keepdim=True)
        nl.store(out, t)
        return out

    ir = knit.compile(kernel, np.ones((4, 8), np.float32)).ir
    assert "activation" not in ir and "tensor_reduce" not in ir


def test_legacy_misspelling_suggests_the_real_one():
    seen = {}

    @legacy.jit
    def kernel(a):
        out = lnl.ndarray(a.shape, a.dtype, buffer=lnl.shared_hbm)
        t = lnl.load(a)
        try:
            lisa.tensor_scalar(t, np.add, 1.0, revers0=True)
        except TypeError as e:
            seen["nisa"] = str(e)
        try:
            lnl.exp(t, dtyp=lnl.float32)
        except TypeError as e:
            seen["nl"] = str(e)
        lnl.store(out, t)
        return out

    kernel(np.ones((4, 8), np.float32))
    assert "nisa.tensor_scalar()" in seen["nisa"] and "did you mean 'reverse0'" in seen["nisa"]
    assert "nl.exp()" in seen["nl"] and "did you mean 'dtype'" in seen["nl"]


def test_documented_extras_still_work():
    """mask=None (G1 code), tensor_copy(dtype=) (nki-samples) and activation(alpha=) (Knit's
    prelu slope) are accepted; a real mask= in the current API points to the legacy facade."""
    def kernel(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        u = nl.ndarray(a.shape, a.dtype)
        nisa.tensor_copy(u, t, dtype=nl.float32, mask=None)
        nisa.activation(u, nl.prelu, u, alpha=0.5)
        with pytest.raises(knit.NkiValidationError, match="legacy"):
            nisa.tensor_copy(u, t, mask=True)
        nl.store(out, u)
        return out

    a = np.array([[-2.0, 4.0]], np.float32)
    assert np.array_equal(_run(kernel, a), np.array([[-1.0, 4.0]], np.float32))


def test_operator_names_are_the_cores():
    """knit/_operators.py names each operator's ALU op and activation function as the C++ op table
    does (an unknown name would be a ValueError from the builder, not a verifier rule)."""
    from knit._operators import OPS

    unknown = []

    def kernel(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        u = nl.ndarray(a.shape, a.dtype)
        for op in OPS.values():
            for kind, emit in (("alu", lambda op=op: nisa.tensor_tensor(u, t, t, op)),
                               ("act", lambda op=op: nisa.activation(u, op, t))):
                if getattr(op, kind) is None:
                    continue
                try:
                    emit()
                except knit.KnitError:
                    pass  # a verifier rule (e.g. a bit-vector op on floats): the name itself was known
                except ValueError:
                    unknown.append((op.name, kind))
        nl.store(out, t)
        return out

    knit.compile(kernel, np.ones((4, 8), np.float32))
    assert not unknown
