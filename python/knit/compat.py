"""Import compatibility: make unmodified NKI kernels import Knit.

``knit.compat.install()`` registers module aliases in ``sys.modules`` for the NKI packages that are
not installed for real:

* ``nki``, ``nki.language``, ``nki.isa``, ``nki.typing``, ``nki.lnc``, ``nki.collectives`` -> ``knit``,
  ``knit.language``, ``knit.isa``, ``knit.typing``, ``knit.lnc``, ``knit.collectives`` (the current,
  dst-first API);
* ``neuronxcc``, ``neuronxcc.nki``, ``neuronxcc.nki.language``, ``neuronxcc.nki.isa``,
  ``neuronxcc.nki.typing``, ``neuronxcc.nki.compiler`` -> the legacy facade ``knit.legacy``
  (``neuronxcc`` itself becomes a small namespace module holding ``nki``).

A name that already imports for real (an installed Neuron SDK) is left alone, and so are the
names below it. Calling ``install()`` again does nothing more; it returns the names it installed
(on this call). ``uninstall()`` removes the aliases this module installed.
"""
import importlib
import importlib.util
import sys
import types

_MARK = "__knit_compat_alias__"

_FAMILIES: dict[str, list[tuple[str, str | None]]] = {
    "nki": [("nki", "knit"), ("nki.language", "knit.language"), ("nki.isa", "knit.isa"),
            ("nki.typing", "knit.typing"), ("nki.lnc", "knit.lnc"), ("nki.collectives", "knit.collectives")],
    "neuronxcc": [("neuronxcc", None), ("neuronxcc.nki", "knit.legacy"),
                  ("neuronxcc.nki.language", "knit.legacy.language"), ("neuronxcc.nki.isa", "knit.legacy.isa"),
                  ("neuronxcc.nki.typing", "knit.legacy.typing"),
                  ("neuronxcc.nki.compiler", "knit.legacy.compiler")],
}

_installed: dict[str, types.ModuleType] = {}  # alias name -> module object this module put into sys.modules


def _is_ours(name):
    return name in _installed and sys.modules.get(name) is _installed[name]


def _imports_for_real(name):
    """Whether `name` resolves to a module that is not one of our aliases."""
    if name in sys.modules:
        return not _is_ours(name)
    parent = name.rpartition(".")[0]
    if parent and _is_ours(parent):
        return False  # below an alias of ours: the real package is absent
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _namespace(name):
    mod = types.ModuleType(name, f"Knit compatibility alias package for {name!r}")
    mod.__path__ = []  # a package, so submodule imports look in sys.modules
    setattr(mod, _MARK, True)
    return mod


def install():
    """Registers the aliases (see the module docstring); returns the names installed by this call."""
    added = []
    for family in _FAMILIES.values():
        for name, target in family:
            if _is_ours(name):
                continue
            if _imports_for_real(name):
                if name == family[0][0]:
                    break  # the real top-level package: leave the whole family alone
                continue
            module = _namespace(name) if target is None else importlib.import_module(target)
            sys.modules[name] = module
            _installed[name] = module
            added.append(name)
            parent, _, child = name.rpartition(".")
            if parent and _is_ours(parent) and not hasattr(sys.modules[parent], child):
                setattr(sys.modules[parent], child, module)
    return added


def installed():
    """The aliases currently installed by this module."""
    return sorted(n for n in _installed if _is_ours(n))


def uninstall():
    """Removes the aliases this module installed; returns their names."""
    removed = []
    for name in sorted(_installed, key=len, reverse=True):
        if _is_ours(name):
            del sys.modules[name]
            removed.append(name)
            parent, _, child = name.rpartition(".")
            holder = sys.modules.get(parent)
            if getattr(holder, _MARK, False) and getattr(holder, child, None) is _installed[name]:
                delattr(holder, child)
        del _installed[name]
    return removed
