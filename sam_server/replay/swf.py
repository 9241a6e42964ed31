"""Reading Standard Workload Format traces (Parallel Workloads Archive), plain or gzip'd.

One job a line, 18 whitespace-separated fields; ';' starts a header comment; -1 means unknown.
Fields used: 1 job number, 2 submit time, 4 run time, 5 allocated processors, 8 requested
processors, 9 requested time, 12 user id.
"""

from __future__ import annotations

import gzip
import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path


class TraceFormatError(ValueError):
    """The trace is not in Standard Workload Format; check the file (18 fields a line)."""


@dataclass(frozen=True)
class TraceJob:
    """One job of a trace: run time is the real duration, time limit the requested time."""

    id: int
    submit_s: float
    run_s: float
    time_limit_s: float
    procs: int
    user: str


def _open_text(path: Path) -> Iterator[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        yield from f


def _parse_line(line: str, lineno: int) -> TraceJob | None:
    fields = line.split()
    if len(fields) < 12:
        raise TraceFormatError(f"line {lineno}: {len(fields)} fields, SWF needs 18")
    try:
        job_id, submit, run = int(fields[0]), float(fields[1]), float(fields[3])
        alloc, req_procs, req_time = int(fields[4]), int(fields[7]), float(fields[8])
        user = int(fields[11])
    except ValueError as exc:
        raise TraceFormatError(f"line {lineno}: {exc}") from exc
    procs = alloc if alloc > 0 else req_procs
    if run < 0 or procs <= 0 or submit < 0:
        return None  # unknown run time or size: the job cannot be replayed
    limit = req_time if req_time > 0 else run
    return TraceJob(job_id, submit, run, max(1.0, limit), procs, f"user{user}")


def read_swf(path: str | Path, limit: int | None = None) -> list[TraceJob]:
    """The replayable jobs of an SWF trace (.swf or .swf.gz), in submit order, at most `limit`.

    Jobs with an unknown run time or processor count are skipped. Raises TraceFormatError.
    """
    jobs: list[TraceJob] = []
    for lineno, line in enumerate(_open_text(Path(path)), start=1):
        text = line.strip()
        if not text or text.startswith(";"):
            continue
        job = _parse_line(text, lineno)
        if job is not None:
            jobs.append(job)
        if limit is not None and len(jobs) >= limit:
            break
    jobs.sort(key=lambda j: (j.submit_s, j.id))
    return jobs


def scale_interarrival(jobs: list[TraceJob], factor: float) -> list[TraceJob]:
    """The trace with every gap between submits times `factor` (0.5 = twice the load).

    The first submit stays where it is; run times, sizes and users do not change.
    """
    if factor <= 0:
        raise ValueError(f"the inter-arrival factor must be > 0, got {factor}")
    if factor == 1.0 or not jobs:
        return list(jobs)
    first = jobs[0].submit_s
    return [replace(j, submit_s=first + (j.submit_s - first) * factor) for j in jobs]


@lru_cache(maxsize=65536)
def shape_for_pes(
    pes: int, wafer_rows: int, wafer_cols: int, max_aspect: float = 4.0
) -> tuple[int, int] | None:
    """The region shape a compiler would pick for `pes` PEs: (rows, cols) or None if too big.

    The smallest rectangle of at least `pes` PEs that fits the wafer with an aspect ratio of at
    most `max_aspect` (relaxed if none exists), then the squarest, then the wider one. Powers of
    two get exact, buddy-like shapes (128 -> 8x16, 64 -> 8x8).
    """
    if pes > wafer_rows * wafer_cols:
        return None
    best: tuple[tuple[float, ...], tuple[int, int]] | None = None
    for rows in range(1, wafer_rows + 1):
        cols = math.ceil(pes / rows)
        if cols > wafer_cols:
            continue
        if cols < 1:
            break
        aspect = max(rows, cols) / min(rows, cols)
        score = (aspect > max_aspect, rows * cols, aspect, rows > cols)
        if best is None or score < best[0]:
            best = (score, (rows, cols))
        if cols == 1:
            break
    return None if best is None else best[1]
