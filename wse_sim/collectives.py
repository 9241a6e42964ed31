"""Row and column broadcasts and reductions, and the 2-D all-reduce, for the block engine.

Written once for rows; columns reuse the same code on a transposed view of the region's
arrays (writes go through to the region). Timing follows wse_sim.block's conventions, with
r = arch.ramp_latency and h = arch.hop_latency: a broadcast from `root` is multicast by the
routers and ends at T0 + 2 r + L h + K - 1 (L = hops to the farthest PE); a chain reduction
goes through every PE on the way (RAMP in, add, RAMP out), so it ends at T0 + L (2 r + h) + K - 1.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sam_domain.geometry import Rect
from wse_sim.fabric import Region

N, S, E, W, RAMP = 0, 1, 2, 3, 4


class _AxisView:
    """The region's arrays oriented so that the collective runs along axis 1 (within rows)."""

    def __init__(self, region: Region, along_cols: bool) -> None:
        xp = region.xp
        self.region, self.xp = region, xp
        self.ramp, self.hop = region.arch.ramp_latency, region.arch.hop_latency

        def flip(a: Any) -> Any:
            return xp.swap01(a) if along_cols else a

        self.clock, self.busy = flip(region.clock), flip(region.busy)
        self.sent, self.received = flip(region.words_sent), flip(region.words_received)
        self.links = flip(region.link_busy)
        self.plus, self.minus = (S, N) if along_cols else (E, W)


def _view_rect(region: Region, rect: Rect | None, along_cols: bool) -> Rect:
    r, c, h, w = region.rect(rect)
    return (c, r, w, h) if along_cols else (r, c, h, w)


def _positions(xp: Any, w: int) -> Any:
    return xp.asarray(np.arange(w, dtype=np.int64), "int64")


def _broadcast(v: _AxisView, rect: Rect, k: int, root: int) -> int:
    """Root column of each row multicasts K words to every other PE of its row in rect.

    Word k leaves the root's RAMP at t0 + k + r, enters the link out of the PE `p` hops from
    the root at t0 + k + r + p h and reaches a PE at distance q at t0 + k + 2 r + q h."""
    xp, (r, c, h, w) = v.xp, rect
    if not 0 <= root < w:
        raise ValueError(f"root {root} is outside the {w} PEs of the broadcast; use 0..{w - 1}")
    if w == 1 or k <= 0:
        return 0
    clk = v.clock[r : r + h, c : c + w]
    lb = v.links[r : r + h, c : c + w]
    pos = _positions(xp, w)
    dist = (pos - root).abs() if xp.torch is not None else np.abs(pos - root)
    arrive = dist * v.hop + 2 * v.ramp  # latency to each PE (the root's own entry is unused)
    plus = (pos[root : w - 1] - root) * v.hop + v.ramp  # link entry offsets, eastward
    minus = (root - pos[1 : root + 1]) * v.hop + v.ramp  # and westward
    start = xp.copy(clk[:, root])
    sides = [sl for sl in (slice(0, root), slice(root + 1, w)) if sl.start < sl.stop]  # receivers
    for sl in sides:
        start = xp.maximum(start, xp.max_axis(lb[:, sl, RAMP] - arrive[sl], 1))
    if root < w - 1:
        start = xp.maximum(start, xp.max_axis(lb[:, root : w - 1, v.plus] - plus, 1))
    if root > 0:
        start = xp.maximum(start, xp.max_axis(lb[:, 1 : root + 1, v.minus] - minus, 1))
    t0 = start[:, None]
    if root < w - 1:
        lb[:, root : w - 1, v.plus] = xp.maximum(lb[:, root : w - 1, v.plus], t0 + plus + k)
    if root > 0:
        lb[:, 1 : root + 1, v.minus] = xp.maximum(lb[:, 1 : root + 1, v.minus], t0 + minus + k)
    for sl in sides:
        lb[:, sl, RAMP] = xp.maximum(lb[:, sl, RAMP], t0 + arrive[sl] + k)
    end = t0 + arrive + (k - 1)
    end[:, root] = start + k
    clk[...] = xp.maximum(clk, end)
    v.busy[r : r + h, c + root] += k
    v.sent[r : r + h, c + root] += k
    v.received[r : r + h, c : c + w] += k
    v.received[r : r + h, c + root] -= k
    _count(v.region, k * h * (w - 1), k * h * (w - 1))
    return xp.amax(end) - xp.amin(start)


