"""Cycle engine: routers with colors, wavelets moved one hop per cycle, for validation.

Per PE and color there are five input FIFOs of depth 2 (from N, S, E, W, and RAMP = the PE's
own injections). Routes are static per (color, input port) -> set of output ports, as in CSL's
color configuration, and are compiled ahead of time into boolean masks per
(color, input, output): no per-cycle gathers. The RAMP is a real link in both directions,
with r = arch.ramp_latency cycles per crossing (0 or 1 here; default 1). Each cycle t:
  0. RAMP in: wavelets that entered a RAMP-in link (router -> PE) in cycle t - r land in their
     PE now and are timestamped t (r = 1; with r = 0 they land in the cycle of step 3);
  1. injection (r = 0): a sending PE pushes its next word into its empty RAMP FIFO; the word
     can leave the router this same cycle;
  2. arbitration: candidates (color, input) in round-robin order claim output ports; a
     multicast moves only when every output it needs is free and has credit (back-pressure:
     the downstream FIFO held fewer than 2 wavelets at the start of the cycle). The RAMP
     output of a router carries one wavelet per cycle, whatever its color;
  3. moves: wavelets land in the neighbours' FIFOs, enter the RAMP-in link to their PE, or
     are dropped when they would leave the fabric; heads pop;
  4. RAMP out (r = 1): a sending PE issues its next word onto its RAMP-out link when the
     router's RAMP FIFO is empty after this cycle's pops (back-pressure: a stalled head holds
     the PE); the word is in the router at the end of the cycle and can leave from t + 1.
Timing matches wse_sim.block's conventions: K words over m free hops are delivered by cycle
T0 + d + K - 1, d = 2 r + m (the links crossed, RAMPs included). Fabric links take one cycle:
an arch with hop_latency != 1 is refused (the block engine models it). The fabric here is one
region: its border is the region border.

Arrays are 2-D over the fabric padded with a one-PE halo, so a move to a neighbour is a
shifted slice; a wavelet that lands in the halo has left the region and is dropped. Each
candidate works on the bounding box of its routes only.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from wse_sim import cycle_flows
from wse_sim.arch import WSE2, Arch
from wse_sim.cycle_routes import Candidate, Out, compile_routes
from wse_sim.errors import CycleEngineLimitError

N, S, E, W, RAMP = 0, 1, 2, 3, 4
PORT = {"N": N, "S": S, "E": E, "W": W, "RAMP": RAMP}
MAX_SIDE = 256
IDLE_LIMIT = 1024  # cycles without any move before run() reports the fabric as stalled


def _ports(names: Iterable[str] | str) -> list[int]:
    if isinstance(names, str):
        names = [names]
    return [PORT[n.upper()] for n in names]


class CycleFabric:
    """A small fabric (one region) simulated cycle by cycle; results as [rows, cols] arrays.

    `arch` supplies the latencies (default: WSE-2's constants): ramp_latency 0 or 1 and
    hop_latency 1 are modelled; other values raise CycleEngineLimitError."""

    def __init__(self, rows: int, cols: int, colors: int = 4, arch: Arch | None = None) -> None:
        if rows > MAX_SIDE or cols > MAX_SIDE or rows < 1 or cols < 1:
            raise CycleEngineLimitError(
                f"the cycle engine validates regions up to {MAX_SIDE}x{MAX_SIDE}, got {rows}x{cols}; "
                "use the block engine (wse_sim.block) for larger regions"
            )
        arch = arch or WSE2
        if arch.hop_latency != 1:
            raise CycleEngineLimitError(
                f"the cycle engine moves wavelets one fabric hop per cycle; hop_latency="
                f"{arch.hop_latency} is modelled by the block engine only (wse_sim.block), "
                "or use an arch with hop_latency=1"
            )
        if arch.ramp_latency not in (0, 1):
            raise CycleEngineLimitError(
                f"the cycle engine models RAMP crossings of 0 or 1 cycles; ramp_latency="
                f"{arch.ramp_latency} is modelled by the block engine only (wse_sim.block)"
            )
        self.arch, self.ramp_latency = arch, arch.ramp_latency
        # RAMP-in links: per cycle still in the link, the (out, moved, values) that entered it
        self._ramp_in: list[list[tuple[Out, np.ndarray, np.ndarray]]] = [
            [] for _ in range(self.ramp_latency)
        ]
        self.rows, self.cols, self.colors = rows, cols, colors
        pad = (rows + 2, cols + 2)
        self.halo = np.ones(pad, bool)
        self.halo[1:-1, 1:-1] = False
        self.routes: dict[tuple[int, int, int], np.ndarray] = {}
        self.cnt = [[np.zeros(pad, np.uint8) for _ in range(5)] for _ in range(colors)]
        self.v0 = [[np.zeros(pad, np.float32) for _ in range(5)] for _ in range(colors)]
        self.v1 = [[np.zeros(pad, np.float32) for _ in range(5)] for _ in range(colors)]
        self._remaining = np.zeros((colors, *pad), np.int64)
        self._injected = np.zeros((colors, *pad), np.int64)
        self._start = np.zeros((colors, *pad), np.int64)
        self._base = np.zeros((colors, *pad), np.float32)
        self._inject_done = np.zeros((colors, *pad), np.int64)
        self._recv_count = np.zeros((colors, *pad), np.int32)
        self._recv_value = np.zeros((colors, *pad), np.float32)
        self._recv_last = np.full((colors, *pad), -1, np.int64)
        self._taken = [np.zeros(pad, bool) for _ in range(5)]
        self.copies = 0  # extra wavelets created by multicast (one per branch beyond the first)
        self.dropped = 0
        self.delivered = 0
        self.injected_total = 0
        self.remaining_total = 0
        self.cycle = 0
        self._idle_streak = 0
        self._compiled: list[Candidate] | None = None
        self._halo_ports: set[tuple[int, int]] = set()
        self._senders: list[tuple[np.ndarray, ...]] = []
        self._contended_taken: list[tuple[int, np.ndarray]] = []
        self._latest_start: list[int] = []

    # --- results ------------------------------------------------------------------------
    @property
    def recv_count(self) -> np.ndarray:
        """int32 [colors, rows, cols]: wavelets delivered to each PE per color."""
        return self._recv_count[:, 1:-1, 1:-1]

    @property
    def recv_value(self) -> np.ndarray:
        """float32 [colors, rows, cols]: value of the last wavelet delivered to each PE."""
        return self._recv_value[:, 1:-1, 1:-1]

    @property
    def recv_last(self) -> np.ndarray:
        """int64 [colors, rows, cols]: cycle of the last delivery (-1: none)."""
        return self._recv_last[:, 1:-1, 1:-1]

    @property
    def inject_done(self) -> np.ndarray:
        """int64 [colors, rows, cols]: first cycle after each sender's last injection."""
        self._sync_senders()
        return self._inject_done[:, 1:-1, 1:-1]

    @property
    def injected(self) -> np.ndarray:
        """int64 [colors, rows, cols]: wavelets each PE injected."""
        self._sync_senders()
        return self._injected[:, 1:-1, 1:-1]

    @property
    def sent(self) -> int:
        """Wavelets put on the fabric: injections plus multicast copies."""
        return self.injected_total + self.copies

    def in_flight(self) -> int:
        """Wavelets in FIFOs plus words not yet injected."""
        return self.sent - self.delivered - self.dropped + self.remaining_total

    def completion(self) -> int:
        """Cycle of the last delivery so far (0 when nothing was delivered)."""
        return int(max(self._recv_last.max(), 0))

    # --- configuration --------------------------------------------------------------------
    def route(
        self,
        color: int,
        rect: tuple[int, int, int, int],
        rx: Iterable[str] | str,
        tx: Iterable[str] | str,
    ) -> None:
        """On PEs of rect (row, col, rows, cols), wavelets of `color` arriving from `rx` leave
        through every port of `tx` ("N", "S", "E", "W", "RAMP" = to the PE)."""
        r, c, h, w = rect
        for p in _ports(rx):
            for o in _ports(tx):
                mask = self.routes.setdefault((color, p, o), np.zeros(self.halo.shape, bool))
                mask[1 + r : 1 + r + h, 1 + c : 1 + c + w] = True
        self._compiled = None

    def send(
        self,
        color: int,
        rect: tuple[int, int, int, int],
        words: int,
        start: int = 0,
        base: Any = 0.0,
    ) -> None:
        """PEs of rect inject `words` wavelets on `color` from cycle `start`; word k of a PE
        carries base + k (base: a number or [h, w])."""
        r, c, h, w = rect
        self._sync_senders()
        box = (color, slice(1 + r, 1 + r + h), slice(1 + c, 1 + c + w))
        self._remaining[box] += words
        self._start[box] = start
        self._base[box] = base
        self.remaining_total += words * h * w
        self._compiled = None

    def add_transfer(
        self, color: int, src: tuple[int, int], dst: tuple[int, int], words: int, start: int = 0
    ) -> None:
        """Route and send one XY flow (columns first, then rows) from src to dst."""
        cycle_flows.add_transfer(self, color, src, dst, words, start)

    def add_row_broadcast(
        self, color: int, rect: tuple[int, int, int, int], root: int, words: int, start: int = 0
    ) -> None:
        """Each row of rect: the PE at column `root` multicasts to the rest of its row."""
        cycle_flows.add_row_broadcast(self, color, rect, root, words, start)

    def _compile_senders(self) -> None:
        """Compact per-color sender state: flat index, words left, start, next value, and
        per-sender tallies; the [rows, cols] views are rebuilt from it on demand."""
        self._sync_senders()
        self._senders = []
        for color in range(self.colors):
            idx = np.flatnonzero(self._remaining[color] > 0)
            grids = [
                a[color].reshape(-1)[idx]
                for a in (
                    self._remaining,
                    self._start,
                    self._base,
                    self._injected,
                    self._inject_done,
                )
            ]
            rem, start, base, injected, done = (g.copy() for g in grids)
            self._senders.append(
                (idx, rem, start, base + injected.astype(np.float32), injected, done)
            )
        self._latest_start = [int(st.max()) if st.size else 0 for _, _, st, *_ in self._senders]

    def _sync_senders(self) -> None:
        """Write the compact sender state back into the [colors, rows, cols] grids."""
        for color, (idx, rem, _start, _nxt, injected, done) in enumerate(self._senders):
            self._remaining[color].reshape(-1)[idx] = rem
            self._injected[color].reshape(-1)[idx] = injected
            self._inject_done[color].reshape(-1)[idx] = done

    def _inject(self, t: int) -> None:
        """A sender puts its next word into its empty RAMP FIFO: at the start of cycle t with
        r = 0 (the word can leave this same cycle), at the end of cycle t with r = 1 (the word
        crosses the RAMP-out link in cycle t and can leave from t + 1). Either way one word per
        cycle streams out while the path is free."""
        for color, (idx, rem, start, nxt, injected, done) in enumerate(self._senders):
            if not idx.size:
                continue
            cnt_all = self.cnt[color][RAMP].reshape(-1)
            can = (rem > 0) & (cnt_all[idx] == 0)
            if t < self._latest_start[color]:
                can &= start <= t
            n = int(np.count_nonzero(can))
            if not n:
                continue
            at = idx if n == idx.size else idx[can]
            self.v0[color][RAMP].reshape(-1)[at] = nxt if n == idx.size else nxt[can]
            cnt_all[at] = 1
            step = can.view(np.uint8)
            rem -= step
            nxt += step
            injected += step
            done[can] = t + 1
            self.injected_total += n
            self.remaining_total -= n

    def step(self) -> None:
        """Advance one cycle."""
        if self._compiled is None:
            self._compiled = [Candidate(self, *cand) for cand in compile_routes(self)]
            self._contended_taken = sorted(
                {
                    id(self._taken[o.port]): self._taken[o.port]
                    for cand in self._compiled
                    for o in cand.outs
                    if o.shared is not None
                }.items()
            )
        t = self.cycle
        if self.ramp_latency:
            self._ramp_in.append([])
            for out, moved, val in self._ramp_in.pop(0):
                self._land(out, moved, val, t)
        if self.remaining_total and not self.ramp_latency:
            self._inject(t)
        cands = self._compiled
        k = t % len(cands) if cands else 0
        for _, taken in self._contended_taken:
            taken.fill(False)
        pushes, pops = [], []
        for cand in cands[k:] + cands[:k]:
            head = cand.fifo > 0
            if not np.count_nonzero(head):
                continue
            ok = head & cand.has if cand.stuck_possible else head
            for out in cand.outs:
                if out.port == RAMP:  # the PE always accepts; only arbitration can refuse
                    if out.shared is not None:
                        free = ~out.taken[out.shared]
                        ok[out.shared] &= free if out.full else free | out.not_mask[out.shared]
                    continue
                free = out.nb_cnt < 2
                if out.shared is not None:
                    free[out.shared] &= ~out.taken[out.shared]
                if not out.full:
                    free |= out.not_mask
                ok &= free
            gone = ok
            if cand.stuck_possible:  # a wavelet with no route for its color and input: dropped
                stuck = head & ~cand.has
                self.dropped += int(np.count_nonzero(stuck))
                gone = ok | stuck
            n_ok = int(np.count_nonzero(ok))
            if not n_ok and gone is ok:
                continue
            for out in cand.outs:  # pushes run before pops, so cand.v0 is still the head
                moved = ok if out.full else ok & out.mask
                if out.shared is not None:
                    out.taken[out.shared] |= moved[out.shared]
                pushes.append((out, moved, cand.v0))
            pops.append((cand, gone, n_ok))
        self._idle_streak = 0 if pops else self._idle_streak + 1
        pushed = sum(self._push(out, moved, val, t) for out, moved, val in pushes)
        for cand, gone, _ in pops:
            cand.fifo -= gone.view(np.uint8)
            np.copyto(cand.v0, cand.v1, where=gone)
        self.copies += pushed - sum(pop[2] for pop in pops)
        if self._halo_ports:
            self._drop_halo()
        if self.remaining_total and self.ramp_latency:
            self._inject(t)
        self.cycle += 1

    def _land(self, out: Out, moved: np.ndarray, val: np.ndarray, t: int) -> None:
        """Wavelets `moved` of a RAMP output reach their PE in cycle t."""
        out.recv_count += moved.view(np.uint8)
        np.copyto(out.recv_value, val, where=moved)
        np.copyto(out.recv_last, t, where=moved)
        self.delivered += int(np.count_nonzero(moved))

    def _push(self, out: Out, moved: np.ndarray, val: np.ndarray, t: int) -> int:
        n = int(np.count_nonzero(moved))
        if not n:
            return 0
        if out.port == RAMP:
            if self.ramp_latency:  # into the RAMP-in link; the PE gets it r cycles later
                self._ramp_in[-1].append((out, moved, val.copy()))
            else:
                self._land(out, moved, val, t)
            return n
        empty = moved & (
            out.nb_cnt == 0
        )  # each FIFO has one upstream link: nb_cnt <= 1 where moved
        np.copyto(out.nb_v0, val, where=empty)
        np.copyto(out.nb_v1, val, where=moved ^ empty)
        out.nb_cnt += moved.view(np.uint8)
        return n

    def _drop_halo(self) -> None:
        """Wavelets pushed into the halo have left the region: count them as dropped."""
        for color, port in self._halo_ports:
            cnt = self.cnt[color][port]
            lost = int(cnt[self.halo].sum())
            if lost:
                self.dropped += lost
                cnt[self.halo] = 0

    def run(self, max_cycles: int = 1_000_000) -> int:
        """Step until nothing is left to send or in flight; return the completion cycle (the
        cycle of the last delivery, 0 if none)."""
        while self.cycle < max_cycles and self.in_flight() > 0:
            self.step()
            if self._idle_streak > IDLE_LIMIT and self.remaining_total == 0:
                break  # deadlock: wavelets wait on each other and nothing can move
        return self.completion()
