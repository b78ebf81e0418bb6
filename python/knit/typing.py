"""knit.typing (``import knit.typing as nt``): tensor annotations and shape/dtype placeholders.

``nt.tensor[128, 512]`` (shape only) or ``nt.tensor[[128, 512], nl.bfloat16]`` (shape and dtype)
annotates kernel parameters; an instance can also stand in for an argument where only its shape
and dtype matter (timing-only simulation, fake tensors)."""
from collections.abc import Iterable
from typing import Any

from ._dtypes import to_dtype


class TensorType:
    """A shape (and optionally dtype) description of a kernel argument."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: Iterable[int], dtype: Any = None) -> None:
        self.shape = tuple(int(s) for s in shape)
        self.dtype = None if dtype is None else to_dtype(dtype)

    def __repr__(self):
        return f"nt.tensor[{list(self.shape)}{', ' + str(self.dtype) if self.dtype else ''}]"

    def __eq__(self, other):
        return isinstance(other, TensorType) and (self.shape, self.dtype) == (other.shape, other.dtype)

    def __hash__(self):
        return hash((self.shape, self.dtype))


class _TensorFactory:
    def __getitem__(self, key: Any) -> TensorType:
        if isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], (list, tuple)):
            return TensorType(key[0], key[1])
        return TensorType(key if isinstance(key, tuple) else (key,))


tensor = _TensorFactory()
mutable_tensor = tensor
