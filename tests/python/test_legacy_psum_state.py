"""The legacy facade's record of which PSUM elements a matmul wrote (PsumState.mark_written):
its strided fast path marks exactly the elements an index list of the view would."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

from knit.legacy._tensor import _strided_elements  # noqa: E402


def _elements(offset, pattern):
    idx = np.full((1,), offset, dtype=np.int64)
    for step, num in pattern:
        idx = (idx[:, None] + step * np.arange(num, dtype=np.int64)[None, :]).reshape(-1)
    return idx


@pytest.mark.parametrize("offset,pattern", [
    (0, [[512, 128], [1, 512]]),
    (256, [[512, 128], [1, 256]]),
    (1, [[512, 64], [2, 100]]),
    (3, [[0, 4], [7, 9]]),  # a zero step repeats elements
    (10, [[1, 5]]),
])
def test_strided_fast_path_marks_the_views_elements(offset, pattern):
    mask = np.zeros(128 * 512, dtype=bool)
    covered = _strided_elements(mask, offset, pattern)
    assert covered is not None
    covered[...] = True
    expected = np.zeros_like(mask)
    expected[_elements(offset, pattern)] = True
    np.testing.assert_array_equal(mask, expected)


@pytest.mark.parametrize("offset,pattern", [
    (0, [[-1, 4]]),  # a negative step
    (-1, [[1, 4]]),  # starts before the tensor
    (100, [[1, 28]]),  # its last element, 127, is past the end of a 127-element tensor
])
def test_views_outside_the_fast_path_are_refused(offset, pattern):
    mask = np.zeros(127, dtype=bool)
    assert _strided_elements(mask, offset, pattern) is None
