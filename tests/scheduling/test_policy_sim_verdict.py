"""benchmarks/policy_sim.py's verdict: the slowdown goal no policy can reach is said so, and the
count over every figure keeps its definition; `--anchors` replays sam alone with the same result."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from sam_server.scheduling.model import PolicyConfig, PriorityWeights

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "policy_sim.py"


def _policy_sim() -> ModuleType:
    spec = importlib.util.spec_from_file_location("policy_sim", _PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _figures(
    bsld: float, util: float = 0.5, p95: float = 10.0, top: float = 20.0
) -> dict[str, Any]:
    return {
        "avg_bounded_slowdown": bsld,
        "utilization": util,
        "p95_wait_s": p95,
        "max_wait_s": top,
        "fairness_jain": 1.0,
    }


def test_an_unreachable_slowdown_goal_is_reported_and_not_counted_against_sam() -> None:
    ps = _policy_sim()
    easy, oned = _figures(1.1), _figures(1.0)
    case = ps._verdict(easy, _figures(1.0), oned)
    assert case["bsld_goal_reachable"] is False  # 0.8 x 1.1 < 1: no policy gets there
    assert case["beats_easy"] is False  # the definition over every figure is unchanged
    assert case["beats_easy_reachable_goals"] is True
    worse_wait = ps._verdict(easy, _figures(1.0, top=21.0), oned)
    assert worse_wait["beats_easy_reachable_goals"] is False  # the other goals still count


def test_a_reachable_goal_counts_in_both_and_the_summary_adds_them() -> None:
    ps = _policy_sim()
    easy, oned = _figures(2.0), _figures(1.5)
    won = ps._verdict(easy, _figures(1.6), oned)
    lost = ps._verdict(easy, _figures(1.7), oned)
    assert won["bsld_goal_reachable"] and won["beats_easy"] and won["beats_easy_reachable_goals"]
    assert not lost["beats_easy"] and not lost["beats_easy_reachable_goals"]
    unreachable = ps._verdict(_figures(1.1), _figures(1.0), oned)
    cases = [{**v, "sam": _figures(1.0), "easy": _figures(1.0)} for v in (won, lost, unreachable)]
    summary = ps._summary(cases)
    assert summary["cases"] == 3 and summary["sam_beats_easy_all_figures"] == 1
    assert summary["sam_beats_easy_all_reachable_goals"] == 2
    assert summary["bsld_goal_unreachable"] == 1


def _write_traces(folder: Path) -> None:
    """Both matrix traces, eight jobs each (SWF: id submit wait run procs ... req_time ... user)."""
    for name, procs in (("lublin_256", 256), ("NASA-iPSC-1993-3.1-cln", 128)):
        lines = []
        for i in range(8):
            asked = (procs, procs // 2, 8, 1)[i % 4]
            run, limit = 600 + 300 * i, 1200 + 300 * i
            f = [i + 1, 50 * i, -1, run, asked, -1, -1, asked, limit, -1, 1, 1 + i % 3]
            lines.append(" ".join(str(x) for x in f + [1, -1, 0, -1, -1, -1]))
        (folder / f"{name}.swf").write_text("\n".join(lines) + "\n")


def _cases(out: str) -> list[dict[str, Any]]:
    """The output's lines without the replays' timings."""

    def no_seconds(row: dict[str, Any]) -> dict[str, Any]:
        return {
            k: no_seconds(v) if isinstance(v, dict) else v for k, v in row.items() if k != "seconds"
        }

    return [no_seconds(json.loads(line)) for line in out.splitlines()]


def test_anchors_reuse_easy_and_oned_and_give_the_same_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ps = _policy_sim()
    _write_traces(tmp_path)
    ps.matrix(8, 1, traces=tmp_path)
    full = capsys.readouterr().out
    (tmp_path / "full.jsonl").write_text(full)
    replayed: list[str] = []
    run = ps._run

    def counted(*args: Any) -> dict[str, Any]:
        replayed.append(args[2])
        result: dict[str, Any] = run(*args)
        return result

    monkeypatch.setattr(ps, "_run", counted)
    ps.matrix(8, 1, traces=tmp_path, anchors=ps.read_anchors(tmp_path / "full.jsonl"))
    again = capsys.readouterr().out
    assert set(replayed) == {"sam"} and len(replayed) == 12  # 2 traces x 3 factors x 2 mappings
    assert _cases(again) == _cases(full)  # same cases, same figures, same summary


def test_anchors_that_miss_a_case_stop_with_what_to_run(tmp_path: Path) -> None:
    ps = _policy_sim()
    _write_traces(tmp_path)
    with pytest.raises(SystemExit, match="run the same --matrix"):
        ps.matrix(8, 1, traces=tmp_path, anchors={})
    (tmp_path / "bad.jsonl").write_text('{"trace": "x"}\n')
    with pytest.raises(SystemExit, match="neither a matrix case nor a summary"):
        ps.read_anchors(tmp_path / "bad.jsonl")


def test_set_changes_a_priority_weight_and_keeps_the_others() -> None:
    ps = _policy_sim()
    one = replace(PolicyConfig(), **ps._changes(["weights.size=250", "reservations=1"]))
    assert one.weights == replace(PriorityWeights(), size=250.0) and one.reservations == 1
    both = replace(PolicyConfig(), **ps._changes(['weights={"age": 2000, "size": 100}']))
    assert (both.weights.age, both.weights.size) == (2000, 100)
    assert both.weights.fair_share == PriorityWeights().fair_share
    for bad in ("weights.height=1", 'weights={"height": 1}', "no_such_field=1", "suspend_factor"):
        with pytest.raises(SystemExit, match="--set"):
            ps._changes([bad])


def test_only_keeps_the_cases_asked_for_and_the_summary_counts_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ps = _policy_sim()
    _write_traces(tmp_path)
    only = ps._only(["trace=lublin_256", "interarrival=1.0", "interarrival=0.5"])
    ps.matrix(8, 1, traces=tmp_path, only=only)
    rows = _cases(capsys.readouterr().out)
    cases, summary = rows[:-1], rows[-1]
    assert {(c["trace"], c["interarrival"]) for c in cases} == {
        ("lublin_256", 1.0),
        ("lublin_256", 0.5),
    }
    assert len(cases) == 4 and summary["cases"] == 4  # two factors x two mappings
    with pytest.raises(SystemExit, match="--only"):
        ps._only(["wafer=16x16"])


def test_jitter_moves_submits_by_the_seeds_draw_for_every_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ps = _policy_sim()
    _write_traces(tmp_path)
    jobs = ps.read_swf(tmp_path / "lublin_256.swf")
    once, again = (ps.jitter(jobs, 60, 7, "case") for _ in range(2))
    assert once == again  # the seed decides the draw
    assert ps.jitter(jobs, 0, 7, "case") == jobs  # no jitter: the trace as recorded
    assert once != ps.jitter(jobs, 60, 8, "case") != ps.jitter(jobs, 60, 7, "other")
    by_id = {j.id: j for j in jobs}
    for moved in once:  # later by whole seconds, at most 60; nothing else about a job changes
        delay = moved.submit_s - by_id[moved.id].submit_s
        assert 0 <= delay <= 60 and delay == int(delay)
        assert replace(moved, submit_s=by_id[moved.id].submit_s) == by_id[moved.id]
    assert [j.submit_s for j in once] == sorted(j.submit_s for j in once)

    ps.matrix(8, 1, traces=tmp_path, jitter_s=60, seed=3)
    rows = _cases(capsys.readouterr().out)
    assert all(r["jitter_s"] == 60 and r["seed"] == 3 for r in rows)  # cases and summary
    (tmp_path / "seed3.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    anchors = ps.read_anchors(tmp_path / "seed3.jsonl")
    ps.matrix(8, 1, traces=tmp_path, anchors=anchors, jitter_s=60, seed=3)
    assert _cases(capsys.readouterr().out) == rows  # sam replayed on the same draw: same lines
    with pytest.raises(SystemExit, match="--jitter, --seed"):
        ps.matrix(8, 1, traces=tmp_path, anchors=anchors, jitter_s=60, seed=4)  # another draw
    with pytest.raises(SystemExit, match="--jitter, --seed"):
        ps.matrix(8, 1, traces=tmp_path, anchors=anchors)  # the trace as recorded
