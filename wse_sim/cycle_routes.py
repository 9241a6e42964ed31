"""Route compilation for the cycle engine: masks per (color, input, output) become candidates
with bounding boxes and pre-sliced views, so a cycle does no gathers and no index arithmetic."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from wse_sim.cycle import CycleFabric

N, S, E, W, RAMP = 0, 1, 2, 3, 4
OPPOSITE = {N: S, S: N, E: W, W: E}
STEP = {N: (-1, 0), S: (1, 0), E: (0, 1), W: (0, -1), RAMP: (0, 0)}

Box = tuple[slice, slice]


def _moved(box: Box, port: int) -> Box:
    dr, dc = STEP[port]
    return (slice(box[0].start + dr, box[0].stop + dr), slice(box[1].start + dc, box[1].stop + dc))


class Out:
    """One output of a candidate, with views of every array its moves touch."""

    __slots__ = (
        "port",
        "mask",
        "not_mask",
        "shared",
        "full",
        "taken",
        "nb_cnt",
        "nb_v0",
        "nb_v1",
        "recv_count",
        "recv_value",
        "recv_last",
    )

    def __init__(self, fabric: CycleFabric, color: int, box: Box, spec: tuple[Any, ...]) -> None:
        o, self.mask, self.not_mask, nbox, self.shared, self.full = spec
        self.port = o
        self.taken = fabric._taken[o][box]
        if o == RAMP:
            self.recv_count = fabric._recv_count[color][box]
            self.recv_value = fabric._recv_value[color][box]
            self.recv_last = fabric._recv_last[color][box]
        else:
            port = OPPOSITE[o]
            self.nb_cnt = fabric.cnt[color][port][nbox]
            self.nb_v0 = fabric.v0[color][port][nbox]
            self.nb_v1 = fabric.v1[color][port][nbox]


class Candidate:
    """A (color, input port) pair with views of its FIFO over its bounding box."""

    __slots__ = ("fifo", "v0", "v1", "has", "stuck_possible", "outs")

    def __init__(
        self,
        fabric: CycleFabric,
        color: int,
        p: int,
        box: Box,
        outs: list[Any],
        has: np.ndarray,
        stuck_possible: bool,
    ) -> None:
        self.fifo = fabric.cnt[color][p][box]
        self.v0, self.v1 = fabric.v0[color][p][box], fabric.v1[color][p][box]
        self.has, self.stuck_possible = has, stuck_possible
        self.outs = [Out(fabric, color, box, spec) for spec in outs]


def compile_routes(fabric: CycleFabric) -> list[Any]:
    """Candidates (color, input, box, [(output, mask, not mask, neighbour box)], has_route,
    stuck_possible) in priority order."""
    fabric._sync_senders()
    fabric._halo_ports = set()
    for (color, _p, o), mask in fabric.routes.items():
        if o != RAMP and bool((shift_mask(mask, o) & fabric.halo).any()):
            fabric._halo_ports.add((color, OPPOSITE[o]))
    cands = []
    for color in range(fabric.colors):
        for p in range(5):
            outs = [
                (o, m)
                for (cc, pp, o), m in sorted(fabric.routes.items(), key=lambda kv: kv[0])
                if cc == color and pp == p
            ]
            arrivals = _arrivals(fabric, color, p)
            if not outs and not arrivals.any():
                continue
            has = np.logical_or.reduce([m for _, m in outs]) if outs else np.zeros_like(arrivals)
            rows, cols = np.nonzero(has | arrivals)
            box = (slice(rows.min(), rows.max() + 1), slice(cols.min(), cols.max() + 1))
            stuck = bool((arrivals & ~has).any())
            out_list = [
                (
                    o,
                    m[box],
                    ~m[box],
                    _moved(box, o),
                    _contended(fabric, color, p, o, m, box),
                    bool((m == has).all()),
                )
                for o, m in outs
            ]
            cands.append((color, p, box, out_list, has[box], stuck))
    fabric._compile_senders()
    return cands


def _contended(
    fabric: CycleFabric, color: int, p: int, o: int, mask: np.ndarray, box: Box
) -> Box | None:
    """Where another (color, input) may also want output o on a PE of `mask`, as a box
    relative to `box`; only there must arbitration track the outputs taken this cycle."""
    shared = np.zeros_like(mask)
    for (c2, p2, o2), m2 in fabric.routes.items():
        if o2 == o and (c2, p2) != (color, p):
            shared |= m2 & mask
    if not shared.any():
        return None
    rows, cols = np.nonzero(shared)
    r0, c0 = box[0].start, box[1].start
    return (
        slice(rows.min() - r0, rows.max() + 1 - r0),
        slice(cols.min() - c0, cols.max() + 1 - c0),
    )


def shift_mask(mask: np.ndarray, o: int) -> np.ndarray:
    """Where the wavelets leaving `mask` through port o land (no wrap-around)."""
    out = np.zeros_like(mask)
    dr, dc = STEP[o]
    rows, cols = mask.shape
    out[max(dr, 0) : rows + min(dr, 0), max(dc, 0) : cols + min(dc, 0)] = mask[
        max(-dr, 0) : rows + min(-dr, 0), max(-dc, 0) : cols + min(-dc, 0)
    ]
    return out


def _arrivals(fabric: CycleFabric, color: int, p: int) -> np.ndarray:
    """Bool mask of the PEs where a wavelet can appear in FIFO (color, p)."""
    if p == RAMP:
        waiting: np.ndarray = fabric._remaining[color] > 0
        return waiting
    arrive = np.zeros(fabric.halo.shape, bool)
    for (cc, _pp, o), m in fabric.routes.items():
        if cc == color and o == OPPOSITE[p]:
            arrive |= shift_mask(m, o)
    return arrive


# --- simulation -----------------------------------------------------------------------
