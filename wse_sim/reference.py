"""A deliberately naive per-PE Python model of the block engine's operation semantics.

Plain lists and loops, one PE and one wavelet at a time, written from the timing rules in
wse_sim.block's docstring rather than from the vectorized code. On 2x2 to 8x8 regions the
vectorized engine must match it exactly, data and cycles (tests/wse_sim). Never use it for work.

Latencies come from the arch: r = ramp_latency per RAMP crossing (PE -> router, router -> PE)
and h = hop_latency per fabric link, so a wavelet m >= 1 hops away arrives 2 r + m h cycles
after its sender issued it, and enters its path's n-th fabric link r + n h cycles after that.
"""

from __future__ import annotations

import math

from wse_sim.arch import Arch

N, S, E, W, RAMP = 0, 1, 2, 3, 4
STEP = {N: (-1, 0), S: (1, 0), E: (0, 1), W: (0, -1)}


class NaiveRegion:
    """Per-PE state in nested lists: clock[i][j], busy, sent, received, links[i][j][port]."""

    def __init__(self, rows: int, cols: int, arch: Arch) -> None:
        self.rows, self.cols, self.arch = rows, cols, arch
        self.ramp, self.hop = arch.ramp_latency, arch.hop_latency
        self.clock = [[0] * cols for _ in range(rows)]
        self.busy = [[0] * cols for _ in range(rows)]
        self.sent = [[0] * cols for _ in range(rows)]
        self.received = [[0] * cols for _ in range(rows)]
        self.links = [[[0] * 5 for _ in range(cols)] for _ in range(rows)]
        self.wavelets_sent = self.wavelets_delivered = self.wavelets_dropped = self.faults = 0

    def inside(self, i: int, j: int) -> bool:
        return 0 <= i < self.rows and 0 <= j < self.cols

    def cells(self, rect: tuple[int, int, int, int]) -> list[tuple[int, int]]:
        r, c, h, w = rect
        return [(i, j) for i in range(r, r + h) for j in range(c, c + w)]

    # --- operations ----------------------------------------------------------------------
    def compute(
        self, rect: tuple[int, int, int, int], flops: float, dtype: str = "float32"
    ) -> None:
        cycles = math.ceil(flops / self.arch.flops_per_cycle(dtype))
        for i, j in self.cells(rect):
            self.clock[i][j] += cycles
            self.busy[i][j] += cycles

    def path(self, i: int, j: int, dr: int, dc: int) -> list[tuple[int, int, int]]:
        """(row, col, out-port) of every hop, columns first; stops where the path leaves."""
        hops = []
        while dc != 0:
            port = E if dc > 0 else W
            hops.append((i, j, port))
            j, dc = j + STEP[port][1], dc - STEP[port][1]
        while dr != 0:
            port = S if dr > 0 else N
            hops.append((i, j, port))
            i, dr = i + STEP[port][0], dr - STEP[port][0]
        return hops

    def latency(self, hops: int) -> int:
        """Cycles from a PE issuing a wavelet to it being in the PE `hops` >= 1 links away."""
        return self.ramp + hops * self.hop + self.ramp

    def transfer(self, src: tuple[int, int, int, int], dr: int, dc: int, k: int) -> None:
        m = abs(dr) + abs(dc)
        if k <= 0:
            return
        if m == 0:  # a copy inside the PE: no router, no RAMP
            for i, j in self.cells(src):
                self.clock[i][j] += k
                self.busy[i][j] += k
            return
        d = self.latency(m)
        _, _, h, w = src
        share = max(min(abs(dc), w), min(abs(dr), h))
        plans = []
        for i, j in self.cells(src):
            hops = [
                (a, b, p, n)
                for n, (a, b, p) in enumerate(self.path(i, j, dr, dc))
                if self.inside(a, b)
            ]
            start = self.clock[i][j]
            for a, b, p, n in hops:  # the n-th link is entered r + n h after the start
                start = max(start, self.links[a][b][p] - (self.ramp + n * self.hop))
            ti, tj = i + dr, j + dc
            if self.inside(ti, tj):
                start = max(start, self.links[ti][tj][RAMP] - d)
            plans.append((i, j, start, hops))
        new_clock = [row[:] for row in self.clock]
        for i, j, start, hops in plans:
            for a, b, p, n in hops:
                enter = start + self.ramp + n * self.hop
                self.links[a][b][p] = max(self.links[a][b][p], enter + share * k)
            new_clock[i][j] = max(new_clock[i][j], start + share * k)
            self.busy[i][j] += k
            self.sent[i][j] += k
            self.wavelets_sent += k
            ti, tj = i + dr, j + dc
            if self.inside(ti, tj):
                last = start + d + share * k - 1
                self.links[ti][tj][RAMP] = max(self.links[ti][tj][RAMP], last + 1)
                new_clock[ti][tj] = max(new_clock[ti][tj], last)
                self.received[ti][tj] += k
                self.wavelets_delivered += k
            else:
                self.wavelets_dropped += k
                self.faults += 1
        self.clock = new_clock

    def broadcast_row(self, rect: tuple[int, int, int, int], k: int, root: int) -> None:
        r, c, h, w = rect
        if w == 1 or k <= 0:
            return
        for i in range(r, r + h):
            rj = c + root
            start = self.clock[i][rj]
            for j in range(c, c + w):
                dist = abs(j - rj)
                if dist:
                    start = max(start, self.links[i][j][RAMP] - self.latency(dist))
                if rj <= j < c + w - 1:
                    start = max(start, self.links[i][j][E] - (self.ramp + (j - rj) * self.hop))
                if c < j <= rj:
                    start = max(start, self.links[i][j][W] - (self.ramp + (rj - j) * self.hop))
            for j in range(c, c + w):
                dist = abs(j - rj)
                if rj <= j < c + w - 1:
                    enter = start + self.ramp + (j - rj) * self.hop
                    self.links[i][j][E] = max(self.links[i][j][E], enter + k)
                if c < j <= rj:
                    enter = start + self.ramp + (rj - j) * self.hop
                    self.links[i][j][W] = max(self.links[i][j][W], enter + k)
                if dist:
                    last = start + self.latency(dist) + k - 1
                    self.links[i][j][RAMP] = max(self.links[i][j][RAMP], last + 1)
                    self.clock[i][j] = max(self.clock[i][j], last)
                    self.received[i][j] += k
                    self.wavelets_sent += k
                    self.wavelets_delivered += k
            self.clock[i][rj] = max(self.clock[i][rj], start + k)
            self.busy[i][rj] += k
            self.sent[i][rj] += k

    def reduce_row_chain(self, rect: tuple[int, int, int, int], k: int, root: int) -> None:
        r, c, h, w = rect
        if w == 1 or k <= 0:
            return
        for i in range(r, r + h):
            rj = c + root
            firsts = []
            for cols, toward in (
                (list(range(rj + 1, c + w)), W),
                (list(range(rj - 1, c - 1, -1)), E),
            ):
                if not cols:
                    continue
                t_next = None
                times = {}
                for j in reversed(cols):  # farthest PE first; each stage is a one-hop move
                    ready = max(self.clock[i][j], self.links[i][j][toward] - self.ramp)
                    t = ready if t_next is None else max(ready, t_next + self.latency(1))
                    times[j], t_next = t, t
                for j, t in times.items():
                    if j != cols[-1]:
                        self.received[i][j] += k
                    self.links[i][j][toward] = t + self.ramp + k
                    self.clock[i][j] = t + k
                    self.busy[i][j] += k
                    self.sent[i][j] += k
                    self.wavelets_sent += k
                    self.wavelets_delivered += k
                firsts.append(times[cols[0]] + self.latency(1))
            end = max(
                max(min(firsts), self.links[i][rj][RAMP]) + len(firsts) * k - 1, self.clock[i][rj]
            )
            end = max(end, max(firsts) + k - 1)
            self.links[i][rj][RAMP] = end + 1
            self.clock[i][rj] = end
            self.busy[i][rj] += k * len(firsts)
            self.received[i][rj] += k * len(firsts)

    def transpose(self) -> NaiveRegion:
        """A copy with rows and columns swapped (N<->W, S<->E), to run column collectives."""
        t = NaiveRegion(self.cols, self.rows, self.arch)
        swap = {N: W, S: E, E: S, W: N, RAMP: RAMP}
        for i in range(self.rows):
            for j in range(self.cols):
                t.clock[j][i], t.busy[j][i] = self.clock[i][j], self.busy[i][j]
                t.sent[j][i], t.received[j][i] = self.sent[i][j], self.received[i][j]
                for p in range(5):
                    t.links[j][i][swap[p]] = self.links[i][j][p]
        t.wavelets_sent, t.wavelets_delivered = self.wavelets_sent, self.wavelets_delivered
        t.wavelets_dropped, t.faults = self.wavelets_dropped, self.faults
        return t

    def column_op(self, op: str, rect: tuple[int, int, int, int], k: int, root: int) -> None:
        """Run a row collective on the transposed region and copy the state back."""
        r, c, h, w = rect
        t = self.transpose()
        getattr(t, op)((c, r, w, h), k, root)
        self.__dict__.update(t.transpose().__dict__)

    def allreduce(self, rect: tuple[int, int, int, int], k: int) -> None:
        r, c, h, w = rect
        self.reduce_row_chain(rect, k, 0)
        self.column_op("reduce_row_chain", (r, c, h, 1), k, 0)
        self.column_op("broadcast_row", (r, c, h, 1), k, 0)
        self.broadcast_row(rect, k, 0)

    def barrier(self, rect: tuple[int, int, int, int]) -> None:
        """A one-word chain reduce to the corner and a broadcast back, along each long side."""
        r, c, h, w = rect
        top = max(self.clock[i][j] for i, j in self.cells(rect))
        cost = 0
        for n in (h, w):
            if n > 1:
                cost += (n - 1) * self.latency(1) + self.latency(n - 1)
        for i, j in self.cells(rect):
            self.clock[i][j] = top + cost

    def state(self) -> dict[str, object]:
        """Everything the vectorized engine is compared on."""
        return {
            "clock": self.clock,
            "busy": self.busy,
            "sent": self.sent,
            "received": self.received,
            "links": self.links,
            "wavelets": (
                self.wavelets_sent,
                self.wavelets_delivered,
                self.wavelets_dropped,
                self.faults,
            ),
        }


