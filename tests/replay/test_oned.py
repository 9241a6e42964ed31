"""The 1-D EASY baseline of `sam sim`, and inter-arrival scaling of a trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sam_server.replay.cli import sim
from sam_server.replay.oned import simulate_oned
from sam_server.replay.swf import TraceJob, scale_interarrival


def _job(job_id: int, submit: float, run: float, procs: int, limit: float | None = None):
    return TraceJob(job_id, submit, run, limit if limit is not None else run, procs, "u1")


def test_a_job_that_fits_beside_the_reservation_backfills() -> None:
    # 16 PEs. Job 1 holds 12 until 100; job 2 (8 PEs) waits for it, and will leave 8 spare;
    # job 3 (4 PEs, long) fits those spare PEs and starts at once; job 4 finds nothing free.
    trace = [_job(1, 0, 100, 12), _job(2, 1, 50, 8), _job(3, 2, 500, 4), _job(4, 3, 10, 4)]
    r = simulate_oned(trace, 1, 4, 4, 1)
    # waits: 0, 99 (job 1 ends), 0 (backfilled), 97 (starts beside job 2 at 100)
    assert r.jobs == 4 and r.unfinished == 0
    assert r.avg_wait_s == pytest.approx((0 + 99 + 0 + 97) / 4)
    assert r.max_wait_s == 99


def test_a_job_that_would_delay_the_reserved_head_does_not_backfill() -> None:
    # Job 2 (12 PEs) reserves for t=100 leaving 4 spare; job 3 (6 PEs, 500 s) fits the 6 free
    # PEs now but would still hold 2 of job 2's PEs at 100: it waits until job 2 ends at 150.
    trace = [_job(1, 0, 100, 10), _job(2, 1, 50, 12), _job(3, 2, 500, 6), _job(4, 3, 90, 4)]
    r = simulate_oned(trace, 1, 4, 4, 1)
    # waits: 0, 99, 148, 0 (job 4 ends by 93 < 100: it backfills)
    assert r.avg_wait_s == pytest.approx((0 + 99 + 148 + 0) / 4)
    assert r.max_wait_s == 148


def test_a_job_larger_than_a_wafer_is_rejected_as_in_the_2d_replay() -> None:
    trace = [_job(1, 0, 10, 17), _job(2, 0, 10, 16)]
    r = simulate_oned(trace, 2, 4, 4, 1)  # 32 PEs pooled, but no rectangle holds 17 PEs
    assert r.rejected == 1 and r.jobs == 1


def test_scale_interarrival_compresses_the_gaps_and_keeps_the_jobs() -> None:
    trace = [_job(1, 100, 5, 1), _job(2, 110, 5, 2), _job(3, 140, 5, 3)]
    half = scale_interarrival(trace, 0.5)
    assert [j.submit_s for j in half] == [100, 105, 120]
    assert [(j.run_s, j.procs) for j in half] == [(5, 1), (5, 2), (5, 3)]
    with pytest.raises(ValueError, match="> 0"):
        scale_interarrival(trace, 0.0)


def test_sam_sim_prints_the_oned_baseline(tmp_path: Path) -> None:
    lines = [
        " ".join(str(x) for x in [i, 10 * i, -1, 100, p, -1, -1, p, 100, -1, 1, 1, 1] + [-1] * 5)
        for i, p in enumerate([16, 8, 4, 4], start=1)
    ]
    path = tmp_path / "t.swf"
    path.write_text("\n".join(lines) + "\n")
    args = [str(path), "--wafer-rows", "4", "--wafer-cols", "4", "--pes-per-proc", "1"]
    out = {}
    for policy in ("oned-easy", "easy"):
        res = CliRunner().invoke(
            sim, [*args, "--policy", policy, "--interarrival", "0.5", "-o", "json"]
        )
        assert res.exit_code == 0, res.output
        out[policy] = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["oned-easy"]["policy"] == "oned-easy" and out["oned-easy"]["jobs"] == 4
    # one 4x4 wafer, whole-wafer and quarter jobs: geometry costs nothing, both agree
    assert out["oned-easy"]["avg_wait_s"] == out["easy"]["avg_wait_s"]
