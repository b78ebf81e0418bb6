"""matplotlib's pyplot for the plotting methods (an optional dependency), on the Agg backend."""
from typing import Any


def pyplot(method: str, without: str) -> Any:
    """matplotlib.pyplot, or an ImportError saying that `method` needs matplotlib and that
    `without` works without it."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ImportError(f"{method} needs matplotlib (pip install matplotlib); {without} without it") from e
    return plt