def naive_shift(data: list[list[list[float]]], dr: int, dc: int) -> list[list[list[float]]]:
    """out[a][b] = data[a - dr][b - dc], zeros where that is outside; data is [h][w][K] lists."""
    h, w, k = len(data), len(data[0]), len(data[0][0])
    out = [[[0.0] * k for _ in range(w)] for _ in range(h)]
    for a in range(h):
        for b in range(w):
            sa, sb = a - dr, b - dc
            if 0 <= sa < h and 0 <= sb < w:
                out[a][b] = list(data[sa][sb])
    return out


def naive_allreduce(data: list[list[list[float]]]) -> list[list[list[float]]]:
    """Every PE gets the elementwise sum over all PEs, added in row-major PE order."""
    h, w, k = len(data), len(data[0]), len(data[0][0])
    total = [0.0] * k
    for a in range(h):
        for b in range(w):
            for x in range(k):
                total[x] += data[a][b][x]
    return [[list(total) for _ in range(w)] for _ in range(h)]


def naive_reduce_tree_cycles(clocks: list[int], k: int, root: int, arch: Arch) -> int:
    """Root's clock after a binary-tree reduction of one row whose PEs start at `clocks`."""
    clocks = list(clocks)
    ramp, hop = arch.ramp_latency, arch.hop_latency
    for side in (list(range(root, len(clocks))), list(range(root, -1, -1))):
        span = 1
        while span < len(side):
            for q in range(span, len(side), 2 * span):
                sender, receiver = side[q], side[q - span]
                arrive = clocks[sender] + ramp + span * hop + ramp + k - 1
                clocks[sender] += k
                clocks[receiver] = max(clocks[receiver], arrive)
            span *= 2
    return clocks[root]
