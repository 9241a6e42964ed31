"""`sam sim`: trace reading, the replay, its metrics, and no starvation of large jobs."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sam_server.replay.cli import POLICIES, sim
from sam_server.replay.metrics import bounded_slowdown, jain_index, percentile
from sam_server.replay.sim import ClusterSpec, simulate
from sam_server.replay.swf import TraceJob, read_swf, shape_for_pes
from sam_server.scheduling import PolicyConfig, easy_config

TRACES = Path(__file__).resolve().parents[2] / "traces"  # the traces shipped with SAM


LUBLIN = TRACES / "lublin_256.swf"
FIELDS = (
    "policy",
    "jobs",
    "makespan_s",
    "utilization",
    "avg_wait_s",
    "p95_wait_s",
    "max_wait_s",
    "avg_bounded_slowdown",
    "fairness_jain",
)


def _swf_line(job_id: int, submit: int, run: int, procs: int, req: int = -1, user: int = 1) -> str:
    f = [job_id, submit, -1, run, procs, -1, -1, procs, req, -1, 1, user, 1, -1, 0, -1, -1, -1]
    return " ".join(str(x) for x in f)


@pytest.fixture()
def small_trace(tmp_path: Path) -> Path:
    lines = [
        "; a tiny trace",
        _swf_line(1, 0, 100, 16, 200, 1),
        _swf_line(2, 0, 50, 8, -1, 2),
        _swf_line(3, 10, -1, 4),
        _swf_line(4, 20, 10, 4, 30, 3),
        _swf_line(5, 20, 5, 999),
    ]
    path = tmp_path / "tiny.swf"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_read_swf_uses_requested_time_as_limit_and_skips_unknown_runs(small_trace: Path) -> None:
    jobs = read_swf(small_trace)
    assert [j.id for j in jobs] == [1, 2, 4, 5]
    assert (jobs[0].time_limit_s, jobs[1].time_limit_s) == (200.0, 50.0)
    assert jobs[0].user != jobs[1].user
    assert len(read_swf(small_trace, limit=2)) == 2


@pytest.mark.parametrize("gz", [False, True])
def test_sim_prints_the_contract_fields_as_json(
    small_trace: Path, tmp_path: Path, gz: bool
) -> None:
    path = small_trace
    if gz:
        path = tmp_path / "tiny.swf.gz"
        path.write_bytes(gzip.compress(small_trace.read_bytes()))
    args = [
        str(path),
        "--wafers",
        "1",
        "--wafer-rows",
        "6",
        "--wafer-cols",
        "6",
        "--pes-per-proc",
        "1",
        "--policy",
        "easy",
        "-o",
        "json",
    ]
    result = CliRunner().invoke(sim, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(FIELDS) <= set(out)
    assert out["policy"] == "easy"
    assert out["jobs"] == 3 and out["rejected"] == 1  # 999 PEs never fit a 6x6 wafer
    assert 0 < out["utilization"] <= 1 and out["makespan_s"] >= 100
    assert 0 < out["fairness_jain"] <= 1


def test_sim_reports_a_bad_trace_as_an_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.swf"
    bad.write_text("1 2 3\n")
    result = CliRunner().invoke(sim, [str(bad)])
    assert result.exit_code == 1 and "SWF" in result.output


def test_metric_helpers() -> None:
    assert bounded_slowdown(0, 1) == 1.0
    assert bounded_slowdown(90, 5) == pytest.approx(9.5)  # (90 + 5) / max(5, 10)
    assert jain_index([2, 2, 2]) == pytest.approx(1.0)
    assert jain_index([1, 0, 0]) == pytest.approx(1 / 3)
    assert percentile(list(range(1, 101)), 95) == 95


def test_shapes_are_exact_for_powers_of_two_and_never_exceed_the_wafer() -> None:
    assert shape_for_pes(128, 16, 16) == (8, 16)
    assert shape_for_pes(64, 16, 16) == (8, 8)
    assert shape_for_pes(257, 16, 16) is None
    r, c = shape_for_pes(13, 16, 16)
    assert r * c >= 13 and r <= 16 and c <= 16 and max(r, c) / min(r, c) <= 4


def test_a_large_job_is_not_starved_by_a_stream_of_small_ones() -> None:
    # 15 small jobs run at once on 60 of 64 PEs for 400 s: the wafer never empties by itself
    small = [TraceJob(i, 2.0 * i, 30.0, 30.0, 4, "u1") for i in range(1, 200)]
    big = TraceJob(10_000, 5.0, 30.0, 30.0, 64, "u2")
    spec = ClusterSpec(1, 8, 8, 1)
    for config in (PolicyConfig(age_cap_s=100.0, reserve_after_s=30.0), easy_config()):
        trace = sorted([*small, big], key=lambda j: j.submit_s)
        result = simulate(trace, spec, config)
        assert result.unfinished == 0
        assert result.max_wait_s < 150.0  # the big job waits for its reservation, not the stream


def test_on_a_lublin_prefix_sam_beats_easy_beats_fcfs_on_bounded_slowdown() -> None:
    jobs = read_swf(LUBLIN, limit=150)
    spec = ClusterSpec(1, 16, 16, 1)
    runs = {name: simulate(jobs, spec, POLICIES[name](), name) for name in ("fcfs", "easy", "sam")}
    slow = {k: v.avg_bounded_slowdown for k, v in runs.items()}
    assert slow["sam"] < slow["easy"] < slow["fcfs"], slow


def test_a_suspended_job_resumes_and_pays_its_restart() -> None:
    """Selective suspension in the replay: a long whole-wafer job is stopped for a short job
    that has waited 100x its run time, the short one starts at once, and the long one ends
    later by exactly the checkpoint-and-restart cost (its work is kept)."""
    trace = [
        TraceJob(1, 0.0, 10_000.0, 10_000.0, 16, "a"),
        TraceJob(2, 10.0, 10.0, 10.0, 4, "b"),
        TraceJob(3, 2_000.0, 10.0, 10.0, 4, "c"),  # an event: the replay plans again then
    ]
    spec = ClusterSpec(1, 4, 4, 1)
    off = simulate(trace, spec, PolicyConfig(migration=False, suspend_factor=0.0), "sam")
    on = simulate(trace, spec, PolicyConfig(migration=False, suspend_factor=10.0), "sam")
    assert (off.preemptions, on.preemptions) == (0, 1)
    assert on.moved_cost_s == 120.0
    assert on.makespan_s == pytest.approx(off.makespan_s + 120.0)  # restart included
    assert on.avg_bounded_slowdown < off.avg_bounded_slowdown


def test_sam_sim_profile_replays_the_named_profile_as_its_policy_did() -> None:
    """`sam sim --profile easy` replays the `easy` profile: the figures `--policy easy` gives."""
    from pathlib import Path

    from click.testing import CliRunner

    from sam_server.replay.cli import sim

    trace = str(Path(__file__).resolve().parents[2] / "traces" / "lublin_256.swf")
    runner = CliRunner()
    figures = []
    for flag in (["--policy", "easy"], ["--profile", "easy"]):
        out = runner.invoke(sim, [trace, "--limit", "60", *flag, "-o", "json"])
        assert out.exit_code == 0, out.output
        got = json.loads(out.output.strip().splitlines()[-1])
        got.pop("seconds", None), got.pop("policy")
        figures.append(got)
    assert figures[0] == figures[1]
    bad = runner.invoke(sim, [trace, "--profile", "fast"])
    assert bad.exit_code != 0 and "fast" in bad.output
