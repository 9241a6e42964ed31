"""A wafer's arch is part of the policy: a job compiled for WSE-3 runs only on a WSE-3 wafer."""

from __future__ import annotations

import dataclasses

from sam_server.scheduling import (
    PolicyConfig,
    PolicyQuota,
    PolicyWafer,
    can_ever_fit,
    easy_config,
    plan,
)
from tests.scheduling.factories import job, running, snapshot


def _with_arch(snap, arches: dict[str, str]):  # type: ignore[no-untyped-def]
    wafers = tuple(dataclasses.replace(w, arch=arches[w.id]) for w in snap.wafers)
    return dataclasses.replace(snap, wafers=wafers)


def _arch_job(job_id: int, arch: str | None, **kw: object):  # type: ignore[no-untyped-def]
    return dataclasses.replace(job(job_id, 8, 8, **kw), arch=arch)  # type: ignore[arg-type]


def test_a_wse3_job_lands_on_the_wse3_wafer_even_when_a_wse2_wafer_comes_first() -> None:
    snap = snapshot([("a2", 64, 64), ("b3", 64, 64)], [_arch_job(1, "wse3"), _arch_job(2, "wse2")])
    for config in (PolicyConfig(), easy_config()):  # best fit and first fit
        starts = {
            s.job_id: s.wafer_id
            for s in plan(_with_arch(snap, {"a2": "wse2", "b3": "wse3"}), 0.0, config).starts
        }
        assert starts == {1: "b3", 2: "a2"}


def test_a_job_waits_for_its_arch_while_the_other_arch_is_free() -> None:
    # The WSE-3 wafer is full; the free WSE-2 wafer must not take the WSE-3 job.
    holder, alloc = running(9, 0, 0, 64, 64, limit=5000.0)
    snap = snapshot(
        [("a2", 64, 64), ("b3", 64, 64)], [holder, _arch_job(1, "wse3")], {"b3": [alloc]}
    )
    result = plan(_with_arch(snap, {"a2": "wse2", "b3": "wse3"}), 1000.0)
    assert result.starts == []
    assert result.reservation is not None and result.reservation.wafer_id == "b3"


def test_jobs_without_an_arch_use_any_wafer_as_in_trace_replay() -> None:
    snap = snapshot([("a2", 8, 8), ("b3", 8, 8)], [_arch_job(1, None), _arch_job(2, None)])
    result = plan(_with_arch(snap, {"a2": "wse2", "b3": "wse3"}), 0.0)
    assert sorted(s.wafer_id for s in result.starts) == ["a2", "b3"]


def test_submit_check_refuses_an_arch_no_wafer_has_and_names_what_exists() -> None:
    wse2_only = [PolicyWafer("a", 750, 994, arch="wse2"), (64, 64, "wse2")]
    why = can_ever_fit(8, 8, wse2_only, PolicyQuota(), arch="wse3")
    assert why is not None and "wse3" in why and "wse2" in why
    assert can_ever_fit(8, 8, wse2_only, PolicyQuota(), arch="wse2") is None
    # the region check only counts wafers of the job's arch
    mixed = [(755, 1170, "wse3"), (64, 64, "wse2")]
    assert can_ever_fit(100, 100, mixed, None, arch="wse3") is None
    assert "larger than every wafer" in (can_ever_fit(100, 100, mixed, None, arch="wse2") or "")
