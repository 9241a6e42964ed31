"""wse_sim: a vectorized simulator of a Cerebras-style wafer fabric, with regions that jobs share.

PUBLIC API (stable; other parts of SAM, e.g. wse_sim.runtime, rely on these exact names)
========================================================================================

Architecture (wse_sim.arch)
    get_arch(name: str, **overrides) -> Arch
        name in "wse2" | "WSE-2" | "wse3" | "WSE-3"; overrides replace fields (tests: rows=8, cols=8).
    Arch (frozen dataclass): name, rows, cols, sram_bytes, sram_reserved_bytes, sram_limit_bytes
        (property: bytes a job may use per PE), clock_hz, fp32_flops_per_cycle, fp16_flops_per_cycle
        (FLOPs per PE per cycle; FMAC = 2), hop_latency (cycles per fabric link, default 1, >= 1),
        ramp_latency (cycles per RAMP crossing PE -> router or router -> PE, default 1, >= 0),
        link_words_per_cycle, wavelet_bits, router_ports, routable_colors, io_channels_per_edge,
        max_memcpy_channels, host_channel_gbps, host_txn_overhead_s, fabric_rows, fabric_cols,
        sources (field -> tag), flops_per_cycle(dtype) -> float,
        path_latency(hops) -> 2 * ramp_latency + hops * hop_latency (PE to PE, hops >= 1).

Wafer and regions (wse_sim.fabric)
    Wafer(arch: Arch | str = "wse2", rows: int | None = None, cols: int | None = None,
          backend: str = "numpy")                      # rows/cols default to the arch's grid
        .allocate(owner: str, row: int, col: int, rows: int, cols: int) -> Region
              raises RegionError (overlap, out of bounds, duplicate owner)
        .release(owner: str) -> None
        .owner_map() -> np.ndarray int32 [rows, cols] (-1 free; .owner_ids maps name -> id)
        .owner_at(row, col) -> str | None;  .regions: dict[str, Region];  .free_pes: int
    Region: .owner, .row, .col, .rows, .cols, .arch, .xp (Backend)
        .clock        int64 [rows, cols]  per-PE simulated cycles
        .busy, .words_sent, .words_received, .sram_used, .sram_hwm   [rows, cols] counters
        .idle         [rows, cols] = cycles - busy;   .utilization() -> float64 [rows, cols]
        .link_busy    int64 [rows, cols, 5] first free entry cycle of the N, S, E, W out-links,
                      and the first cycle a new wavelet may arrive in the PE over its RAMP
        .cycles -> int (max clock, elapsed cycles);  .seconds -> float (cycles / clock_hz)
        .wavelets_sent, .wavelets_delivered, .wavelets_dropped, .faults  (ints)
        .sram_alloc(name: str, bytes_per_pe: int | array[rows, cols], rect=None) -> None
              raises SramCapacityError(owner, pe=(row, col), needed, limit, name)
        .sram_free(name: str) -> None
        .alloc_array(name, per_pe_shape, dtype="float32") -> array [rows, cols, *per_pe_shape]
        .counters() -> dict of numpy [rows, cols] arrays
    Rect = (row, col, rows, cols), always REGION-RELATIVE; None means the whole region.

Block engine (wse_sim.block; also importable from wse_sim). Every op advances per-PE clocks,
counters and link reservations of ONE region and returns the cycles it took (int). Timing: a
wavelet from a PE to a PE m >= 1 fabric hops away crosses the sender's RAMP into its router,
m fabric links and the RAMP into the receiver, so its latency is d = arch.path_latency(m) =
2 * ramp_latency + m * hop_latency: d = m + 2, the links crossed, with the default constants
(ramp_latency=0 gives the older free-RAMP model, d = m). A flow starting at T0 delivers word k
at T0 + k + d, so K words end at T0 + d + K - 1; each link and RAMP carries 1 wavelet per cycle.
One word corner to corner on a full WSE-2 (750 x 994) takes 749 + 993 + 2 = 1,744 cycles.
    compute(region, rect, flops_per_pe, dtype="float32") -> int
        flops_per_pe: number or array [h, w]; cycles = ceil(flops / arch.flops_per_cycle(dtype)).
    transfer(region, src_rect, dst_rect, words) -> int
        Same shapes: PE (i, j) of src sends `words` to PE (i, j) of dst over m = |dr| + |dc|
        hops (XY routing): d + K - 1 cycles when links are free, d = path_latency(m); a PE's
        transfer to itself (m = 0) is a local copy of K cycles. dst_rect may lie partly or
        wholly outside the region: those words are dropped and counted (region.faults,
        region.wavelets_dropped); nothing outside the region is touched. Different shapes:
        a redistribution costed by distance and the lanes between the rectangles.
    shift(region, rect, data, dr, dc) -> (array [h, w, ...], int)
        Data move inside `rect`: out[a, b] = data[a - dr, b - dc] (zero where that is outside).
    broadcast_row(region, rect, words, root=0) / broadcast_col(region, rect, words, root=0) -> int
        root = column (row) index inside rect; path_latency(L) + K - 1 cycles (K + L + 1 with
        the default constants, K + L - 1 with free RAMPs) where L = hops to the farthest PE.
    reduce_row(region, rect, words, root=0, algorithm="chain" | "tree") / reduce_col(...) -> int
        chain: every stage passes through a PE (RAMP in, add, RAMP out): L * path_latency(1)
        + K - 1 from idle; tree: sum over levels l of path_latency(2^l) + K - 1.
    allreduce(region, rect, words, algorithm="chain") -> int   (reduce rows, reduce column 0,
        broadcast column 0, broadcast rows; root PE is the rect's top-left)
    host_to_region(region, words, rect=None) / region_to_host(region, words, rect=None) -> int
        words = total 32-bit words; edge I/O channels, 7 Gb/s each, 200 us per transaction.
    barrier(region, rect=None) -> int   all clocks of rect -> max + cost, cost = a one-word chain
        allreduce from equal clocks: per side of n > 1 PEs, (n-1) * path_latency(1)
        + path_latency(n-1); 2*(h-1) + 2*(w-1) with free RAMPs.
    run_together(wafer, programs: dict[owner, Callable[[Region], Any]]) -> dict[owner, Any]
        advance several regions of one wafer in one call (each job's step on its own region).

Reports (wse_sim.report)
    utilization_png(region_or_wafer, path) -> path;  sram_png(region_or_wafer, path) -> path
    region_summary(region) -> dict (cycles, seconds, utilization_mean, sram_hwm_max_bytes,
        per-PE arrays downsampled to at most 64 x 64 as nested lists, wavelet counts, faults)
    utilization_grid(region_or_wafer) / sram_grid(...) -> np.ndarray (the same data as arrays)

Data-carrying collectives (wse_sim.dataops): broadcast_row_data, broadcast_col_data (return a
    read-only broadcast view), reduce_row_data, reduce_col_data, allreduce_data
    (region, rect, data [h, w, ...], ...) -> (data, cycles).

Validation engines
    wse_sim.cycle.CycleFabric(rows, cols, colors=4, arch=None)   (<= 256 x 256, else
        CycleEngineLimitError; arch defaults to WSE-2's constants: the RAMP in and out are real
        pipeline stages of ramp_latency 0 or 1; hop_latency != 1 or ramp_latency > 1 raise
        CycleEngineLimitError, the block engine models them)
        .route(color, rect, rx, tx)  rx/tx port names "N" "S" "E" "W" "RAMP"
        .send(color, rect, words, start=0, base=0.0)   word k carries base + k
        .add_transfer(color, src, dst, words), .add_row_broadcast(color, rect, root, words)
        .step(), .run(max_cycles) -> completion cycle; .recv_count/.recv_value/.recv_last
        [colors, rows, cols]; .sent == .delivered + .dropped once drained; .inject_done.
    wse_sim.reference.NaiveRegion: a deliberately naive per-PE Python model of the same semantics.
    wse_sim.kernels: gemv(region, a, x), summa(region, a, b, sync=True), stencil7(region, u,
        sweeps), game_of_life(region, board, generations), allreduce_kernel(region, values)
        -> KernelResult(value, cycles); each has an analytic *_cycles formula (summa: sync=True;
        allreduce_cycles(grid, k, arch=None) takes the arch, WSE-2 by default), RAMPs included.

Backends: Wafer(..., backend="numpy" | "torch"); see wse_sim.backend.Backend.
"""

