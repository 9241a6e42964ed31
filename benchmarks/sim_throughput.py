"""Simulated PE-cycles per second of wse_sim's block engine (SUMMA on 256 x 256 PEs) and cycle
engine (128 x 128), next to this machine's measured memory bandwidth (a numpy copy).

"Fraction of the limit": a simulator that touched 16 bytes of state per simulated PE-cycle
(the anchors' estimate for a dense per-cycle engine) could reach at most copy_bandwidth / 16
PE-cycles/s; the fraction is the measured rate over that bound. The block engine can exceed 1
because it charges K cycles per array operation instead of touching every PE every cycle.
Run: python benchmarks/sim_throughput.py [--quick]. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one thread, as in the anchors' table b.2
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import wse_sim as ws  # noqa: E402
from wse_sim.cycle import CycleFabric  # noqa: E402
from wse_sim.kernels import summa  # noqa: E402

BYTES_PER_PE_CYCLE = 16
TILE = 8  # each PE holds 8 x 8 fp32 tiles of A, B and C: 256 B each


def copy_bandwidth_gb_s(megabytes: int = 128, repeats: int = 5) -> float:
    """Best of `repeats` numpy copies; counts the bytes read plus the bytes written."""
    src = np.ones(megabytes * 2**20 // 8)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    return 2 * src.nbytes / best / 1e9


def block_rate(pes: int, tile: int) -> tuple[float, float, int, float]:
    """SUMMA (data-flow timing, no barriers) of (pes * tile)^2 matrices on pes x pes PEs:
    (PE-cycles per wall second, per CPU second, simulated cycles, wall seconds)."""
    wafer = ws.Wafer("wse2")
    region = wafer.allocate("bench", 100, 200, pes, pes)
    rng = np.random.default_rng(0)
    n = pes * tile
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    t0, c0 = time.perf_counter(), time.process_time()
    result = summa(region, a, b, sync=False)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    work = pes * pes * result.cycles
    return work / seconds, work / cpu, result.cycles, seconds


def cycle_rate(side: int, budget_s: float) -> tuple[float, float, int, float]:
    """A row broadcast over every row plus a corner-to-corner flow, stepped for budget_s."""
    fabric = CycleFabric(side, side)
    fabric.add_row_broadcast(0, (0, 0, side, side), 0, 100_000)
    fabric.add_transfer(1, (0, 0), (side - 1, side - 1), 100_000)
    for _ in range(10):  # compile routes and warm up outside the timed part
        fabric.step()
    t0, c0, steps = time.perf_counter(), time.process_time(), 0
    while time.perf_counter() - t0 < budget_s:
        for _ in range(50):
            fabric.step()
        steps += 50
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return side * side * steps / seconds, side * side * steps / cpu, steps, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="smaller runs (64 x 64 SUMMA, 1 s cycle engine)"
    )
    args = parser.parse_args()
    bandwidth = copy_bandwidth_gb_s()
    limit = bandwidth * 1e9 / BYTES_PER_PE_CYCLE
    side = 64 if args.quick else 256
    block, block_cpu, block_cycles, block_s = block_rate(side, TILE)
    cyc, cyc_cpu, cyc_steps, cyc_s = cycle_rate(128, 1.0 if args.quick else 3.0)
    print(
        f"memory bandwidth (numpy copy): {bandwidth:.1f} GB/s -> limit {limit:.3g} PE-cycles/s at {BYTES_PER_PE_CYCLE} B/PE-cycle"
    )
    print(
        f"block engine, SUMMA {side}x{side} PEs: {block:.3g} PE-cycles/s wall, {block_cpu:.3g} per CPU second "
        f"({block_cycles} cycles in {block_s:.2f} s), {block / limit:.2f} of the limit"
    )
    print(
        f"cycle engine, 128x128 PEs: {cyc:.3g} PE-cycles/s wall, {cyc_cpu:.3g} per CPU second "
        f"({cyc_steps} cycles in {cyc_s:.2f} s), {cyc / limit:.3f} of the limit"
    )
    print("(wall rates suffer when other processes share the cores; CPU-second rates do not)")
    print(
        json.dumps(
            {
                "block_pe_cycles_per_s": round(block),
                "cycle_pe_cycles_per_s": round(cyc),
                "copy_bandwidth_gb_s": round(bandwidth, 2),
                "block_pe_cycles_per_cpu_s": round(block_cpu),
                "cycle_pe_cycles_per_cpu_s": round(cyc_cpu),
                "limit_pe_cycles_per_s": round(limit),
                "block_fraction_of_limit": round(block / limit, 3),
                "cycle_fraction_of_limit": round(cyc / limit, 4),
                "block_simulated_cycles": block_cycles,
                "quick": args.quick,
            }
        )
    )


if __name__ == "__main__":
    main()
