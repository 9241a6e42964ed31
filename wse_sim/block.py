"""Block (transaction) engine: operations over whole sub-rectangles that update data and clocks.

Timing conventions (shared with wse_sim.cycle and wse_sim.reference). With r = arch.ramp_latency
(cycles per RAMP crossing, default 1) and h = arch.hop_latency (cycles per fabric link, 1):
- A wavelet from one PE to another m >= 1 fabric hops away crosses the sender's RAMP into its
  router (r cycles), m fabric links (h each) and the RAMP from the last router into the
  receiving PE (r cycles): its latency is d = 2 r + m h, which is the number of links crossed
  (m + 2) with the default constants. (r = 0 is the older model with free RAMPs: d = m.)
- A flow that starts at cycle T0 issues word k in cycle T0 + k; word k enters the i-th fabric
  link of its path in cycle T0 + k + r + i h and reaches the destination PE at T0 + k + d. So K
  words end at T0 + d + K - 1 (the destination's new clock) and the sender is free at T0 + K.
- A PE's transfer to itself (m = 0) never touches the fabric: a local SRAM copy of K cycles.
- Every out-link (N, S, E, W) carries one wavelet per cycle, and so does every RAMP into a PE.
  `link_busy` holds each out-link's first free entry cycle and, for the RAMP, the first cycle
  a new wavelet may arrive in the PE. A flow starts no earlier than each resource on its path
  allows (wormhole pipelining); that is how contention between flows is charged. The RAMP out
  of a sender is its own injection: the sender's clock serialises it.
- A PE's clock only grows; receiving overlaps the receiver's own work (fabric DSDs run as
  asynchronous microthreads), so a receiver's clock becomes max(its clock, last arrival).
- Collectives follow the same rules: a broadcast multicasts in the routers, so a PE L hops from
  the root gets its last word at T0 + 2 r + L h + K - 1; a chain reduction passes through
  every PE on the way (RAMP in, add, RAMP out), so each stage of the chain costs 2 r + h.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from sam_domain.geometry import Rect
from wse_sim.collectives import allreduce, broadcast_col, broadcast_row, reduce_col, reduce_row
from wse_sim.errors import RectError
from wse_sim.fabric import Region, Wafer

N, S, E, W, RAMP = 0, 1, 2, 3, 4

__all__ = [
    "compute",
    "transfer",
    "shift",
    "host_to_region",
    "region_to_host",
    "barrier",
    "run_together",
    "broadcast_row",
    "broadcast_col",
    "reduce_row",
    "reduce_col",
    "allreduce",
    "route_hops",
]


def compute(region: Region, rect: Rect | None, flops_per_pe: Any, dtype: str = "float32") -> int:
    """Charge local compute: cycles = ceil(flops / rate) per PE; flops is a number or [h, w].

    Returns the largest per-PE cycle count of the op.
    """
    r, c, h, w = region.rect(rect)
    rate = region.arch.flops_per_cycle(dtype)
    flops = np.asarray(region.xp.to_numpy(flops_per_pe), dtype=np.float64)
    cycles = np.ceil(flops / rate).astype(np.int64)
    add: Any = (
        int(cycles)
        if cycles.ndim == 0
        else region.xp.asarray(np.broadcast_to(cycles, (h, w)), "int64")
    )
    region.clock[r : r + h, c : c + w] += add
    region.busy[r : r + h, c : c + w] += add
    return int(cycles.max()) if cycles.size else 0


def route_hops(dr: int, dc: int) -> list[tuple[int, int, int]]:
    """The XY route of an offset (dr, dc): per hop, (row offset, col offset, out-port) of the PE
    whose out-link the hop uses; columns first, then rows."""
    hops = []
    step_c, port_c = (1, E) if dc > 0 else (-1, W)
    hops += [(0, step_c * k, port_c) for k in range(abs(dc))]
    step_r, port_r = (1, S) if dr > 0 else (-1, N)
    hops += [(step_r * m, dc, port_r) for m in range(abs(dr))]
    return hops


def _clip(
    region: Region, r: int, c: int, h: int, w: int
) -> tuple[tuple[slice, slice], tuple[slice, slice]] | None:
    """Intersect the rect (r, c, h, w) with the region: (rect-local slices, region slices)."""
    r0, r1, c0, c1 = max(r, 0), min(r + h, region.rows), max(c, 0), min(c + w, region.cols)
    if r0 >= r1 or c0 >= c1:
        return None
    return (slice(r0 - r, r1 - r), slice(c0 - c, c1 - c)), (slice(r0, r1), slice(c0, c1))


def transfer(region: Region, src_rect: Rect | None, dst_rect: Rect, words: int) -> int:
    """Move `words` (K) 32-bit words from every PE of src_rect to the same place in dst_rect.

    d + K - 1 cycles when the path is free, d = arch.path_latency(hops): two RAMP crossings
    plus the fabric hops (a PE's transfer to itself is a K-cycle local copy). Destinations
    outside the region are dropped (region.faults, region.wavelets_dropped). Rects of different
    shapes: a redistribution (see `_redistribute`). Returns the cycles from the first start to the last end.
    """
    r, c, h, w = region.rect(src_rect)
    tr, tc, th, tw = (int(v) for v in dst_rect)
    if th < 1 or tw < 1:
        raise RectError(f"destination rectangle {tuple(dst_rect)} is empty; give rows, cols >= 1")
    if (th, tw) != (h, w):
        return _redistribute(region, (r, c, h, w), (tr, tc, th, tw), int(words))
    return _route_block(region, (r, c, h, w), tr - r, tc - c, int(words))


def _route_block(region: Region, src: Rect, dr: int, dc: int, k: int) -> int:
    """One-to-one flows from src shifted by (dr, dc); see the module docstring for timing."""
    r, c, h, w = src
    sl = (slice(r, r + h), slice(c, c + w))
    m = abs(dr) + abs(dc)
    if k <= 0:
        return 0
    if m == 0:  # a local SRAM copy, one word per cycle; no fabric, no RAMP
        region.clock[sl] += k
        region.busy[sl] += k
        return k
    arch = region.arch
    d = arch.path_latency(m)
    # flows of this one op share a link when the offset exceeds 1 along a full row or column
    occupy = max(min(abs(dc), w), min(abs(dr), h)) * k
    hops = route_hops(dr, dc)
    dst = _clip(region, r + dr, c + dc, h, w)
    start = _earliest_start(region, src, hops, dst, d)
    for i, (o_r, o_c, port) in enumerate(hops):
        cut = _clip(region, r + o_r, c + o_c, h, w)
        if cut is not None:
            busy = region.link_busy[cut[1] + (port,)]
            entry = arch.ramp_latency + i * arch.hop_latency
            busy[...] = region.xp.maximum(busy, start[cut[0]] + (entry + occupy))
    region.clock[sl] = region.xp.maximum(region.clock[sl], start + occupy)
    region.busy[sl] += k
    region.words_sent[sl] += k
    end = region.xp.amax(start) + occupy
    delivered = 0
    if dst is not None:
        end = max(end, _deliver(region, dst, start[dst[0]] + (d + occupy - 1), k))
        delivered = int(np.prod(start[dst[0]].shape))
    region.wavelets_sent += k * h * w
    region.wavelets_delivered += k * delivered
    region.wavelets_dropped += k * (h * w - delivered)
    region.faults += h * w - delivered
    return end - region.xp.amin(start)


def _earliest_start(
    region: Region,
    src: Rect,
    hops: list[tuple[int, int, int]],
    dst: tuple[tuple[slice, slice], tuple[slice, slice]] | None,
    d: int,
) -> Any:
    """[h, w] start cycle of each flow: its sender is ready and every link (and the
    destination RAMP) is free when the flow's first word reaches it; d = path latency."""
    xp, lb, arch = region.xp, region.link_busy, region.arch
    r, c, h, w = src
    start = xp.copy(region.clock[r : r + h, c : c + w])
    for i, (o_r, o_c, port) in enumerate(hops):
        cut = _clip(region, r + o_r, c + o_c, h, w)
        if cut is not None:
            entry = arch.ramp_latency + i * arch.hop_latency
            start[cut[0]] = xp.maximum(start[cut[0]], lb[cut[1] + (port,)] - entry)
    if dst is not None:
        start[dst[0]] = xp.maximum(start[dst[0]], lb[dst[1] + (RAMP,)] - d)
    return start


def _deliver(
    region: Region, dst: tuple[tuple[slice, slice], tuple[slice, slice]], arrive: Any, k: int
) -> int:
    """Land K words whose last arrives at `arrive` [h', w'] on the destination PEs."""
    xp, ramp = region.xp, region.link_busy[dst[1] + (RAMP,)]
    ramp[...] = xp.maximum(ramp, arrive + 1)
    region.clock[dst[1]] = xp.maximum(region.clock[dst[1]], arrive)
    region.words_received[dst[1]] += k
    return xp.amax(arrive)


def _redistribute(region: Region, src: Rect, dst: Rect, k: int) -> int:
    """Move K words per src PE into a rect of another shape: all words cross the lanes between
    the rects (rows for a mostly horizontal move, columns otherwise) after the path latency of
    the farthest pair of corners (RAMPs included).
    The share of the words bound for PEs outside the region is dropped and counted."""
    xp = region.xp
    (r, c, h, w), (tr, tc, th, tw) = src, dst
    total = k * h * w
    if total <= 0:
        return 0
    lanes = min(h, th) if abs(tc - c) >= abs(tr - r) else min(w, tw)
    per_lane = -(-total // lanes)
    corners = [(a, b) for a in (r, r + h - 1) for b in (c, c + w - 1)]
    targets = [(a, b) for a in (tr, tr + th - 1) for b in (tc, tc + tw - 1)]
    far = max(abs(a - x) + abs(b - y) for a, b in corners for x, y in targets)  # >= 1
    ssl = (slice(r, r + h), slice(c, c + w))
    t0 = xp.amax(region.clock[ssl])
    end = t0 + region.arch.path_latency(far) + per_lane - 1
    region.clock[ssl] = xp.maximum(region.clock[ssl], t0 + per_lane)
    region.busy[ssl] += k
    region.words_sent[ssl] += k
    share = np.full((th, tw), total // (th * tw), dtype=np.int64)
    share.reshape(-1)[: total % (th * tw)] += 1  # every word lands somewhere
    inside = _clip(region, tr, tc, th, tw)
    delivered = 0
    if inside is not None:
        got = share[inside[0]]
        delivered = int(got.sum())
        region.clock[inside[1]] = xp.maximum(region.clock[inside[1]], end)
        region.words_received[inside[1]] += xp.asarray(got, "int64")
    region.wavelets_sent += total
    region.wavelets_delivered += delivered
    region.wavelets_dropped += total - delivered
    region.faults += int(delivered < total)
    cycles: int = end - t0
    return cycles


def shift(region: Region, rect: Rect | None, data: Any, dr: int, dc: int) -> tuple[Any, int]:
    """Move per-PE data by (dr, dc) inside `rect`; data is [h, w, ...] (K = elements per PE).

    Returns (out, cycles) with out[a, b] = data[a - dr, b - dc], zero where that lies outside
    the rect. Only PEs whose destination is inside the rect send, so a halo exchange never faults.
    """
    r, c, h, w = region.rect(rect)
    a0, a1, b0, b1 = max(0, -dr), min(h, h - dr), max(0, -dc), min(w, w - dc)
    out = region.xp.zeros_like(data)
    if a0 >= a1 or b0 >= b1:
        return out, 0
    k = int(np.prod(tuple(data.shape[2:]), dtype=np.int64))
    cycles = _route_block(region, (r + a0, c + b0, a1 - a0, b1 - b0), dr, dc, k)
    out[a0 + dr : a1 + dr, b0 + dc : b1 + dc] = data[a0:a1, b0:b1]
    return out, cycles


def _host_cycles(region: Region, words: int, h: int, streamed: bool = False) -> int:
    """Cycles of one host transfer. Position-independent on purpose: a job's speed must not
    depend on where the scheduler puts it, so channels scale with the rect's height only.
    A `streamed` transfer rides an already-open, prefetching stream (a training job's batches):
    it pays bandwidth only, not the per-transaction launch overhead."""
    arch = region.arch
    channels_per_row = arch.io_channels_per_edge / arch.rows
    channels = int(min(arch.max_memcpy_channels, max(1, round(2 * h * channels_per_row))))
    seconds = words * arch.wavelet_bits / (channels * arch.host_channel_gbps * 1e9) + (
        0.0 if streamed else arch.host_txn_overhead_s
    )
    return int(np.ceil(seconds * arch.clock_hz))


def _host(
    region: Region, words: int, rect: Rect | None, inbound: bool, streamed: bool = False
) -> int:
    r, c, h, w = region.rect(rect)
    if words <= 0:
        return 0
    sl = (slice(r, r + h), slice(c, c + w))
    cycles = _host_cycles(region, int(words), h, streamed)
    end = region.xp.amax(region.clock[sl]) + cycles
    region.clock[sl] = end
    counter = region.words_received if inbound else region.words_sent
    counter[sl] += int(words) // (h * w)
    return cycles


def host_to_region(
    region: Region, words: int, rect: Rect | None = None, *, streamed: bool = False
) -> int:
    """Stream `words` 32-bit words from the host into rect (edge channels, 7 Gb/s each, plus
    the per-transaction overhead unless `streamed`). All PEs of rect wait for it. Returns its
    cycles."""
    return _host(region, words, rect, inbound=True, streamed=streamed)


def region_to_host(
    region: Region, words: int, rect: Rect | None = None, *, streamed: bool = False
) -> int:
    """Stream `words` 32-bit words from rect to the host; see host_to_region."""
    return _host(region, words, rect, inbound=False, streamed=streamed)


def barrier(region: Region, rect: Rect | None = None) -> int:
    """Synchronise rect: every clock becomes max + cost, the cost of a one-word chain reduce to
    the top-left corner and a broadcast back: per side of n > 1 PEs, (n - 1) chain stages of
    path_latency(1) = 2 ramp + hop, plus a broadcast over n - 1 hops, path_latency(n - 1) =
    2 ramp + (n - 1) hop. With free RAMPs (ramp 0, hop 1) that is 2 (rows - 1) + 2 (cols - 1).
    Returns the cost cycles."""
    r, c, h, w = region.rect(rect)
    sl = (slice(r, r + h), slice(c, c + w))
    arch = region.arch
    stage = arch.path_latency(1)
    cost = sum((n - 1) * stage + arch.path_latency(n - 1) for n in (h, w) if n > 1)
    region.clock[sl] = region.xp.amax(region.clock[sl]) + cost
    return cost


def run_together(
    wafer: Wafer, programs: Mapping[str, Callable[[Region], Any]]
) -> dict[str, object]:
    """Advance several regions of one wafer in one call: programs maps owner -> step(region).

    Regions share no state, so the order does not matter and each job sees exactly what it
    would see alone. Returns owner -> the step's result.
    """
    return {owner: step(wafer.regions[owner]) for owner, step in sorted(programs.items())}