def _count(region: Region, sent: int, delivered: int) -> None:
    region.wavelets_sent += sent
    region.wavelets_delivered += delivered


def _chain_side(v: _AxisView, rows: slice, cols: list[int], toward: int, k: int) -> tuple[Any, Any]:
    """Pipelined chain toward the root over the PEs `cols`, ordered nearest first.

    Each stage is a one-hop PE-to-PE move of latency s = 2 r + h (RAMP out, link, RAMP in): the
    PE at distance q starts forwarding at t_q = max over q' >= q of (ready_q' + (q' - q) s),
    its word enters its out-link at t_q + r, and the root gets its first word at t_1 + s.
    Returns (t_1 + s per row, per-PE end times)."""
    xp = v.xp
    stage = 2 * v.ramp + v.hop
    ready = xp.maximum(v.clock[rows, cols], v.links[rows, cols, toward] - v.ramp)
    q = (_positions(xp, len(cols)) + 1) * stage
    t = xp.rev_cummax(ready + q) - q
    v.links[rows, cols, toward] = t + (v.ramp + k)
    v.clock[rows, cols] = t + k
    v.busy[rows, cols] += k
    v.sent[rows, cols] += k
    if len(cols) > 1:  # each PE but the farthest receives the partial sums it adds to
        v.received[rows, cols[:-1]] += k
    return t[:, 0] + stage, t + k


def _reduce_chain(v: _AxisView, rect: Rect, k: int, root: int) -> int:
    xp, (r, c, h, w) = v.xp, rect
    rows = slice(r, r + h)
    root_col = c + root
    clk_root = xp.copy(v.clock[rows, root_col])
    firsts = []
    if root < w - 1:
        firsts.append(_chain_side(v, rows, list(range(root_col + 1, c + w)), v.minus, k)[0])
    if root > 0:
        firsts.append(_chain_side(v, rows, list(range(root_col - 1, c - 1, -1)), v.plus, k)[0])
    first = firsts[0] if len(firsts) == 1 else xp.where(firsts[0] < firsts[1], firsts[0], firsts[1])
    ramp = v.links[rows, root_col, RAMP]
    end = xp.maximum(xp.maximum(first, ramp) + (len(firsts) * k - 1), clk_root)
    if len(firsts) == 2:  # each side's own last word also bounds the end
        end = xp.maximum(end, xp.maximum(firsts[0], firsts[1]) + (k - 1))
    v.links[rows, root_col, RAMP] = end + 1
    v.clock[rows, root_col] = end
    v.busy[rows, root_col] += k * len(firsts)
    v.received[rows, root_col] += k * len(firsts)
    _count(v.region, k * h * (w - 1), k * h * (w - 1))
    return xp.amax(end) - xp.amin(clk_root)


def _reduce_tree(v: _AxisView, rect: Rect, k: int, root: int) -> int:
    """Binary tree per side: at level l, the PE at distance q = 2^l (mod 2^(l+1)) sends to q - 2^l;
    each level costs its path latency 2 r + 2^l h plus K - 1 (adds stream as words arrive)."""
    xp, (r, c, h, w) = v.xp, rect
    rows = slice(r, r + h)
    before = xp.amin(v.clock[rows, c : c + w])
    for side in (list(range(c + root, c + w)), list(range(c + root, c - 1, -1))):
        span = 1
        while span < len(side):
            senders, receivers = side[span :: 2 * span], side[0 : len(side) - span : 2 * span]
            receivers = receivers[: len(senders)]
            arrive = v.clock[rows, senders] + (2 * v.ramp + span * v.hop + k - 1)
            v.clock[rows, senders] = v.clock[rows, senders] + k
            v.busy[rows, senders] += k
            v.sent[rows, senders] += k
            v.received[rows, receivers] += k
            v.clock[rows, receivers] = xp.maximum(v.clock[rows, receivers], arrive)
            _count(v.region, k * h * len(senders), k * h * len(senders))
            span *= 2
    return xp.amax(v.clock[rows, c + root]) - before


