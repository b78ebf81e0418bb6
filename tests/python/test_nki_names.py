"""Every public name of NKI 0.6's ``nki``, ``nki.language`` and ``nki.isa`` exists in Knit.

The lists below are NKI 0.6.0's public names (Neuron SDK 2.32; the API stubs
``nki/api/nki/{__init__,language/__init__,isa/__init__}.py`` of aws-neuron/aws-neuron-sdk at
81ce03a, as recorded in the project's reference notes nki-api.md and nki-0.6-additions.md). They
are kept here as literals, so a name dropped from Knit fails this test by name. ``nki`` maps to
``knit``, ``nki.language`` to ``knit.language`` and ``nki.isa`` to ``knit.isa`` (knit.compat).

docs/language.md's "NKI 0.6 names" table lists the status of exactly these names
(test_the_docs_status_table_covers_every_name), so the table cannot drift from the lists.
"""
import re
from pathlib import Path

import numpy as np
import pytest

import knit
import knit.isa as nisa
import knit.language as nl

NKI_NAMES = [
    "jit", "simulate", "benchmark", "baremetal", "profile", "dtype", "language", "isa", "typing",
]

NKI_LANGUAGE_NAMES = [
    # dtypes
    "bool_", "int8", "int16", "int32", "uint8", "uint16", "uint32", "float16", "float32", "bfloat16", "tfloat32",
    "float8_e4m3", "float8_e5m2", "float8_e4m3fn", "float8_e8m0fnu", "float8_e5m2_x4", "float8_e4m3fn_x4",
    "float4_e2m1fn_x4",
    # buffers
    "sbuf", "psum", "hbm", "private_hbm", "shared_hbm", "MemoryRegion", "is_hbm", "is_sbuf", "is_psum", "is_on_chip",
    # tensor creation
    "ndarray", "zeros", "ones", "full", "rand", "zeros_like", "empty_like", "shared_constant",
    "shared_identity_matrix", "random_seed",
    # loops, control flow, helpers
    "affine_range", "sequential_range", "static_range", "dynamic_range", "fori_loop", "while_loop", "no_reorder",
    "ds", "tile_size", "NKIObject", "program_id", "num_programs", "program_ndim", "device_print",
    # data movement and convenience wrappers
    "load", "store", "load_transpose2d", "copy", "matmul", "transpose", "broadcast_to", "expand_dims",
    "gather_flattened", "where", "dropout", "rms_norm", "softmax",
    # element-wise math
    "add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "abs_max", "abs_min", "fmod", "mod",
    "abs", "negative", "sign", "square", "sqrt", "rsqrt", "reciprocal", "exp", "log", "sin", "cos", "tan", "arctan",
    "tanh", "ceil", "floor", "trunc",
    "relu", "sigmoid", "silu", "silu_dx", "gelu", "gelu_dx", "gelu_apprx_tanh", "gelu_apprx_sigmoid",
    "gelu_apprx_sigmoid_dx", "mish", "softplus", "erf", "erf_dx",
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
    "logical_and", "logical_or", "logical_xor", "logical_not",
    "bitwise_and", "bitwise_or", "bitwise_xor", "invert", "left_shift", "right_shift",
    # reductions
    "sum", "max", "min", "mean", "prod", "var", "all",
    # operator-only constants
    "prelu", "bypass", "average",
]

NKI_ISA_NAMES = [
    # enums, aliases, target queries, classes
    "engine", "tensor_engine", "vector_engine", "scalar_engine", "gpsimd_engine", "unknown_engine", "reduce_cmd",
    "dge_mode", "oob_mode", "matmul_perf_mode", "dma_engine", "nc_version", "get_nc_version", "get_nc_sub_version",
    "VirtualRegister", "NkiInstruction", "NkiValidationError",
    # Tensor Engine
    "nc_matmul", "nc_matmul_mx", "quantize_mx", "nc_transpose",
    # Scalar Engine
    "activation", "activation_reduce", "activate2",
    # Vector / GpSimd engines
    "tensor_tensor", "tensor_scalar", "scalar_tensor_tensor", "tensor_reduce", "tensor_partition_reduce",
    "tensor_copy", "tensor_copy_predicated", "memset", "iota", "affine_select", "select_reduce", "range_select",
    "reciprocal", "tensor_tensor_scan", "tensor_scalar_reduce", "tensor_scalar_cumulative", "exponential", "bn_stats",
    "bn_aggr", "max8", "nc_find_index8", "nc_match_replace8", "local_gather", "nc_n_gather", "nc_stream_shuffle",
    "nonzero_with_count", "sequence_bounds", "topk",
    # random numbers
    "dropout", "rng", "rand2", "rand_get_state", "rand_set_state", "set_rng_seed",
    # DMA, registers, multi-core
    "dma_copy", "dma_transpose", "dma_compute", "register_alloc", "register_move", "register_load", "register_store",
    "core_barrier", "sendrecv",
]

