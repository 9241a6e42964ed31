"""Replay an SWF trace through the three policies (fcfs, easy, sam) and compare them.

Usage: python benchmarks/policy_sim.py [TRACE] [--wafers N] [--wafer-rows R] [--wafer-cols C]
                                       [--pes-per-proc K] [--limit N]
Each policy runs exactly as `sam sim TRACE ... --policy P -o json` would. Prints one line per
policy, then one JSON line {"trace", "cluster", "fcfs": {...}, "easy": {...}, "sam": {...}}.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from sam_server.scheduling.cli import POLICIES, _auto_pes_per_proc
from sam_server.scheduling.sim import ClusterSpec, simulate
from sam_server.scheduling.swf import read_swf

KEYS = ("utilization", "avg_wait_s", "avg_bounded_slowdown", "makespan_s", "fairness_jain")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    default_trace = Path(__file__).resolve().parents[2] / "shared" / "traces" / "lublin_256.swf"
    parser.add_argument(
        "trace",
        nargs="?",
        default=str(default_trace),
        help="an SWF trace (default: ../shared/traces/lublin_256.swf beside the checkout)",
    )
    parser.add_argument("--wafers", type=int, default=1)
    parser.add_argument("--wafer-rows", type=int, default=750)
    parser.add_argument("--wafer-cols", type=int, default=994)
    parser.add_argument("--pes-per-proc", type=int, default=None)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--policies", default="fcfs,easy,sam")
    args = parser.parse_args()
    jobs = read_swf(args.trace, args.limit)
    spec = ClusterSpec(args.wafers, args.wafer_rows, args.wafer_cols, 1)
    k = args.pes_per_proc or _auto_pes_per_proc(max(j.procs for j in jobs), spec)
    spec = ClusterSpec(args.wafers, args.wafer_rows, args.wafer_cols, k)
    out: dict[str, object] = {
        "trace": args.trace,
        "jobs": len(jobs),
        "cluster": {"wafers": spec.wafers, "rows": spec.rows, "cols": spec.cols, "pes_per_proc": k},
    }
    for name in args.policies.split(","):
        t0 = time.perf_counter()
        result = simulate(jobs, spec, POLICIES[name](), name).as_dict()
        shown = "  ".join(f"{key}={result[key]:.4g}" for key in KEYS)
        print(f"{name:5s} {shown}  ({time.perf_counter() - t0:.0f} s)", flush=True)
        out[name] = result
    print(json.dumps(out))


if __name__ == "__main__":
    main()
