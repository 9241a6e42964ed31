"""Replay SWF traces through the policies (fcfs, easy, sam, oned-easy) and compare them.

Usage: python benchmarks/policy_sim.py [TRACE] [--wafers N] [--wafer-rows R] [--wafer-cols C]
                                       [--pes-per-proc K] [--limit N] [--interarrival F]
       python benchmarks/policy_sim.py --matrix [--slice-jobs N] [--workers N]
                                       [--set FIELD=JSON ...] [--traces DIR]
                                       [--slices N] [--anchors FILE] [--only FIELD=VALUE ...]
                                       [--jitter SECONDS --seed N]
Each policy runs exactly as `sam sim TRACE ... --policy P -o json` would. One trace: one line
per policy, then one JSON line {"trace", "cluster", "fcfs": {...}, ...}. --matrix: every case
(both traces in traces/ x inter-arrival 1.0/0.7/0.5 x four slices x two PE mappings), one JSON line
per case, then the summary {"cases", "sam_beats_easy_all_figures", "worst_bsld_ratio_vs_easy",
"worst_util_delta_vs_easy", "worst_bsld_ratio_vs_oned", ...}. sam beats easy on a case when its
bounded slowdown is at most 0.8x easy's, its utilization at least easy's, and its p95 and max
wait at most easy's. A case whose easy bounded slowdown is below 1.25 cannot be won on slowdown
by any policy (it is at least 1): "bsld_goal_reachable" is false there, and the summary also
counts "sam_beats_easy_all_reachable_goals" (every figure, the slowdown goal only where it is
reachable) and "bsld_goal_unreachable". `--workers N` replays N cases at once (default: one
per CPU; the same output, in order); `--set FIELD=JSON` replays sam with a PolicyConfig field
changed (e.g. `--set suspend_factor=10`, or a priority weight: `--set weights.size=250`; easy
and oned-easy are never changed); `--only FIELD=VALUE` keeps the cases of that trace, slice,
interarrival or mapping (e.g. `--only mapping=1pe-16x16`); `--anchors FILE` takes easy's and
oned-easy's figures from an earlier `--matrix` output of the same cases (neither reads a
PolicyConfig change) and replays only sam, a third of the time, for sweeping sam's settings.
Fairness: Jain's index over users' mean bounded slowdown, bounded by easy's minus JAIN_SLACK
("jain_within_bound" per case and counted in the summary).
`--jitter SECONDS --seed N` moves every job's submit later by a whole number of seconds up to
SECONDS, drawn from N (the same for all three policies, so each case is still a fair match):
replays of one trace are chaotic, and a minute's jitter shows how much of a verdict is the
policy and how much the draw (a change is real when it holds over several seeds).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from sam_server.replay.cli import _auto_pes_per_proc, replay
from sam_server.replay.sim import ClusterSpec, simulate
from sam_server.replay.swf import TraceJob, read_swf, scale_interarrival
from sam_server.scheduling.model import PolicyConfig, PriorityWeights
from wse_sim.arch import WSE2

KEYS = ("utilization", "avg_wait_s", "avg_bounded_slowdown", "max_wait_s", "fairness_jain")
TRACES = Path(__file__).resolve().parents[1] / "traces"  # shipped with SAM
MATRIX_TRACES = {"lublin_256": 256, "NASA-iPSC-1993-3.1-cln": 128}
"""Trace name -> processors of the machine it was recorded on."""
INTERARRIVALS = (1.0, 0.7, 0.5)
BSLD_TARGET = 0.8
BSLD_FLOOR = 1.0
"""The least bounded slowdown any job can have (it starts at once)."""
JAIN_SLACK = 0.05
"""The fairness bound: sam's Jain index (over users' mean bounded slowdown) at least easy's
minus this much; it is reported beside the four figures, not counted in `beats_easy`."""


def _mappings(procs: int) -> dict[str, ClusterSpec]:
    """Two ways to put a `procs`-processor trace on a wafer: 1 PE per processor on a square
    wafer, and 6 PEs per processor on a 2:3 wafer (other rounding, other aspect)."""
    side = math.ceil(math.sqrt(procs))
    rows = math.ceil(math.sqrt(6 * procs * 2 / 3))
    cols = math.ceil(6 * procs / rows)
    return {
        f"1pe-{side}x{side}": ClusterSpec(1, side, side, 1),
        f"6pe-{rows}x{cols}": ClusterSpec(1, rows, cols, 6),
    }


def _run(
    jobs: list[TraceJob], spec: ClusterSpec, policy: str, changes: dict[str, Any] | None = None
) -> dict[str, Any]:
    t0 = time.perf_counter()
    if policy == "sam" and changes:
        result = simulate(jobs, spec, replace(PolicyConfig(), **changes), policy).as_dict()
    else:
        result = replay(jobs, spec, policy).as_dict()
    result["seconds"] = round(time.perf_counter() - t0, 1)
    return result


def _verdict(easy: dict[str, Any], sam: dict[str, Any], oned: dict[str, Any]) -> dict[str, Any]:
    """How sam compares with easy and with the 1-D bound on one case."""
    bsld_vs_easy = sam["avg_bounded_slowdown"] / easy["avg_bounded_slowdown"]
    util_delta = sam["utilization"] - easy["utilization"]
    waits_and_util = (
        util_delta >= 0
        and sam["p95_wait_s"] <= easy["p95_wait_s"]
        and sam["max_wait_s"] <= easy["max_wait_s"]
    )
    # bounded slowdown is at least 1 (a job that never waits), so 0.8x easy's is out of reach
    # for every policy when easy's own is below 1.25
    reachable = easy["avg_bounded_slowdown"] * BSLD_TARGET >= BSLD_FLOOR
    bsld_met = bsld_vs_easy <= BSLD_TARGET
    return {
        "beats_easy": bsld_met and waits_and_util,
        "bsld_goal_reachable": reachable,
        "beats_easy_reachable_goals": (bsld_met or not reachable) and waits_and_util,
        "bsld_ratio_vs_easy": round(bsld_vs_easy, 4),
        "util_delta_vs_easy": round(util_delta, 4),
        "p95_ratio_vs_easy": round(sam["p95_wait_s"] / max(easy["p95_wait_s"], 1.0), 4),
        "max_wait_ratio_vs_easy": round(sam["max_wait_s"] / max(easy["max_wait_s"], 1.0), 4),
        "bsld_ratio_vs_oned": round(sam["avg_bounded_slowdown"] / oned["avg_bounded_slowdown"], 4),
        "jain_delta_vs_easy": round(sam["fairness_jain"] - easy["fairness_jain"], 4),
        "jain_within_bound": sam["fairness_jain"] >= easy["fairness_jain"] - JAIN_SLACK,
    }


ANCHORS = ("easy", "oned-easy")
"""The policies a `--set` never changes, whose figures `--anchors` may reuse."""
CASE_KEYS = ("trace", "slice", "interarrival", "mapping")
JITTER_KEYS = ("jitter_s", "seed")
"""A jittered case's draw: part of its key, so anchors of another draw are never taken."""