# nki.collectives (knit.collectives).
NKI_COLLECTIVES_NAMES = [
    "all_reduce", "all_gather", "all_gather_v", "reduce_scatter", "all_to_all", "all_to_all_v", "collective_permute",
    "collective_permute_implicit", "collective_permute_implicit_reduce",
    "collective_permute_implicit_current_processing_rank_id", "rank_id", "ReplicaGroup",
]

MODULES = [("nki", knit, NKI_NAMES), ("nki.language", nl, NKI_LANGUAGE_NAMES), ("nki.isa", nisa, NKI_ISA_NAMES),
           ("nki.collectives", knit.collectives, NKI_COLLECTIVES_NAMES)]
DOCS = Path(__file__).resolve().parents[2] / "docs" / "language.md"


@pytest.mark.parametrize("nki_module, module, names", MODULES, ids=[m[0] for m in MODULES])
def test_every_nki_06_name_exists(nki_module, module, names):
    missing = [n for n in names if not hasattr(module, n)]
    assert not missing, f"{nki_module} names missing from {module.__name__}: {', '.join(missing)}"


def test_the_lists_have_no_duplicates():
    for _, _, names in MODULES:
        assert len(names) == len(set(names))


def test_compat_maps_nki_to_these_modules():
    from knit import compat

    families = dict(compat._FAMILIES["nki"])
    assert families["nki"] == "knit" and families["nki.language"] == "knit.language"
    assert families["nki.isa"] == "knit.isa" and families["nki.collectives"] == "knit.collectives"


def docs_status_table():
    """{qualified name: status} from docs/language.md's "NKI 0.6 names" table."""
    section = DOCS.read_text().split("\n## 8. NKI 0.6 names\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) < 4 or not cells[1].startswith("`"):
            continue
        status = re.match(r"(supported with note|supported|not supported)\b", cells[2])
        assert status, f"unknown status in docs table row: {line}"
        for name in re.findall(r"`([\w.]+)`", cells[1]):
            assert name not in rows, f"{name} listed twice in the docs table"
            rows[name] = status.group(1)
    return rows


def test_the_docs_status_table_covers_every_name():
    rows = docs_status_table()
    want = {f"{prefix}.{n}" for prefix, _, names in MODULES for n in names}
    assert sorted(want - set(rows)) == [], "names missing from the docs table"
    assert sorted(set(rows) - want) == [], "docs table names not in the lists"


def test_a_name_the_docs_call_supported_exists():
    modules = {prefix: module for prefix, module, _ in MODULES}
    missing = []
    for qualified, status in docs_status_table().items():
        prefix, _, name = qualified.rpartition(".")
        if prefix in modules and status.startswith("supported") and not hasattr(modules[prefix], name):
            missing.append(qualified)
    assert not missing, f"docs call these supported, but they do not exist: {', '.join(missing)}"


# ---- behaviour of the names added for this list ---------------------------------------------------
def copy_kernel(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.MemoryRegion.shared_hbm)
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.MemoryRegion.sbuf)
    nisa.dma_copy(t, a)
    nisa.dma_copy(out, t)
    return out


def test_memory_region_members_are_the_buffers():
    assert nl.MemoryRegion.sbuf is nl.sbuf and nl.MemoryRegion.psum is nl.psum
    assert nl.MemoryRegion.private_hbm is nl.hbm and nl.MemoryRegion.shared_hbm is nl.shared_hbm
    assert nl.is_on_chip(nl.MemoryRegion.sbuf) and nl.is_hbm(nl.MemoryRegion.private_hbm)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(knit.simulate(copy_kernel)(a), a)


def test_baremetal_runs_the_kernel_on_the_simulator():
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    np.testing.assert_array_equal(knit.baremetal(copy_kernel)(a), a)
    np.testing.assert_array_equal(knit.baremetal(save_neff_name="x.neff", artifacts_dir="/tmp/none")(copy_kernel)(a), a)
