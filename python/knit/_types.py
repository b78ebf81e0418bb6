"""Type aliases of the public API's signatures (knit.isa, knit.language)."""
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._dtypes import dtype
from ._register import RegExpr
from ._tensor import NkiTensor

ShapeLike = int | Sequence[int]
DTypeLike = dtype | str | np.dtype | type  # a Knit dtype, its name, a NumPy / ml_dtypes / torch dtype
AxisLike = int | Sequence[int]
IntLike = int | RegExpr  # a Python int or a register expression (a value known on the device)
OpLike = Any  # an nl.* operator object, or (legacy style) a NumPy function such as np.add
Operand = NkiTensor | float | None  # a [P, 1] tile or an fp32 immediate
