"""Element-wise addition of two [rows, cols] tensors, tiled along the partition dim.

The NKI "hello world": move tiles HBM -> SBUF with DMA, add them on the Vector Engine,
move the sum back to HBM. Written in the current (dst-first) NKI API; swap the three
``knit`` imports for ``nki`` and it runs on Trainium unchanged.
"""
# knit-run: --shape 300x512 --shape 300x512
import numpy as np

import knit as nki
import knit.isa as nisa
import knit.language as nl


@nki.jit
def tensor_add_kernel(a_input, b_input):
    """out = a_input + b_input for two HBM tensors of the same [rows, cols] shape.

    rows may be any size (the last tile may be partial); cols must fit one SBUF partition.
    """
    assert a_input.shape == b_input.shape, "inputs must have the same shape"
    rows, cols = a_input.shape

    # Kernel outputs live in shared HBM and are returned.
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)

    # A tile holds at most 128 rows: one row per SBUF partition.
    P = nl.tile_size.pmax
    for i in nl.affine_range((rows + P - 1) // P):
        start = i * P
        size = min(P, rows - start)  # the last tile may be partial

        # Load one tile of each input (HBM -> SBUF).
        a_tile = nl.ndarray((size, cols), dtype=a_input.dtype, buffer=nl.sbuf)
        b_tile = nl.ndarray((size, cols), dtype=b_input.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_tile, src=a_input[nl.ds(start, size), :])
        nisa.dma_copy(dst=b_tile, src=b_input[nl.ds(start, size), :])

        # Add on the Vector Engine (fp32 arithmetic, rounded to the tile's dtype).
        c_tile = nl.ndarray((size, cols), dtype=a_input.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=c_tile, data1=a_tile, data2=b_tile, op=nl.add)

        # Store the result (SBUF -> HBM).
        nisa.dma_copy(dst=c_output[nl.ds(start, size), :], src=c_tile)

    return c_output


def reference(a, b):
    """NumPy reference in float64 (the inputs' values, no intermediate rounding)."""
    return np.asarray(a, dtype=np.float64) + np.asarray(b, dtype=np.float64)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    a = rng.standard_normal((300, 512)).astype(np.float32)
    b = rng.standard_normal((300, 512)).astype(np.float32)
    out = tensor_add_kernel(a, b)
    print("tensor_add: max abs error", np.max(np.abs(out - reference(a, b))))
