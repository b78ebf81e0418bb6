"""``neuronxcc.nki.typing`` (G1): ``nt.tensor[128, 512]`` / ``nt.tensor[[128, 512], nl.float32]``
annotations and ``nt.mutable_tensor`` (the same objects as ``knit.typing``)."""
from ..typing import TensorType, mutable_tensor, tensor  # noqa: F401

__all__ = ["tensor", "mutable_tensor", "TensorType"]
