"""The wafer, its owner map, and the per-region state arrays (structure of arrays, [rows, cols]).

A dense SRAM image of a full WSE-2 is 36 GB, so a Region holds state only for its own PEs:
clocks, counters, link reservations and SRAM accounting, all shaped [rows, cols, ...].
Regions never share arrays, which is what makes isolation and translation invariance hold.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sam_domain.geometry import Rect
from wse_sim.arch import Arch, get_arch
from wse_sim.backend import Backend, get_backend
from wse_sim.errors import RectError, RegionError, SramCapacityError, UnknownBufferError

PORTS = ("N", "S", "E", "W", "RAMP")  # link_busy's last axis: four out-links, then RAMP delivery


class Region:
    """A rectangle of PEs owned by one job, with its own clocks, counters and SRAM accounting.

    Arrays (backend arrays, shape [rows, cols] unless noted): `clock` (int64 per-PE cycles),
    `busy` (cycles the PE computed or injected), `words_sent`, `words_received`, `sram_used`,
    `sram_hwm` (bytes), `link_busy` [rows, cols, 5] (first free entry cycle of the N, S, E, W
    out-links; for the RAMP, the first cycle a new wavelet may arrive in the PE).
    """

    def __init__(
        self, owner: str, row: int, col: int, rows: int, cols: int, arch: Arch, backend: Backend
    ) -> None:
        if rows < 1 or cols < 1:
            raise RegionError(f"a region needs at least 1x1 PEs, got {rows}x{cols}")
        self.owner, self.row, self.col, self.rows, self.cols = owner, row, col, rows, cols
        self.arch, self.xp = arch, backend
        shape = (rows, cols)
        self.clock = backend.zeros(shape)
        self.busy = backend.zeros(shape)
        self.words_sent = backend.zeros(shape)
        self.words_received = backend.zeros(shape)
        self.sram_used = backend.zeros(shape)
        self.sram_hwm = backend.zeros(shape)
        self.link_busy = backend.zeros((rows, cols, len(PORTS)))
        self.allocations: dict[str, object] = {}
        self.wavelets_sent = 0  # every word put on the fabric
        self.wavelets_delivered = 0
        self.wavelets_dropped = 0  # words that would have left the region
        self.faults = 0  # transfers (not words) that had words dropped

    # --- geometry -------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        """(rows, cols)."""
        return (self.rows, self.cols)

    @property
    def pes(self) -> int:
        """Number of PEs in the region."""
        return self.rows * self.cols

    def rect(self, rect: Rect | None = None) -> Rect:
        """Validate a region-relative (row, col, rows, cols); None means the whole region."""
        if rect is None:
            return (0, 0, self.rows, self.cols)
        r, c, h, w = (int(v) for v in rect)
        if h < 1 or w < 1 or r < 0 or c < 0 or r + h > self.rows or c + w > self.cols:
            raise RectError(
                f"rectangle (row={r}, col={c}, rows={h}, cols={w}) is not inside region "
                f"{self.owner!r} of {self.rows}x{self.cols} PEs; coordinates are region-relative"
            )
        return (r, c, h, w)

    # --- time and counters ----------------------------------------------------------------
    @property
    def cycles(self) -> int:
        """Elapsed simulated cycles of the region (its largest per-PE clock)."""
        return self.xp.amax(self.clock)

    @property
    def seconds(self) -> float:
        """Elapsed simulated time at the arch clock (never wall time)."""
        return self.cycles / self.arch.clock_hz

    @property
    def idle(self) -> Any:
        """Per-PE idle cycles, [rows, cols]: elapsed region cycles minus busy cycles."""
        return self.cycles - self.busy

    def utilization(self) -> np.ndarray:
        """Per-PE busy fraction of the elapsed cycles, float64 [rows, cols] (numpy)."""
        busy = self.xp.to_numpy(self.busy).astype(np.float64)
        return busy / self.cycles if self.cycles else np.zeros_like(busy)

    # --- SRAM accounting ------------------------------------------------------------------
    def sram_alloc(
        self, name: str, bytes_per_pe: int | np.ndarray, rect: Rect | None = None
    ) -> None:
        """Reserve `bytes_per_pe` (an int, or an int array [rows, cols] / [h, w] of `rect`).

        Raises SramCapacityError naming the first PE (region-relative row, col) that would
        exceed `arch.sram_limit_bytes`, with the bytes it needs.
        """
        if name in self.allocations:
            raise RegionError(
                f"buffer {name!r} is already allocated in region {self.owner!r}; free it first"
            )
        r, c, h, w = self.rect(rect)
        need = np.zeros(self.shape, dtype=np.int64)
        need[r : r + h, c : c + w] = np.broadcast_to(
            np.asarray(self.xp.to_numpy(bytes_per_pe), dtype=np.int64), (h, w)
        )
        total = self.xp.to_numpy(self.sram_used) + need
        limit = self.arch.sram_limit_bytes
        over = total > limit
        if over.any():
            i, j = (int(v) for v in np.argwhere(over)[0])
            raise SramCapacityError(self.owner, (i, j), int(total[i, j]), limit, name)
        need_x = self.xp.asarray(need, "int64")
        self.allocations[name] = need_x
        self.sram_used = self.sram_used + need_x
        self.sram_hwm = self.xp.maximum(self.sram_hwm, self.sram_used)

    def sram_free(self, name: str) -> None:
        """Release a buffer allocated with `sram_alloc`."""
        if name not in self.allocations:
            raise UnknownBufferError(
                f"no SRAM buffer {name!r} in region {self.owner!r}; allocated: {sorted(self.allocations)}"
            )
        self.sram_used = self.sram_used - self.allocations.pop(name)

    def alloc_array(self, name: str, per_pe_shape: tuple[int, ...], dtype: str = "float32") -> Any:
        """Account SRAM for a per-PE array and return zeros shaped [rows, cols, *per_pe_shape]."""
        itemsize = np.dtype(dtype).itemsize
        self.sram_alloc(name, int(np.prod(per_pe_shape, dtype=np.int64)) * itemsize)
        return self.xp.zeros((self.rows, self.cols, *per_pe_shape), dtype)

    def counters(self) -> dict[str, np.ndarray]:
        """The per-PE counters as numpy arrays [rows, cols]."""
        to_np = self.xp.to_numpy
        return {
            "clock": to_np(self.clock),
            "busy": to_np(self.busy),
            "idle": to_np(self.idle),
            "words_sent": to_np(self.words_sent),
            "words_received": to_np(self.words_received),
            "sram_used": to_np(self.sram_used),
            "sram_hwm": to_np(self.sram_hwm),
        }

    def __repr__(self) -> str:
        return f"Region({self.owner!r}, row={self.row}, col={self.col}, rows={self.rows}, cols={self.cols})"


class Wafer:
    """A simulated wafer of rows x cols PEs with a wafer-wide owner map of its regions."""

    def __init__(
        self,
        arch: Arch | str = "wse2",
        rows: int | None = None,
        cols: int | None = None,
        backend: str | Backend = "numpy",
    ) -> None:
        self.arch = get_arch(arch) if isinstance(arch, str) else arch
        self.rows = int(rows if rows is not None else self.arch.rows)
        self.cols = int(cols if cols is not None else self.arch.cols)
        if self.rows < 1 or self.cols < 1:
            raise RegionError(f"a wafer needs at least 1x1 PEs, got {self.rows}x{self.cols}")
        self.xp = get_backend(backend)
        self._owner = np.full((self.rows, self.cols), -1, dtype=np.int32)
        self.regions: dict[str, Region] = {}
        self.owner_ids: dict[str, int] = {}
        self._next_id = 0

    def allocate(self, owner: str, row: int, col: int, rows: int, cols: int) -> Region:
        """Give `owner` the rectangle at (row, col) of rows x cols PEs and return its Region."""
        if owner in self.regions:
            raise RegionError(
                f"owner {owner!r} already holds a region on this wafer; release it first"
            )
        if (
            rows < 1
            or cols < 1
            or row < 0
            or col < 0
            or row + rows > self.rows
            or col + cols > self.cols
        ):
            raise RegionError(
                f"region (row={row}, col={col}, rows={rows}, cols={cols}) is outside the "
                f"{self.rows}x{self.cols} wafer; choose a rectangle inside it"
            )
        window = self._owner[row : row + rows, col : col + cols]
        taken = np.unique(window[window >= 0])
        if taken.size:
            names = sorted(n for n, i in self.owner_ids.items() if i in set(taken.tolist()))
            raise RegionError(
                f"region (row={row}, col={col}, rows={rows}, cols={cols}) overlaps "
                f"the regions of {names}; choose a free rectangle"
            )
        self.owner_ids[owner] = self._next_id
        self._next_id += 1
        window[...] = self.owner_ids[owner]
        region = Region(owner, row, col, rows, cols, self.arch, self.xp)
        self.regions[owner] = region
        return region

    def release(self, owner: str) -> None:
        """Free the region of `owner`; its PEs become available."""
        if owner not in self.regions:
            raise RegionError(
                f"owner {owner!r} holds no region on this wafer; held: {sorted(self.regions)}"
            )
        self.regions.pop(owner)
        self._owner[self._owner == self.owner_ids.pop(owner)] = -1

    def owner_map(self) -> np.ndarray:
        """int32 [rows, cols]: the owner id of every PE (`owner_ids` maps names to ids), -1 if free."""
        return self._owner.copy()

    def owner_at(self, row: int, col: int) -> str | None:
        """The owner name of one PE, or None when it is free."""
        oid = int(self._owner[row, col])
        return next((n for n, i in self.owner_ids.items() if i == oid), None)

    @property
    def free_pes(self) -> int:
        """Number of PEs not in any region."""
        return int((self._owner < 0).sum())
