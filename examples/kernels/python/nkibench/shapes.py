"""The NKIBench kernels of this folder and the shapes NKIBench publishes their latencies at
(bench/calibration.py times them there; tests/python/test_nkibench_kernels.py traces them)."""
from adamw import adamw_kernel
from bmm import bmm_kernel
from lora import lora_kernel
from silu import silu_kernel
from swiglu import swiglu_kernel
from transpose_matmul import transpose_matmul_kernel

from matmul import matmul_kernel

# name -> (kernel, NKIBench's shape label, the kernel's fp32 argument shapes at that shape)
PUBLISHED_SHAPES = {
    "matmul": (matmul_kernel, "M4096 N12288 K5120", [(4096, 5120), (5120, 12288)]),
    "transpose_matmul": (transpose_matmul_kernel, "M4096 K2048 N10944", [(2048, 4096), (2048, 10944)]),
    "lora": (lora_kernel, "M4096 N12288 K5120 R128", [(4096, 5120), (5120, 12288), (5120, 128), (128, 12288)]),
    "swiglu": (swiglu_kernel, "M4096 N3072 K1024", [(4096, 1024), (1024, 3072), (1024, 3072), (3072, 1024)]),
    "silu": (silu_kernel, "M4096 N7168", [(4096, 7168)]),
    "adamw": (adamw_kernel, "M10944 N2048", [(10944, 2048)] * 4),
    "bmm": (bmm_kernel, "B16 M4096 K64 N4096", [(16, 4096, 64), (16, 64, 4096)]),
}
