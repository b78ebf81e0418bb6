"""Differential checks across NeuronCore generations: run_on_targets."""
from collections.abc import Callable, Sequence
from typing import Any

from .._kernel import compile as knit_compile
from .compare import assert_close, assert_kernel_close

ALL_TARGETS = ("trn1", "trn2", "trn3")


def run_on_targets(kernel: Callable[..., Any], *inputs: Any, targets: str | Sequence[str] = ALL_TARGETS,
                   reference: Any = None, rtol: float | None = None, atol: float | None = None, exact: bool = True,
                   **kwargs: Any) -> dict[str, Any]:
    """Run `kernel` on `inputs` for each target and return {target: result(s)}.

    Every target's result must equal the first target's (exact=True: same values, since every
    generation shares the rounding model; exact=False: within rtol/atol, for kernels that pick a
    different algorithm per generation). With `reference` (callable or arrays), each target's
    result is also checked against it as assert_kernel_close does."""
    __tracebackhide__ = True  # pytest shows the caller's line, not this helper's
    if isinstance(targets, str):
        targets = (targets,)
    if not targets:
        raise ValueError("run_on_targets needs at least one target")
    results: dict[str, Any] = {}
    for target in targets:
        if reference is not None:
            results[target] = assert_kernel_close(kernel, reference, *inputs, rtol=rtol, atol=atol, target=target,
                                                  **kwargs)
        else:
            results[target] = knit_compile(kernel, *inputs, target=target, **kwargs)(*inputs, **kwargs)
    first = targets[0]
    name = getattr(kernel, "__name__", "kernel")
    for target in targets[1:]:
        tol = {"rtol": 0.0, "atol": 0.0} if exact else {"rtol": rtol, "atol": atol}
        try:
            assert_close(results[target], results[first], name=f"kernel {name} on {target} output", **tol)
        except AssertionError as e:
            raise AssertionError(f"{e}\n(the reference here is the same kernel's result on {first})") from None
    return results