_Todo = tuple[dict[str, Any], list[TraceJob], ClusterSpec, dict[str, Any]]


def _case(job: _Todo) -> dict[str, Any]:
    """One case of the matrix: the three policies (the anchors' figures when the case already
    holds them) and the verdict."""
    case, jobs, spec, changes = job
    case = dict(case)
    for policy in ("easy", "sam", "oned-easy"):  # (in this order in the output either way)
        figures = case.pop(policy, None)
        case[policy] = figures if figures is not None else _run(jobs, spec, policy, changes)
    case.update(_verdict(case["easy"], case["sam"], case["oned-easy"]))
    return case


def _case_key(case: dict[str, Any]) -> tuple[Any, ...]:
    return (*(case[k] for k in CASE_KEYS), *(case.get(k) for k in JITTER_KEYS))


def jitter(jobs: list[TraceJob], seconds: int, seed: int, salt: str) -> list[TraceJob]:
    """`jobs` with each submit moved later by 0 to `seconds` whole seconds, drawn from `seed`
    and `salt` (the case: its jobs get the same draw under every policy), in submit order;
    sizes, run times, limits and users unchanged. `seconds` 0: `jobs` as they are."""
    if seconds <= 0:
        return jobs
    draw = random.Random(f"{seed}:{salt}")
    moved = [replace(j, submit_s=j.submit_s + draw.randint(0, seconds)) for j in jobs]
    return sorted(moved, key=lambda j: (j.submit_s, j.id))


def read_anchors(path: Path) -> dict[tuple[Any, ...], dict[str, Any]]:
    """easy's and oned-easy's figures per case from an earlier `--matrix` output."""
    found: dict[tuple[Any, ...], dict[str, Any]] = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        row = json.loads(line) if line.strip() else {}
        if all(k in row for k in (*CASE_KEYS, *ANCHORS)):
            found[_case_key(row)] = {p: row[p] for p in ANCHORS}
        elif "cases" not in row and row:
            raise SystemExit(f"--anchors {path}: line {n} is neither a matrix case nor a summary")
    return found


