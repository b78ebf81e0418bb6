"""Where in the user's kernel a call came from, and Knit errors re-raised at that line."""
import os
import sys
import types

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def user_frame():
    """The innermost frame outside the knit package: the kernel's own code (None if there is none)."""
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        if not filename.startswith(_PACKAGE_DIR + os.sep):
            return frame
        frame = frame.f_back
    return None


def user_location():
    """(file, line, 0) of the innermost frame outside the knit package: the kernel's own line."""
    frame = user_frame()
    return None if frame is None else (frame.f_code.co_filename, frame.f_lineno, 0)
