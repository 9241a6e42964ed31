"""Slurm's `--array` and `--dependency` syntax, and `${SAM_ARRAY_*}` substitution (pure)."""

from __future__ import annotations

import pytest

from sam_server.errors import InvalidSpec
from sam_server.services.arrays import parse_array, substitute, task_values
from sam_server.services.dependencies import Condition, judge, parse_dependency


def test_array_indices_ranges_steps_and_limit() -> None:
    assert parse_array("0-4").indices == (0, 1, 2, 3, 4)
    assert parse_array("1,3,5-7").indices == (1, 3, 5, 6, 7)
    got = parse_array("0-20:5%2")
    assert (got.indices, got.max_running) == ((0, 5, 10, 15, 20), 2)
    assert parse_array("3,1-3").indices == (1, 2, 3)
    for bad in ("", "a-b", "5-1", "0-3%0", "0-3%x", "1-2000000", "0-9:0"):
        with pytest.raises(InvalidSpec):
            parse_array(bad)


def test_placeholders_become_numbers_except_in_the_name() -> None:
    spec = {
        "name": "${SAM_ARRAY_TASK_ID}",
        "train": {"seed": "${SAM_ARRAY_TASK_ID}", "optimizer": {"lr": "1e-${SAM_ARRAY_TASK_ID}"}},
        "tag": "run-${SAM_ARRAY_TASK_ID}-of-${SAM_ARRAY_TASK_COUNT} in ${SAM_ARRAY_JOB_ID}",
        "list": ["${SAM_ARRAY_TASK_ID}", 4],
        "other": "${HOME}",
    }
    out = substitute(spec, task_values("jarr", 3, 10))
    assert out == {
        "name": "3",
        "train": {"seed": 3, "optimizer": {"lr": 1e-3}},
        "tag": "run-3-of-10 in jarr",
        "list": [3, 4],
        "other": "${HOME}",
    }
    assert spec["train"]["seed"] == "${SAM_ARRAY_TASK_ID}", "the template is left as it was"


def test_dependency_syntax_and_verdicts() -> None:
    assert parse_dependency("afterok:a:b, singleton") == [
        Condition("afterok", ("a", "b")),
        Condition("singleton"),
    ]
    for bad in ("afterok", "after:a", "singleton:a", "afterok:a?afterany:b", ""):
        with pytest.raises(InvalidSpec):
            parse_dependency(bad)
    ok, notok, anyend = (Condition(k, ("a", "b")) for k in ("afterok", "afternotok", "afterany"))
    running = {"a": ["succeeded"], "b": ["running"]}
    # afternotok already knows: a succeeded, so "every one failed" can no longer come true
    assert [judge(c, running).status for c in (ok, notok, anyend)] == [
        "waiting",
        "never",
        "waiting",
    ]
    ended = {"a": ["succeeded"], "b": ["failed"]}
    assert [judge(c, ended).status for c in (ok, notok, anyend)] == ["never", "never", "satisfied"]
    failed = {"a": ["cancelled"], "b": ["failed", "failed"]}  # b: an array, every task failed
    assert [judge(c, failed).status for c in (ok, notok, anyend)] == [
        "never",
        "satisfied",
        "satisfied",
    ]
    gone = {"b": ["succeeded"]}  # a purged by retention
    assert [judge(c, gone).status for c in (ok, notok, anyend)] == ["never", "never", "satisfied"]
