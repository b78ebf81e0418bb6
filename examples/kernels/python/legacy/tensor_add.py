"""Element-wise addition in the legacy G1 style (``neuronxcc.nki``, "NKI Beta 1").

Index expressions pick each tile: ``i_p = nl.arange(128)[:, None]`` runs down the partitions and
``i_f = nl.arange(cols)[None, :]`` along the free dim; ``a[i * 128 + i_p, i_f]`` is the i-th
128-row tile. The last tile may be ragged: ``mask=(i * 128 + i_p < rows)`` keeps its rows inside
the tensor. ``nl.load`` / ``nl.store`` move tiles between HBM and SBUF, ``a_tile + b_tile`` runs
on the Vector Engine and returns a new tile.

Written against ``knit.legacy``; after ``knit.compat.install()`` the original imports
(``import neuronxcc.nki as nki`` ...) run the same code unchanged.
"""
import numpy as np

import knit.legacy as nki
import knit.legacy.language as nl


@nki.jit(mode="simulation")
def tensor_add_kernel(a_input, b_input):
    """out = a_input + b_input for two [rows, cols] HBM tensors (cols fits one partition)."""
    rows, cols = a_input.shape
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)

    i_p = nl.arange(nl.tile_size.pmax)[:, None]  # partition index, [128, 1]
    i_f = nl.arange(cols)[None, :]  # free index, [1, cols]
    for i in nl.affine_range((rows + nl.tile_size.pmax - 1) // nl.tile_size.pmax):
        row = i * nl.tile_size.pmax + i_p
        in_bounds = row < rows  # ragged last tile: only rows < `rows` are loaded, added, stored
        a_tile = nl.load(a_input[row, i_f], mask=in_bounds)
        b_tile = nl.load(b_input[row, i_f], mask=in_bounds)
        c_tile = nl.add(a_tile, b_tile, mask=in_bounds)
        nl.store(c_output[row, i_f], value=c_tile, mask=in_bounds)
    return c_output


def reference(a, b):
    """NumPy reference in float64."""
    return np.asarray(a, dtype=np.float64) + np.asarray(b, dtype=np.float64)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    a = rng.standard_normal((300, 512)).astype(np.float32)
    b = rng.standard_normal((300, 512)).astype(np.float32)
    out = nki.simulate_kernel(tensor_add_kernel, a, b)
    print("legacy tensor_add: max abs error", np.max(np.abs(out - reference(a, b))))
