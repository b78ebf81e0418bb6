"""Helpers and kernels shared by the test files."""
import functools
import importlib.util
import os
import re

import numpy as np

import knit
import knit.isa as nisa
import knit.language as nl


def source_line(path, marker):
    """Line number in `path` of the first line containing `marker` that is not a `_line(` lookup."""
    with open(path) as f:
        for i, text in enumerate(f, 1):
            if marker in text and "_line(" not in text:
                return i
    raise AssertionError(marker)


def errors_of_both(compiled, *args):
    """(reference error, JIT error): the KnitRuntimeError each backend raises running `args`."""
    import pytest

    errors = []
    for run in (lambda: compiled.reference(*args), lambda: compiled.run(*args, backend="jit-strict")):
        with pytest.raises(knit.KnitRuntimeError) as info:
            run()
        errors.append(info.value)
    return tuple(errors)


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples", "kernels", "python")
BENCH = os.path.join(ROOT, "bench")


@functools.cache
def load_file(path):
    """Imports the Python file at `path` as a module (examples/ and bench/ are not packages), once."""
    name = "knit_file_" + re.sub(r"\W", "_", os.path.abspath(path))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_example(relpath):
    """Imports examples/kernels/python/<relpath> as a module, once."""
    return load_file(os.path.join(EXAMPLES, relpath))



def randn(*shape, seed=0):
    """Standard-normal float32 data of `shape`, reproducible by `seed`."""
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@knit.jit
def sum_first_n_tiles(a, n_tiles):
    """Sums the first n_tiles[0, 0] row tiles of `a`: the trip count of a device loop comes from a
    tensor (register_load), and acc persists across iterations."""
    f = a.shape[1]
    count_tile = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=count_tile, src=n_tiles)
    count = nisa.register_alloc()
    nisa.register_load(count, count_tile)
    acc = nl.ndarray((128, f), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)

    def body(i):
        t = nl.ndarray((128, f), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[nl.ds(i * 128, 128), :])
        nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)

    nl.fori_loop(0, count, body)
    out = nl.ndarray((128, f), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=acc)
    return out


def load_tile(src, dtype=None):
    """Inside a kernel: HBM -> a new SBUF tile of the same shape (one dma_copy, converting if
    `dtype` differs)."""
    t = nl.ndarray(src.shape, dtype or src.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=src)
    return t


def store_tile(t, dtype=None):
    """Inside a kernel: a new shared_hbm tensor holding `t` (one dma_copy, converting if `dtype`
    differs)."""
    out = nl.ndarray(t.shape, dtype or t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out
