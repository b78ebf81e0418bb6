"""Type aliases of the public API's signatures (knit.isa, knit.language)."""
from collections.abc import Sequence
from typing import Any

from ._dtypes import DTypeLike as DTypeLike  # defined beside dtype: knit._promotion names it too
from ._register import RegExpr
from ._tensor import NkiTensor

ShapeLike = int | Sequence[int]
AxisLike = int | Sequence[int]
IntLike = int | RegExpr  # a Python int or a register expression (a value known on the device)
OpLike = Any  # an nl.* operator object, or (legacy style) a NumPy function such as np.add
Operand = NkiTensor | float | None  # a [P, 1] tile or an fp32 immediate