def matrix(
    slice_jobs: int,
    slices: int,
    workers: int = 1,
    changes: dict[str, Any] | None = None,
    traces: Path = TRACES,
    anchors: dict[tuple[Any, ...], dict[str, Any]] | None = None,
    only: dict[str, set[str]] | None = None,
    jitter_s: int = 0,
    seed: int = 0,
) -> None:
    """Every case of the matrix (or those `only` keeps, see `_only`), one JSON line each, then
    the summary line. With `anchors` (`read_anchors`), easy and oned-easy are not replayed:
    every case must be there. `jitter_s` > 0: each case's submits moved by `jitter`."""
    todo: list[_Todo] = []
    drawn = dict(zip(JITTER_KEYS, (jitter_s, seed), strict=True)) if jitter_s > 0 else {}
    for name, procs in MATRIX_TRACES.items():
        path = next(traces.glob(f"{name}.swf*"))
        trace = read_swf(path, slice_jobs * slices)
        for k in range(slices):
            part = trace[k * slice_jobs : (k + 1) * slice_jobs]
            where = f"{k * slice_jobs}:{(k + 1) * slice_jobs}"
            for factor in INTERARRIVALS:
                jobs = scale_interarrival(part, factor)
                jobs = jitter(jobs, jitter_s, seed, f"{name}:{where}:{factor}")
                for mapping, spec in _mappings(procs).items():
                    case: dict[str, Any] = {
                        "trace": name,
                        "slice": where,
                        "interarrival": factor,
                        "mapping": mapping,
                        **drawn,
                    }
                    if only and any(str(case[k]) not in v for k, v in only.items()):
                        continue
                    if anchors is not None:
                        key = _case_key(case)
                        if key not in anchors:
                            raise SystemExit(
                                f"--anchors: no figures for {key}; run the same --matrix "
                                "(--slices, --slice-jobs, --jitter, --seed) without --anchors first"
                            )
                        case.update(anchors[key])
                    todo.append((case, jobs, spec, changes or {}))
    cases: list[dict[str, Any]] = []
    with ProcessPoolExecutor(workers) if workers > 1 else _Serial() as pool:
        for case in pool.map(_case, todo):
            print(json.dumps(case), flush=True)
            cases.append(case)
    print(json.dumps({**_summary(cases), **drawn}))


class _Serial:
    """`map` in this process (the default: one case at a time, no worker processes)."""

    def __enter__(self) -> _Serial:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def map(self, fn: Any, items: list[Any]) -> Any:
        return map(fn, items)


def _summary(cases: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "cases": len(cases),
        "sam_beats_easy_all_figures": sum(c["beats_easy"] for c in cases),
        "bsld_goal_unreachable": sum(not c["bsld_goal_reachable"] for c in cases),
        "sam_beats_easy_all_reachable_goals": sum(c["beats_easy_reachable_goals"] for c in cases),
        "worst_bsld_ratio_vs_easy": max(c["bsld_ratio_vs_easy"] for c in cases),
        "worst_util_delta_vs_easy": min(c["util_delta_vs_easy"] for c in cases),
        "worst_p95_ratio_vs_easy": max(c["p95_ratio_vs_easy"] for c in cases),
        "worst_max_wait_ratio_vs_easy": max(c["max_wait_ratio_vs_easy"] for c in cases),
        "worst_bsld_ratio_vs_oned": max(c["bsld_ratio_vs_oned"] for c in cases),
        "jain_within_bound": sum(c["jain_within_bound"] for c in cases),
        "worst_jain_delta_vs_easy": min(c["jain_delta_vs_easy"] for c in cases),
        "worst_jain_sam": round(min(c["sam"]["fairness_jain"] for c in cases), 4),
        "worst_jain_easy": round(min(c["easy"]["fairness_jain"] for c in cases), 4),
    }


def single(args: argparse.Namespace) -> None:
    """The policies on one trace and cluster."""
    jobs = scale_interarrival(read_swf(args.trace, args.limit), args.interarrival)
    spec = ClusterSpec(args.wafers, args.wafer_rows, args.wafer_cols, 1)
    k = args.pes_per_proc or _auto_pes_per_proc(max(j.procs for j in jobs), spec)
    spec = ClusterSpec(args.wafers, args.wafer_rows, args.wafer_cols, k)
    out: dict[str, object] = {
        "trace": args.trace,
        "jobs": len(jobs),
        "cluster": {"wafers": spec.wafers, "rows": spec.rows, "cols": spec.cols, "pes_per_proc": k},
    }
    for name in args.policies.split(","):
        result = _run(jobs, spec, name)
        shown = "  ".join(f"{key}={result[key]:.4g}" for key in KEYS)
        print(f"{name:9s} {shown}  ({result['seconds']:.0f} s)", flush=True)
        out[name] = result
    print(json.dumps(out))


