"""A wafer's `max_jobs` (the regions its worker runs at once) bounds what the policy places."""

from __future__ import annotations

import dataclasses

import pytest

from sam_server.config import ClusterConfig
from sam_server.scheduling import plan

from .factories import job, running, snapshot


def _with_slots(snap, slots: dict[str, int]):  # type: ignore[no-untyped-def]
    wafers = [dataclasses.replace(w, max_jobs=slots.get(w.id)) for w in snap.wafers]
    return dataclasses.replace(snap, wafers=tuple(wafers))


def test_the_policy_never_places_more_than_max_jobs_on_a_wafer() -> None:
    pending = [job(i, 2, 2) for i in range(1, 31)]  # 30 tiny jobs: space for all of them
    p = plan(_with_slots(snapshot([("w0", 100, 100), ("w1", 100, 100)], pending), {"w0": 12}), 0.0)
    on = {"w0": 0, "w1": 0}
    for start in p.starts:
        on[start.wafer_id] += 1
    assert on == {"w0": 12, "w1": 18}  # w1 has no limit: the rest go there


def test_regions_already_running_count_against_max_jobs() -> None:
    held = [running(100 + i, 0, 3 * i, 2, 2) for i in range(4)]
    snap = snapshot(
        [("w0", 100, 100)],
        [j for j, _ in held] + [job(1, 2, 2), job(2, 2, 2)],
        allocations={"w0": [a for _, a in held]},
    )
    p = plan(_with_slots(snap, {"w0": 5}), 0.0)
    assert [s.job_id for s in p.starts] == [1]  # one slot left of five
    assert 2 in p.waiting


def test_the_cluster_file_sizes_max_jobs() -> None:
    cluster = ClusterConfig.model_validate({"wafers": [{"id": "a"}, {"id": "b", "max_jobs": 24}]})
    assert [w.max_jobs for w in cluster.wafers] == [16, 24]
    with pytest.raises(ValueError, match="max_jobs"):
        ClusterConfig.model_validate({"wafers": [{"id": "a", "max_jobs": 0}]})


def test_a_wafer_worker_runs_as_many_threads_as_its_max_jobs(tmp_path, monkeypatch) -> None:
    import click

    from sam_server.config import get_settings
    from sam_worker.cli import _wafer_slots

    cluster = tmp_path / "cluster.yaml"
    cluster.write_text("wafers:\n  - {id: w0, max_jobs: 12}\n  - {id: w1}\n")
    monkeypatch.setenv("SAM_CLUSTER", str(cluster))
    get_settings.cache_clear()
    try:
        assert (_wafer_slots("w0"), _wafer_slots("w1")) == (12, 16)
        with pytest.raises(click.BadParameter, match="not in the cluster file"):
            _wafer_slots("nope")
    finally:
        get_settings.cache_clear()
