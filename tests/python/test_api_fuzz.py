"""Random calls of the public API give only Knit errors (issue 26 item 4, docs/reliability.md
"Bad input"): every public function of knit.language and knit.isa, called inside a traced kernel
with random argument values (huge and negative ints, inf, nan, strings, tuples, None, wrong dtypes,
tensors of every buffer), either works or raises NkiValidationError / KnitRuntimeError, or a
TypeError / ValueError whose message names this file and the line of the call. Never a pybind11
conversion error, an OverflowError, a bare Python error from inside Knit, or a crash.

The default run makes a few hundred calls (seconds); KNIT_API_FUZZ_CALLS=20000 makes more, and
KNIT_API_FUZZ_SEED picks another sequence. A failure prints the call that caused it."""
import inspect
import os
import random
import re

import numpy as np
import pytest

import knit
import knit.isa as nisa
import knit.language as nl

CALLS = int(os.environ.get("KNIT_API_FUZZ_CALLS", "400"))
SEED = int(os.environ.get("KNIT_API_FUZZ_SEED", "2026"))
HERE = os.path.basename(__file__)


def api_functions():
    out = []
    for prefix, module in (("nl", nl), ("nisa", nisa)):
        for name in sorted(dir(module)):
            fn = getattr(module, name)
            if name.startswith("_") or inspect.ismodule(fn) or inspect.isclass(fn) or not callable(fn):
                continue
            if isinstance(fn, nl.Op) and fn.fn is None:
                continue  # operator-only constants (nl.prelu, ...) are values, not calls
            if not isinstance(fn, nl.Op) and not hasattr(fn, "__knit_keywords__"):
                continue  # a helper the module imports (nl.user_error), not part of the API
            if getattr(fn, "__knit_unsupported__", False):
                continue  # every call is an error already (tests/python/test_api_keywords.py)
            try:
                params = list(inspect.signature(fn).parameters.values())
            except (TypeError, ValueError):
                continue
            out.append((f"{prefix}.{name}", fn, params))
    return out


# A tensor's methods and its indexing are API too: (label, how to call it on a tensor, signature).
METHODS = ["ap", "broadcast", "expand_dim", "flatten_dims", "permute", "rearrange", "reinterpret_cast", "reshape",
           "reshape_dim", "select", "slice", "squeeze_dim", "view", "vector_select"]


def method_call(method):
    def call(tensor, *args, **kwargs):
        return getattr(tensor, method)(*args, **kwargs)

    return call


def index(tensor, key):
    return tensor[key]


def api_calls():
    from knit._tensor import NkiTensor

    first = inspect.Parameter("tensor", inspect.Parameter.POSITIONAL_ONLY)
    calls = api_functions()
    for method in METHODS:
        params = list(inspect.signature(getattr(NkiTensor, method)).parameters.values())[1:]
        calls.append((f"NkiTensor.{method}", method_call(method), [first, *params]))
    calls.append(("NkiTensor.__getitem__", index, [first, inspect.Parameter("key", inspect.Parameter.POSITIONAL_ONLY)]))
    return calls


FUNCTIONS = api_calls()


def scalars():
    """Plain values that are wrong (or right) somewhere."""
    return [0, 1, -1, 3, 128, 2**31, 2**63, -(2**63), 10**30, -(10**30), 0.5, -2.5, float("inf"), -float("inf"),
            float("nan"), 1e308, True, None, "", "x", "add", (), (1, 2, 3), (128, 64), (0, 0), (-1, 4), [128],
            (2**40, 2**40), (float("inf"), 1), {"a": 1}, object(), b"bytes", 3 + 4j, slice(0, 2**63),
            slice(2**63, None), slice(None, None, 0), slice(-(2**70), 5, -1),
            (slice(0, 64), 2**63), (Ellipsis, None), Ellipsis,
            np.float32, nl.float32, nl.bfloat16, nl.int32, np.dtype("complex64"), "float32", "bogus_dtype",
            np.int64(7), np.float64("nan"), np.ones((2, 2), np.float32), nl.add, nl.sbuf, nl.psum, nl.hbm,
            nl.shared_hbm, nisa.engine.vector, np.nan_to_num]


