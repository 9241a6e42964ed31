"""Route-and-send helpers that set up common flows on a CycleFabric (XY transfers, row and
column broadcasts), mirroring the block engine's operations for validation."""

from __future__ import annotations

from typing import Any

_DIR = {"E": (0, 1), "W": (0, -1), "S": (1, 0), "N": (-1, 0)}
_OPPOSITE = {"E": "W", "W": "E", "S": "N", "N": "S"}


def xy_hops(src: tuple[int, int], dst: tuple[int, int]) -> list[tuple[int, int, str]]:
    """(row, col, out port) of each hop of the XY route, columns first, then rows."""
    (i, j), (ti, tj) = src, dst
    hops = []
    while j != tj:
        port = "E" if tj > j else "W"
        hops.append((i, j, port))
        j += _DIR[port][1]
    while i != ti:
        port = "S" if ti > i else "N"
        hops.append((i, j, port))
        i += _DIR[port][0]
    return hops


def add_transfer(
    fabric: Any, color: int, src: tuple[int, int], dst: tuple[int, int], words: int, start: int = 0
) -> None:
    """Route `color` along the XY path from src to dst and make src send `words` on it."""
    rx = "RAMP"
    for a, b, port in xy_hops(src, dst):
        fabric.route(color, (a, b, 1, 1), rx, port)
        rx = _OPPOSITE[port]
    fabric.route(color, (dst[0], dst[1], 1, 1), rx, "RAMP")
    fabric.send(color, (src[0], src[1], 1, 1), words, start)


def add_row_broadcast(
    fabric: Any, color: int, rect: tuple[int, int, int, int], root: int, words: int, start: int = 0
) -> None:
    """Each row of rect: the PE at column `root` (rect-relative) multicasts to its row."""
    r, c, h, w = rect
    rc = c + root
    tx = [p for p, ok in (("E", rc < c + w - 1), ("W", rc > c)) if ok]
    if tx:
        fabric.route(color, (r, rc, h, 1), "RAMP", tx)
    if rc < c + w - 1:
        if c + w - 2 > rc:
            fabric.route(color, (r, rc + 1, h, c + w - 2 - rc), "W", ["E", "RAMP"])
        fabric.route(color, (r, c + w - 1, h, 1), "W", "RAMP")
    if rc > c:
        if rc - 1 > c:
            fabric.route(color, (r, c + 1, h, rc - 1 - c), "E", ["W", "RAMP"])
        fabric.route(color, (r, c, h, 1), "E", "RAMP")
    fabric.send(color, (r, rc, h, 1), words, start)


def add_col_broadcast(
    fabric: Any, color: int, rect: tuple[int, int, int, int], root: int, words: int, start: int = 0
) -> None:
    """Each column of rect: the PE at row `root` (rect-relative) multicasts to its column."""
    r, c, h, w = rect
    rr = r + root
    tx = [p for p, ok in (("S", rr < r + h - 1), ("N", rr > r)) if ok]
    if tx:
        fabric.route(color, (rr, c, 1, w), "RAMP", tx)
    if rr < r + h - 1:
        if r + h - 2 > rr:
            fabric.route(color, (rr + 1, c, r + h - 2 - rr, w), "N", ["S", "RAMP"])
        fabric.route(color, (r + h - 1, c, 1, w), "N", "RAMP")
    if rr > r:
        if rr - 1 > r:
            fabric.route(color, (r + 1, c, rr - 1 - r, w), "S", ["N", "RAMP"])
        fabric.route(color, (r, c, 1, w), "S", "RAMP")
    fabric.send(color, (rr, c, 1, w), words, start)
