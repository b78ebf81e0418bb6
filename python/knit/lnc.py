"""knit.lnc: NKI 0.8's home of the logical-NeuronCore calls (the same functions as knit.isa's)."""
from .isa import core_barrier, dma_engine, sendrecv  # noqa: F401
