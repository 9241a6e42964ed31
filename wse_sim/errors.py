"""Domain errors of the fabric simulator; each message says what to do next."""

from __future__ import annotations


class WseSimError(Exception):
    """Base class of every error the simulator raises."""


class UnknownArchError(WseSimError, ValueError):
    """The architecture name is not one of wse2/WSE-2/wse3/WSE-3."""


class RegionError(WseSimError, ValueError):
    """A region request is invalid: out of the wafer, overlapping, or a duplicate owner."""


class RectError(WseSimError, ValueError):
    """A sub-rectangle does not lie inside its region; use region-relative (row, col, rows, cols)."""


class SramCapacityError(WseSimError, MemoryError):
    """A per-PE SRAM allocation exceeds the PE's capacity (48 KiB minus the runtime reserve)."""

    def __init__(self, owner: str, pe: tuple[int, int], needed: int, limit: int, name: str) -> None:
        self.owner, self.pe, self.needed, self.limit, self.name = owner, pe, needed, limit, name
        super().__init__(
            f"SRAM capacity exceeded in region {owner!r}: allocating {name!r} needs {needed} bytes "
            f"on PE (row={pe[0]}, col={pe[1]}) but the limit is {limit} bytes per PE; "
            "use a larger region (more PEs share the data) or a smaller batch"
        )


class UnknownBufferError(WseSimError, KeyError):
    """An SRAM buffer name was freed or looked up without having been allocated."""


class CycleEngineLimitError(WseSimError, ValueError):
    """The cycle engine is for validation on small regions; use the block engine above the limit."""