class Pool:
    """Argument values for one traced kernel: its tensors, registers and the plain values."""

    def __init__(self, rng, x):
        self.rng = rng
        tiles = [nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf), nl.ndarray((128, 64), nl.bfloat16, buffer=nl.sbuf),
                 nl.ndarray((64, 128), nl.float32, buffer=nl.psum), nl.ndarray((128, 1), nl.int32, buffer=nl.sbuf),
                 nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)]
        nisa.memset(dst=tiles[0], value=1.0)
        self.tensors = tiles + [x, x[0:64, 0:32], tiles[0][0:32, :], nl.ndarray((128, 64), nl.float32,
                                                                                  buffer=nl.shared_hbm)]
        self.registers = [nisa.register_alloc(3)]
        self.values = scalars()

    def value(self):
        pick = self.rng.random()
        if pick < 0.45:
            return self.rng.choice(self.tensors)
        if pick < 0.5:
            return self.rng.choice(self.registers)
        if pick < 0.55:  # a tuple or list mixing kinds
            return tuple(self.rng.choice(self.values + self.tensors) for _ in range(self.rng.randint(1, 3)))
        return self.rng.choice(self.values)

    def arguments(self, params):
        args, kwargs = [], {}
        for p in params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            optional = p.default is not inspect.Parameter.empty
            if optional and self.rng.random() < 0.6:
                continue
            if p.kind is p.POSITIONAL_ONLY or (p.kind is p.POSITIONAL_OR_KEYWORD and not kwargs
                                               and self.rng.random() < 0.5):
                args.append(self.value())
            else:
                kwargs[p.name] = self.value()
        return args, kwargs


def describe(value):
    text = repr(value)
    return text if len(text) < 60 else text[:57] + "..."


def acceptable(e):
    """A Knit error, or a TypeError / ValueError that points at the call in this file."""
    if isinstance(e, knit.KnitError):
        return getattr(e, "kind", None) in ("user", "runtime") and isinstance(e, (knit.NkiValidationError,
                                                                                  knit.KnitRuntimeError))
    if type(e).__name__ in ("OverflowError", "MemoryError", "RecursionError"):
        return False
    if isinstance(e, (TypeError, ValueError)):
        text = str(e)
        return "Unable to cast" not in text and "incompatible function arguments" not in text and bool(
            re.search(re.escape(HERE) + r":\d+", text))
    return False


def one_call(rng, x_array):
    """Traces a kernel making one random call; returns None, or a description of a bad outcome."""
    name, fn, params = rng.choice(FUNCTIONS)
    record = {}

    @knit.jit
    def kernel(x):
        pool = Pool(rng, x)
        if name.startswith("NkiTensor."):  # a method of one of the kernel's tensors
            args, kwargs = pool.arguments(params[1:])
            args.insert(0, rng.choice(pool.tensors))
        else:
            args, kwargs = pool.arguments(params)
        shown = [describe(a) for a in args] + [f"{k}={describe(v)}" for k, v in kwargs.items()]
        record["call"] = f"{name}({', '.join(shown)})"
        fn(*args, **kwargs)  # the call under test
        out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=x)
        return out

    try:
        knit.compile(kernel, x_array)
    except Exception as e:  # noqa: BLE001 - classifying every outcome is the point
        if not acceptable(e):
            return f"{record.get('call', name)} raised {type(e).__name__}: {str(e).splitlines()[0][:300]}"
    return None


def test_random_api_calls_give_only_knit_errors():
    rng = random.Random(SEED)
    x = np.ones((128, 64), np.float32)
    bad = []
    for _ in range(CALLS):
        outcome = one_call(rng, x)
        if outcome:
            bad.append(outcome)
    assert not bad, f"{len(bad)} of {CALLS} calls gave a non-Knit error:\n" + "\n".join(sorted(set(bad))[:60])


@pytest.mark.parametrize("name,fn,params", FUNCTIONS, ids=[f[0] for f in FUNCTIONS])
def test_every_function_is_fuzzed(name, fn, params):
    """Each function separately, a few calls each, so none is left out by chance."""
    rng = random.Random(f"{SEED}-{name}")
    x = np.ones((128, 64), np.float32)
    bad = [o for o in (one_call_of(rng, x, name, fn, params) for _ in range(4)) if o]
    assert not bad, "\n".join(bad)


def one_call_of(rng, x, name, fn, params):
    saved = FUNCTIONS[:]
    FUNCTIONS[:] = [(name, fn, params)]
    try:
        return one_call(rng, x)
    finally:
        FUNCTIONS[:] = saved
