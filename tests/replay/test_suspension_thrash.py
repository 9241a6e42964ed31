"""Selective suspension does not thrash: in the replay, no job is suspended more than
`suspend_max` times when `suspend_again_factor` is 0 (with either on, no more than
`max_preemptions_per_job`)."""

from __future__ import annotations

from collections import Counter
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from sam_server.replay import sim
from sam_server.replay.sim import ClusterSpec, simulate
from sam_server.replay.swf import TraceJob
from sam_server.scheduling import PolicyConfig


@st.composite
def traces(draw: st.DrawFn) -> list[TraceJob]:
    """A burst of long big jobs and short small ones on one 4x4 wafer (one PE per processor)."""
    count = draw(st.integers(4, 14))
    jobs: list[TraceJob] = []
    at = 0.0
    for k in range(count):
        at += draw(st.sampled_from([0.0, 5.0, 60.0, 900.0, 3_000.0]))
        run = draw(st.sampled_from([5.0, 30.0, 600.0, 5_000.0, 40_000.0]))
        procs = draw(st.sampled_from([1, 2, 4, 8, 16]))
        jobs.append(TraceJob(k + 1, at, run, run, procs, f"u{k % 3}"))
    return jobs


def _stops_per_job(trace: list[TraceJob], config: PolicyConfig) -> Counter[str]:
    """How many times each job was stopped in the replay of `trace` (no migration: every
    preemption the replay applied is a stop), read from the jobs' `preempt_count` in the
    snapshots the policy is given (a stopped job is pending again in the next one)."""
    stops: Counter[str] = Counter()
    real = sim.plan

    def spy(snapshot, *args: object, **kw: object):  # type: ignore[no-untyped-def]
        for j in snapshot.jobs:
            stops[str(j.id)] = max(stops[str(j.id)], j.preempt_count)
        return real(snapshot, *args, **kw)  # type: ignore[arg-type]

    with mock.patch.object(sim, "plan", spy):
        simulate(trace, ClusterSpec(1, 4, 4, 1), config, "sam")
    return stops


@settings(max_examples=30, deadline=None)
@given(
    traces(),
    st.sampled_from([1.5, 3.0, 5.0]),
    st.sampled_from([0, 1, 2]),
    st.sampled_from([0.0, 1.0, 10.0]),
)
def test_no_job_is_suspended_more_than_the_bound(
    trace: list[TraceJob], factor: float, most: int, again: float
) -> None:
    config = PolicyConfig(
        migration=False, suspend_factor=factor, suspend_max=most, suspend_again_factor=again
    )
    stops = _stops_per_job(trace, config)
    bound = most if most and not again else config.max_preemptions_per_job
    assert max(stops.values(), default=0) <= bound, stops
