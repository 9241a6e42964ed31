"""benchmarks/policy_sim.py's verdict: the slowdown goal no policy can reach is said so, and the
count over every figure keeps its definition."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

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
