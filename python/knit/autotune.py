"""@knit.autotune: pick a kernel's compile-time parameters by simulated latency, once per key.

    @knit.autotune(configs=[{"tiles_m": 1}, {"tiles_m": 2}, {"tiles_m": 4}], key=["lhsT", "rhs"])
    @knit.jit
    def matmul(lhsT, rhs, tiles_m=1): ...

    out = matmul(a, b)              # the first call for these shapes sweeps the configs (knit.sweep)
    matmul.best_config(a, b)        # {"tiles_m": 4}

The first call with a new key (the shapes and dtypes of the tensor arguments named in `key`, the
values of the others) sweeps the configs on the simulator, timing only, for the call's target,
and runs the fastest. The choice is kept in memory and in Knit's disk cache
(<cache dir>/autotune), keyed by Knit's build, the kernel's source (its file and the code it
calls), the configs, the key's values and the target, so a later process reuses it without
sweeping. The result is a Kernel, so knit.torch.op takes it too. docs/sweep.md.
"""
from __future__ import annotations

import hashlib
import inspect
import json
import os
from collections.abc import Callable, Sequence
from typing import Any

from . import _core, _program_cache, cache
from ._kernel import Kernel, _arg_key, _as_positional, _precise_fp, jit, tensor_spec
from .isa import _TARGETS, target_from_env
from .sweep import Space, SweepResult, expand, sweep
from .typing import TensorType

_SUFFIX = ".json"


