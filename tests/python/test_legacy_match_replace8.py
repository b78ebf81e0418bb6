"""neuronxcc.nki.isa.nc_match_replace8 through the legacy facade: the replaced tile returned, the
positions into dst_idx, with the NKI 0.6 slot order of knit.isa's instruction."""
import numpy as np
import pytest

import knit.legacy as nki
import knit.legacy.isa as nisa
import knit.legacy.language as nl
from knit.errors import KnitError


def test_legacy_nc_match_replace8_worked_example():
    @nki.jit
    def kernel(data, vals):
        out = nl.ndarray(data.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        pos = nl.ndarray((1, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
        idx = nl.ndarray((1, 8), dtype=nl.uint32, buffer=nl.sbuf)
        replaced = nisa.nc_match_replace8(data=nl.load(data), vals=nl.load(vals), imm=-1.0, dst_idx=idx)
        nl.store(out, replaced)
        nl.store(pos, idx)
        return out, pos

    data = np.array([[5, 1, 5, 3, 9, 5, 2, 7, 4, 5]], np.float32)
    vals = np.array([[9, 7, 5, 5, 4, 3, 2, 5]], np.float32)
    out, pos = kernel(data, vals)
    np.testing.assert_array_equal(pos, [[4, 7, 5, 2, 8, 3, 6, 0]])
    np.testing.assert_array_equal(out, [[-1, 1, -1, -1, -1, -1, -1, -1, -1, 5]])


def test_legacy_nc_match_replace8_mask_is_reported():
    @nki.jit
    def kernel(data, vals):
        out = nl.ndarray(data.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:1, 0:10]
        nl.store(out, nisa.nc_match_replace8(data=nl.load(data), vals=nl.load(vals), imm=0.0, mask=(i_f < 5)))
        return out

    with pytest.raises(KnitError, match="unsupported"):
        kernel(np.zeros((1, 10), np.float32), np.zeros((1, 8), np.float32))
