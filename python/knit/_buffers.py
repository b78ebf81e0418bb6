"""NKI's memory buffers: nl.sbuf, nl.psum, nl.hbm (= nl.private_hbm) and nl.shared_hbm."""

from .errors import user_error


class Buffer:
    """A memory buffer; `on_chip` for SBUF and PSUM (partitioned), not for HBM."""

    __slots__ = ("name", "on_chip")

    def __init__(self, name: str, on_chip: bool) -> None:
        self.name, self.on_chip = name, on_chip

    def __repr__(self) -> str:
        return f"nl.{self.name}"


sbuf = Buffer("sbuf", True)
psum = Buffer("psum", True)
hbm = Buffer("hbm", False)
shared_hbm = Buffer("shared_hbm", False)
_BY_NAME = {b.name: b for b in (sbuf, psum, hbm, shared_hbm)}


def buffer_named(name: str) -> Buffer:
    """The buffer a tensor of the trace lives in, from its name in the IR."""
    return _BY_NAME[name]


def check_buffer(buffer: object, loc: tuple[str, int, int] | None) -> Buffer:
    if isinstance(buffer, Buffer):
        return buffer
    raise user_error(
        "buffer",
        f"buffer={buffer!r} is not a Knit buffer; pass nl.sbuf, nl.psum, nl.hbm or nl.shared_hbm "
        "(string buffer names were removed in NKI 0.3)",
        loc,
    )