from __future__ import annotations

from sam_domain.geometry import Rect
from wse_sim.arch import WSE2, WSE3, Arch, get_arch
from wse_sim.backend import Backend, get_backend
from wse_sim.block import (
    allreduce,
    barrier,
    broadcast_col,
    broadcast_row,
    compute,
    host_to_region,
    reduce_col,
    reduce_row,
    region_to_host,
    run_together,
    shift,
    transfer,
)
from wse_sim.errors import (
    CycleEngineLimitError,
    RectError,
    RegionError,
    SramCapacityError,
    UnknownArchError,
    UnknownBufferError,
    WseSimError,
)
from wse_sim.fabric import Region, Wafer

__all__ = [
    "WSE2",
    "WSE3",
    "Arch",
    "Backend",
    "CycleEngineLimitError",
    "Rect",
    "RectError",
    "Region",
    "RegionError",
    "SramCapacityError",
    "UnknownArchError",
    "UnknownBufferError",
    "Wafer",
    "WseSimError",
    "allreduce",
    "barrier",
    "broadcast_col",
    "broadcast_row",
    "compute",
    "get_arch",
    "get_backend",
    "host_to_region",
    "reduce_col",
    "reduce_row",
    "region_to_host",
    "run_together",
    "shift",
    "transfer",
]
