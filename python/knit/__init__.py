"""Knit: NKI tile kernels on any CPU.

``import knit as nki``, ``import knit.language as nl``, ``import knit.isa as nisa`` and an NKI
kernel runs on Knit's simulator: it is traced into Knit's tile IR (verified as it is traced) and
scheduled onto a NeuronCore model (engine queues, semaphores) and executed with hardware
numerics; knit.profile / knit.benchmark report its simulated latency.
"""
import os as _os

# A build of the compiled core kept in another folder (the sanitizer lane's, docs/reliability.md)
# is imported in place of the one beside this file when KNIT_EXTENSION_DIR names that folder.
if _os.environ.get("KNIT_EXTENSION_DIR"):
    __path__.insert(0, _os.environ["KNIT_EXTENSION_DIR"])

from . import cache, collectives, isa, language, typing  # noqa: F401
from ._compare import compare_profiles  # noqa: F401
from ._distributed import distributed  # noqa: F401
from ._dtypes import dtype  # noqa: F401  (nki.dtype, used in kernels' type annotations)
from ._kernel import Compiled, Kernel, baremetal, compile, jit, simulate_kernel  # noqa: F401
from ._ranks import simulate  # noqa: F401
from ._version import __version__  # noqa: F401
from .autotune import Autotuned, autotune  # noqa: F401
from .benchmark import Benchmark, benchmark  # noqa: F401
from .errors import JitFallbackWarning, KnitError, KnitIndexError, KnitRuntimeError, NkiValidationError  # noqa: F401
from .profile import Profile, profile  # noqa: F401
from .sweep import SweepResult, sweep  # noqa: F401

__all__ = ["dtype", "jit", "simulate", "baremetal", "simulate_kernel", "compile", "Kernel", "Compiled", "language",
           "isa", "typing", "collectives", "cache", "KnitError", "NkiValidationError", "KnitRuntimeError",
           "KnitIndexError", "profile", "Profile", "benchmark", "Benchmark", "compare_profiles", "sweep",
           "SweepResult", "autotune", "Autotuned", "distributed"]
