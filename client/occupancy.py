"""An ASCII occupancy map of a wafer: one letter per allocation, `.` for free PEs.

A full WSE-2 fabric is 750 x 994 PEs, so the map is downscaled: one character stands for a block
of PEs, twice as tall as it is wide because terminal characters are about twice as tall as wide.
A block shows the allocation that covers most of it; an allocation that would then show nowhere
(smaller than a block, beside a bigger one) takes the block at its centre, so every allocation is
visible.
"""

from __future__ import annotations

import math
import string
from typing import Any

MAX_MAP_COLS = 64
MAX_MAP_ROWS = 24
ALLOCATION_LABELS = string.ascii_uppercase + string.ascii_lowercase + string.digits
FREE = "."


def allocation_label(index: int) -> str:
    """The letter of the `index`-th allocation (`A`..`Z`, `a`..`z`, `0`..`9`, then `#`)."""
    return ALLOCATION_LABELS[index] if index < len(ALLOCATION_LABELS) else "#"


def block_size(rows: int, cols: int, max_cols: int = MAX_MAP_COLS) -> tuple[int, int]:
    """PEs per map character as (block_rows, block_cols): at most `max_cols` wide and
    `MAX_MAP_ROWS` tall, each block twice as tall as wide (clipped to the wafer)."""
    block_cols = max(1, math.ceil(cols / max_cols), math.ceil(math.ceil(rows / MAX_MAP_ROWS) / 2))
    return min(max(rows, 1), 2 * block_cols), block_cols


def occupancy_grid(wafer: dict[str, Any], max_cols: int = MAX_MAP_COLS) -> list[str]:
    """The map's lines, top row first, for a wafer `{rows, cols, allocations: [...]}`."""
    rows, cols = int(wafer.get("rows") or 0), int(wafer.get("cols") or 0)
    if rows <= 0 or cols <= 0:
        return []
    block_rows, block_cols = block_size(rows, cols, max_cols)
    map_rows, map_cols = math.ceil(rows / block_rows), math.ceil(cols / block_cols)
    best: list[list[tuple[int, str]]] = [[(0, FREE)] * map_cols for _ in range(map_rows)]
    for index, alloc in enumerate(wafer.get("allocations") or []):
        label = allocation_label(index)
        r0, c0 = int(alloc["row"]), int(alloc["col"])
        r1, c1 = min(rows, r0 + int(alloc["rows"])), min(cols, c0 + int(alloc["cols"]))
        for map_r in range(r0 // block_rows, math.ceil(r1 / block_rows)):
            overlap_r = _overlap(r0, r1, map_r * block_rows, (map_r + 1) * block_rows)
            for map_c in range(c0 // block_cols, math.ceil(c1 / block_cols)):
                area = overlap_r * _overlap(c0, c1, map_c * block_cols, (map_c + 1) * block_cols)
                if area > best[map_r][map_c][0]:
                    best[map_r][map_c] = (area, label)
    _show_every_allocation(best, wafer.get("allocations") or [], block_rows, block_cols)
    return ["".join(label for _, label in line) for line in best]


def _show_every_allocation(
    best: list[list[tuple[int, str]]],
    allocations: list[dict[str, Any]],
    block_rows: int,
    block_cols: int,
) -> None:
    shown = {label for line in best for _, label in line}
    for index, alloc in enumerate(allocations):
        label = allocation_label(index)
        if label in shown:
            continue
        centre_r = int(alloc["row"]) + int(alloc["rows"]) // 2
        centre_c = int(alloc["col"]) + int(alloc["cols"]) // 2
        map_r = min(len(best) - 1, centre_r // block_rows)
        map_c = min(len(best[0]) - 1, centre_c // block_cols)
        best[map_r][map_c] = (0, label)


def _overlap(a0: int, a1: int, b0: int, b1: int) -> int:
    return max(0, min(a1, b1) - max(a0, b0))


def render_wafer_map(wafer: dict[str, Any], max_cols: int = MAX_MAP_COLS) -> str:
    """A framed occupancy map with a title line and a legend of its allocations."""
    rows, cols = int(wafer.get("rows") or 0), int(wafer.get("cols") or 0)
    grid = occupancy_grid(wafer, max_cols)
    block_rows, block_cols = block_size(rows, cols, max_cols)
    title = f"{wafer.get('id')} ({wafer.get('arch')}, {rows}x{cols} PEs"
    title += (
        f", 1 char = {block_rows}x{block_cols} PEs)" if (block_rows, block_cols) != (1, 1) else ")"
    )
    width = len(grid[0]) if grid else 0
    lines = [
        title,
        "+" + "-" * width + "+",
        *(f"|{line}|" for line in grid),
        "+" + "-" * width + "+",
    ]
    for index, alloc in enumerate(wafer.get("allocations") or []):
        job = alloc.get("job_id")
        who = f"job {job}" if job is not None else "job (hidden)"
        lines.append(
            f"  {allocation_label(index)}  {who}  tenant {alloc.get('tenant') or '-'}  "
            f"{alloc.get('rows')}x{alloc.get('cols')} at ({alloc.get('row')},{alloc.get('col')})"
        )
    return "\n".join(lines)
