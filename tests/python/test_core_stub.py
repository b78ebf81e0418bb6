"""python/knit/_core.pyi, the type stub of the C++ binding, names exactly what knit._core defines:
a binding added in python/src/*.cpp without a stub entry (or a stub entry the binding lost) fails
here, naming it."""
import ast
import pathlib

import knit
from knit import _core

# Beside the package's sources (the module itself may be another build's: KNIT_EXTENSION_DIR).
STUB = pathlib.Path(knit.__file__).with_name("_core.pyi")


def _stub_names():
    """Top-level names the stub defines: (classes and functions, stub-only type names)."""
    tree = ast.parse(STUB.read_text())
    defined, stub_only = set(), set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            typed_dict = any(isinstance(b, ast.Name) and b.id == "TypedDict" for b in node.bases)
            (stub_only if typed_dict else defined).add(node.name)
        elif isinstance(node, ast.FunctionDef):
            defined.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            alias = isinstance(node.annotation, ast.Name) and node.annotation.id == "TypeAlias"
            (stub_only if alias else defined).add(node.target.id)  # X: TypeAlias = ... | CONSTANT: int
    return defined, stub_only


def test_every_binding_has_a_stub_entry():
    defined, _ = _stub_names()
    public = {name for name in dir(_core) if not name.startswith("_")}
    assert not public - defined, f"add these to python/knit/_core.pyi: {sorted(public - defined)}"


def test_every_stub_entry_is_a_binding():
    defined, stub_only = _stub_names()
    assert not defined - set(dir(_core)), f"not in knit._core: {sorted(defined - set(dir(_core)))}"
    assert not stub_only & set(dir(_core)), "a stub-only type name shadows a binding"


def test_stub_methods_exist_on_the_classes():
    tree = ast.parse(STUB.read_text())
    missing = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and hasattr(_core, node.name):
            cls = getattr(_core, node.name)
            for item in node.body:
                if (isinstance(item, ast.FunctionDef) and item.name not in ("__init__", "__buffer__")
                        and not hasattr(cls, item.name)):
                    missing.append(f"{node.name}.{item.name}")
    assert not missing, missing


def _typed_dict_keys(name):
    tree = ast.parse(STUB.read_text())
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    return {item.target.id for item in cls.body if isinstance(item, ast.AnnAssign)}


def test_the_table_rows_have_the_keys_the_stub_declares():
    assert _typed_dict_keys("TileSize") == set(_core.tile_size())
    assert _typed_dict_keys("TargetInfo") == set(_core.target_info("trn2"))
    assert _typed_dict_keys("AluOpRow") == set(_core.alu_ops()[0])
    assert _typed_dict_keys("OpRow") == set(_core.op_table()[0])