class Autotuned(Kernel):
    """A kernel whose tunable keyword parameters are chosen by simulated latency (knit.autotune).
    ``best_config(*args)`` is the choice for these arguments; ``stats`` counts the sweeps run and
    the choices found in memory and on disk; ``last_sweep`` is the last sweep's SweepResult."""

    def __init__(self, base: Kernel, configs: Space, key: Sequence[str] | None = None,
                 executor: Any = "inline") -> None:
        super().__init__(base.fn, base.grid, cache=base._cache, **base.options)
        self.base = base  # what is swept and run (a legacy kernel keeps its own class)
        self.configs = expand(configs)
        if not self.configs or self.configs == [{}]:
            raise ValueError(f"knit.autotune of {base.fn.__name__}: give at least one config (a dict of parameters)")
        params = inspect.signature(base.fn).parameters
        self.tunables = list(dict.fromkeys(k for c in self.configs for k in c))
        unknown = [k for k in self.tunables if k not in params]
        if key is None:
            key = [name for name in params if name not in self.tunables]
        unknown += [k for k in key if k not in params]
        if unknown:
            raise ValueError(f"knit.autotune of {base.fn.__name__}: it has no parameter {', '.join(unknown)} "
                             f"(configs name its keyword parameters; key names the arguments a choice depends on)")
        self.key = list(key)
        self.executor = executor
        self.stats = {"sweeps": 0, "memory_hits": 0, "disk_hits": 0}
        self.last_sweep: SweepResult | None = None
        self._choices: dict[tuple, dict[str, Any]] = {}

    def compile(self, *args: Any, target: str | None = None, **kwargs: Any) -> Any:
        """The kernel compiled with the best config for these arguments (keywords given in the
        call win over the config's)."""
        config = self.best_config(*args, target=target, **kwargs)
        return self.base.compile(*args, target=target, **{**config, **kwargs})

    def best_config(self, *args: Any, target: str | None = None, **kwargs: Any) -> dict[str, Any]:
        """The fastest config for these arguments on `target` (default: the kernel's, else
        $KNIT_TARGET / trn2): from memory, else from the disk cache, else by a sweep."""
        args, kwargs = _as_positional(self.fn, args, kwargs)
        target = self._target(target)
        key_values = self._key_values(args, kwargs)
        memory_key = (target, key_values)
        if memory_key in self._choices:
            self.stats["memory_hits"] += 1
            return dict(self._choices[memory_key])
        name = self._choice_name(target, key_values)
        config = self._load(name)
        if config is not None:
            self.stats["disk_hits"] += 1
        else:
            config = self._sweep(args, kwargs, target)
            self._store(name, config)
        self._choices[memory_key] = config
        return dict(config)

    def _target(self, target: str | None) -> str:
        target = target or self.options.get("platform_target") or target_from_env()
        return _TARGETS.get(str(target).lower(), str(target))

    def _key_values(self, args: tuple, kwargs: dict[str, Any]) -> tuple:
        """(name, value) per key argument: (shape, dtype) of a tensor, else the value itself."""
        bound = inspect.signature(self.fn).bind_partial(*args, **kwargs)
        bound.apply_defaults()
        return tuple((name, _arg_key(bound.arguments.get(name))) for name in self.key)

    def _sweep(self, args: tuple, kwargs: dict[str, Any], target: str) -> dict[str, Any]:
        """Time every config on placeholders of the arguments' shapes and dtypes."""
        code = self.fn.__code__
        loc = (code.co_filename, code.co_firstlineno, 0)
        specs = [tensor_spec(a, loc) for a in args]
        inputs = tuple(a if spec is None else TensorType(*spec) for a, spec in zip(args, specs))
        space = [{**c, **kwargs} for c in self.configs]
        result = sweep(self.base, space, inputs, target=target, executor=self.executor)
        self.stats["sweeps"] += 1
        self.last_sweep = result
        best = result.best()  # none ran: a ValueError with the first error
        return {k: v for k, v in best.config.items() if k in self.tunables}

    # ---- the disk cache --------------------------------------------------------------------------

    def _choice_name(self, target: str, key_values: tuple) -> str | None:
        """The entry's name, or None when the kernel's code cannot be identified (its globals
        hold arrays or objects) or the key has values whose text does not identify them."""
        fn = self.fn
        free = _program_cache._free_values(fn)
        if free is None or not _program_cache._plain([v for _, v in key_values]):
            return None
        text = repr((_program_cache._knit_identity(), fn.__module__, fn.__qualname__, fn.__code__.co_filename,
                     _program_cache._file_hash(fn.__code__.co_filename), free, self.grid, _precise_fp(),
                     self.configs, key_values, target))
        return hashlib.sha256(text.encode()).hexdigest()

    @staticmethod
    def _folder() -> str | None:
        root = cache.directory()
        return os.path.join(root, "autotune") if root else None

    def _load(self, name: str | None) -> dict[str, Any] | None:
        folder = self._folder()
        if not folder or not name:
            return None
        payload = _core.cache_load(folder, _SUFFIX, name)
        if payload is None:
            return None
        try:
            config = json.loads(payload)["config"]
        except (ValueError, KeyError, TypeError):
            return None
        # A choice that is no longer one of the configs (it cannot be, with the configs in the
        # name, unless the entry was tampered with) is swept again.
        return config if any(config == {k: c[k] for k in config if k in c} for c in self.configs) else None

    def _store(self, name: str | None, config: dict[str, Any]) -> None:
        folder = self._folder()
        if not folder or not name:
            return
        try:
            payload = json.dumps({"kernel": self.fn.__qualname__, "config": config})
        except TypeError:  # a config value JSON cannot hold: kept in memory only
            return
        _core.cache_store(folder, _SUFFIX, name, payload.encode())


def autotune(configs: Space, key: Sequence[str] | None = None, *,
             executor: Any = "inline") -> Callable[[Callable[..., Any]], Autotuned]:
    """@knit.autotune(configs=[{...}, ...], key=["arg", ...]) over a @knit.jit kernel (or a plain
    function): see the module's docstring. configs: a list of dicts or a dict of lists (a grid) of
    the kernel's keyword parameters. key: the arguments the choice depends on (default: every
    parameter that is not tuned). executor: where the sweep runs (knit.sweep's executor; default
    this process, since a kernel is often first called at a script's top level, where a process
    pool would re-import the script in each worker)."""

    def wrap(kernel: Callable[..., Any]) -> Autotuned:
        base = kernel if isinstance(kernel, Kernel) else jit(kernel)
        return Autotuned(base, configs, key, executor)

    return wrap