def _collective(
    region: Region,
    rect: Rect | None,
    along_cols: bool,
    kind: str,
    words: int,
    root: int,
    algorithm: str = "chain",
) -> int:
    view = _AxisView(region, along_cols)
    vrect = _view_rect(region, rect, along_cols)
    k = int(words)
    if kind == "broadcast":
        return _broadcast(view, vrect, k, root)
    if not 0 <= root < vrect[3]:
        raise ValueError(
            f"root {root} is outside the {vrect[3]} PEs of the reduction; use 0..{vrect[3] - 1}"
        )
    if vrect[3] == 1 or k <= 0:
        return 0
    if algorithm == "chain":
        return _reduce_chain(view, vrect, k, root)
    if algorithm == "tree":
        return _reduce_tree(view, vrect, k, root)
    raise ValueError(f"unknown reduction algorithm {algorithm!r}; use 'chain' or 'tree'")


def broadcast_row(region: Region, rect: Rect | None, words: int, root: int = 0) -> int:
    """In every row of rect, the PE at column `root` (rect-relative) sends K words to the rest
    of the row: K + 2 r + L h - 1 cycles from idle, L = hops to the farthest PE, r = ramp and
    h = hop latency (K + L + 1 with the default constants). Returns the cycles."""
    return _collective(region, rect, False, "broadcast", words, root)


def broadcast_col(region: Region, rect: Rect | None, words: int, root: int = 0) -> int:
    """In every column of rect, the PE at row `root` sends K words to the rest of the column."""
    return _collective(region, rect, True, "broadcast", words, root)


def reduce_row(
    region: Region, rect: Rect | None, words: int, root: int = 0, algorithm: str = "chain"
) -> int:
    """Sum K words of every PE of each row into the PE at column `root`.

    "chain": pipelined, K + L (2 r + h) - 1 cycles from idle (L = hops to the farthest PE);
    "tree": sum over levels l of (2 r + 2^l h + K - 1)."""
    return _collective(region, rect, False, "reduce", words, root, algorithm)


def reduce_col(
    region: Region, rect: Rect | None, words: int, root: int = 0, algorithm: str = "chain"
) -> int:
    """Sum K words of every PE of each column into the PE at row `root`; see reduce_row."""
    return _collective(region, rect, True, "reduce", words, root, algorithm)


def allreduce(region: Region, rect: Rect | None, words: int, algorithm: str = "chain") -> int:
    """Every PE of rect ends with the sum of all PEs' K words: reduce rows into column 0, reduce
    column 0 into the top-left PE, broadcast down column 0, broadcast along rows.

    From idle with chains, per side of n > 1 PEs (a side of 1 PE costs nothing):
    (n - 1)(2 r + h_lat) + K - 1 to reduce plus 2 r + (n - 1) h_lat + K - 1 to broadcast, which
    is 2 (n + K - 2) with free RAMPs (r = 0, h_lat = 1)."""
    r, c, h, w = region.rect(rect)
    sl = (slice(r, r + h), slice(c, c + w))
    before = region.xp.amax(region.clock[sl])
    reduce_row(region, (r, c, h, w), words, 0, algorithm)
    reduce_col(region, (r, c, h, 1), words, 0, algorithm)
    broadcast_col(region, (r, c, h, 1), words, 0)
    broadcast_row(region, (r, c, h, w), words, 0)
    return region.xp.amax(region.clock[sl]) - before
