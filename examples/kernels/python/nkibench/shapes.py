"""The NKIBench kernels of this folder and the shapes NKIBench publishes their latencies at
(bench/calibration.py times them there; tests/python/test_nkibench_kernels.py traces them).

``load(name)`` imports this folder's ``<name>.py`` as module ``nkibench_<name>``: under its plain
name, ``matmul`` would clash with examples/kernels/python/matmul.py, which other code imports as
``matmul``."""
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def load(name):
    """This folder's module `name` (once per process)."""
    key = "nkibench_" + name
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, os.path.join(_HERE, name + ".py"))
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, _HERE)  # the kernels import their sibling _common
        try:
            spec.loader.exec_module(module)
        finally:
            sys.path.remove(_HERE)
        sys.modules[key] = module
    return sys.modules[key]


# name -> (kernel, NKIBench's shape label, the kernel's fp32 argument shapes at that shape)
PUBLISHED_SHAPES = {
    "matmul": (load("matmul").matmul_kernel, "M4096 N12288 K5120", [(4096, 5120), (5120, 12288)]),
    "transpose_matmul": (load("transpose_matmul").transpose_matmul_kernel, "M4096 K2048 N10944",
                         [(2048, 4096), (2048, 10944)]),
    "lora": (load("lora").lora_kernel, "M4096 N12288 K5120 R128",
             [(4096, 5120), (5120, 12288), (5120, 128), (128, 12288)]),
    "swiglu": (load("swiglu").swiglu_kernel, "M4096 N3072 K1024",
               [(4096, 1024), (1024, 3072), (1024, 3072), (3072, 1024)]),
    "silu": (load("silu").silu_kernel, "M4096 N7168", [(4096, 7168)]),
    "adamw": (load("adamw").adamw_kernel, "M10944 N2048", [(10944, 2048)] * 4),
    "bmm": (load("bmm").bmm_kernel, "B16 M4096 K64 N4096", [(16, 4096, 64), (16, 64, 4096)]),
}