def _changes(pairs: list[str]) -> dict[str, Any]:
    """`--set FIELD=JSON` pairs as PolicyConfig changes; an unknown field is an error. The
    priority weights are set one at a time (`weights.size=250`) or as an object
    (`weights={"size": 250}`); the weights not named keep their defaults."""
    known = set(PolicyConfig.__dataclass_fields__)
    weights = set(PriorityWeights.__dataclass_fields__)
    changes: dict[str, Any] = {}
    named: dict[str, Any] = {}
    for pair in pairs:
        field, sep, value = pair.partition("=")
        head, dot, weight = field.partition(".")
        if sep and dot and head == "weights" and weight in weights:
            named[weight] = json.loads(value)
        elif sep and field == "weights" and isinstance(obj := json.loads(value), dict):
            if not set(obj) <= weights:
                raise SystemExit(f"--set {pair!r}: the weights are {', '.join(sorted(weights))}")
            named.update(obj)
        elif not sep or field not in known or dot:
            raise SystemExit(
                f"--set {pair!r}: use FIELD=JSON with a PolicyConfig field, or weights.NAME=N "
                f"with NAME one of {', '.join(sorted(weights))}"
            )
        else:
            changes[field] = json.loads(value)
    if named:
        changes["weights"] = PriorityWeights(**named)
    return changes


def _only(pairs: list[str]) -> dict[str, set[str]]:
    """`--only FIELD=VALUE` pairs (FIELD one of CASE_KEYS) as {field: values}: a case is kept
    when each field named has one of its values (e.g. `--only mapping=1pe-16x16`)."""
    only: dict[str, set[str]] = {}
    for pair in pairs:
        field, sep, value = pair.partition("=")
        if not sep or field not in CASE_KEYS:
            raise SystemExit(
                f"--only {pair!r}: use FIELD=VALUE, FIELD one of {', '.join(CASE_KEYS)}"
            )
        only.setdefault(field, set()).add(value)
    return only


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "trace",
        nargs="?",
        default=str(TRACES / "lublin_256.swf"),
        help="an SWF trace (default: traces/lublin_256.swf)",
    )
    parser.add_argument("--wafers", type=int, default=1)
    parser.add_argument("--wafer-rows", type=int, default=WSE2.rows)
    parser.add_argument("--wafer-cols", type=int, default=WSE2.cols)
    parser.add_argument("--pes-per-proc", type=int, default=None)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--interarrival", type=float, default=1.0)
    parser.add_argument("--policies", default="fcfs,easy,sam,oned-easy")
    parser.add_argument("--matrix", action="store_true", help="run the whole matrix")
    parser.add_argument("--slice-jobs", type=int, default=1000, help="jobs per matrix slice")
    parser.add_argument("--slices", type=int, default=4, help="slices per trace")
    parser.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="matrix cases replayed at once (default: one per CPU; the output is the same)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=JSON",
        help="replay sam with this PolicyConfig field changed (repeatable)",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="--matrix: only the cases with this trace, slice, interarrival or mapping "
        "(repeatable: values of one field are alternatives, fields must all match)",
    )
    parser.add_argument("--traces", type=Path, default=TRACES, help="folder of the matrix's traces")
    parser.add_argument(
        "--anchors",
        type=Path,
        default=None,
        metavar="FILE",
        help="--matrix: easy's and oned-easy's figures from this earlier --matrix output "
        "(same cases); only sam is replayed",
    )
    parser.add_argument(
        "--jitter",
        type=int,
        default=0,
        metavar="SECONDS",
        help="--matrix: move each submit later by 0 to SECONDS whole seconds, drawn from --seed, "
        "for all three policies (default 0: the traces as recorded)",
    )
    parser.add_argument("--seed", type=int, default=0, help="the draw of --jitter")
    args = parser.parse_args()
    if args.matrix:
        anchors = read_anchors(args.anchors) if args.anchors else None
        changes, only = _changes(args.set), _only(args.only)
        matrix(
            args.slice_jobs,
            args.slices,
            args.workers,
            changes,
            args.traces,
            anchors,
            only,
            args.jitter,
            args.seed,
        )
    else:
        single(args)


if __name__ == "__main__":
    main()
