"""The knit package's modules import each other in one direction only: the import graph (every
`import` / `from ... import`, at module level or inside a function) has no cycle.

A cycle makes the import order decide which names exist when a module runs, and hides which layer
a piece of code belongs to. The layers, bottom up: the C++ extensions and the leaf modules
(_source, errors, _dtypes, _trace, _register, _operators, _buffers, _promotion, _keywords,
_version); _tensor (tensors, views, element-wise arithmetic); knit.isa; _wrappers; knit.language;
the legacy facade (its tile operators reach the G1 calls through legacy._tensor.bind_calls); the
runners (_kernel, profile, benchmark, cli, torch) and the package itself."""
import ast
import os

import pytest

PACKAGE_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "python", "knit")


def _module_name(path):
    rel = os.path.relpath(path, os.path.dirname(PACKAGE_DIR))[:-3].replace(os.sep, ".")
    return rel[:-len(".__init__")] if rel.endswith(".__init__") else rel


# The C++ extensions (built, not in git): leaves of the graph.
EXTENSIONS = ("knit._core", "knit._cppc")


def _modules():
    """{module name: (file path, is package)} for every .py file of the knit package (None for
    the C++ extensions)."""
    out = {name: (None, False) for name in EXTENSIONS}
    for root, _, files in os.walk(PACKAGE_DIR):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(root, f)
                out[_module_name(path)] = (path, f == "__init__.py")
    return out


def _resolve(module, is_package, node, modules):
    """The knit modules one import statement loads. `from . import x` loads the submodule x when
    there is one, else it reads x from the package (an edge to the package's __init__)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    package = module if is_package else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    base = node.module if node.level == 0 else ".".join(p for p in (package, node.module) if p)
    targets = [base] if node.module else []
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        targets.append(sub if sub in modules else base)
    return targets


def import_graph():
    modules = _modules()
    graph = {}
    for name, (path, is_package) in modules.items():
        graph[name] = set()
        if path is None:
            continue
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        edges = set()
        for node in ast.walk(tree):  # module level and inside functions alike
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _resolve(name, is_package, node, modules):
                    if target in modules and target != name:
                        edges.add(target)
        graph[name] = edges
    return graph


def find_cycle(graph):
    """One cycle of the graph as a list of modules (first == last), or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_graph_covers_the_package():
    graph = import_graph()
    assert {"knit", "knit.isa", "knit.language", "knit._tensor", "knit.legacy", "knit.legacy._ops"} <= set(graph)
    assert "knit._tensor" in graph["knit.isa"]


def test_knit_imports_have_no_cycle():
    cycle = find_cycle(import_graph())
    if cycle:
        pytest.fail("import cycle among knit's modules: " + " -> ".join(cycle))


def test_cycle_finder_reports_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
