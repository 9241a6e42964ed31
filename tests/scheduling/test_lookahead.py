"""Look-ahead placement (the `fit` plugin's `lookahead`, `PolicyConfig.lookahead`)."""

from __future__ import annotations

from dataclasses import replace

from sam_server.replay.sim import ClusterSpec, simulate
from sam_server.replay.swf import TraceJob
from sam_server.scheduling import PolicyConfig, PolicyJob, plan
from sam_server.scheduling.geometry import FreeSpace
from sam_server.scheduling.placement import copies_after, lookahead_placement
from sam_server.scheduling.shapes import flexible_shapes

from .factories import job, snapshot

QUARTER = 192  # 32 processors at 6 PEs each: a quarter of 128 processors


def _longest_wait(config: PolicyConfig) -> float:
    """Four quarter jobs arriving a second apart on one 23x34 wafer, each running an hour:
    the longest wait among them."""
    trace = [TraceJob(i, float(i), 3600.0, 3600.0, 32, "u") for i in range(1, 5)]
    return simulate(trace, ClusterSpec(1, 23, 34, 6), config).max_wait_s


def test_four_quarter_jobs_arriving_one_by_one_all_start_on_one_wafer() -> None:
    # 23x34 holds four 192-PE jobs only as a pinwheel (12x16, 11x18, 12x16, 11x18); plain best
    # fit puts the first three elsewhere and the fourth waits the hour out
    assert _longest_wait(PolicyConfig(lookahead=3)) == 0.0
    assert _longest_wait(PolicyConfig(lookahead=0)) >= 3000.0


def test_the_look_ahead_counts_the_pinwheel() -> None:
    shapes = flexible_shapes(QUARTER, 23, 34)
    empty = FreeSpace.of(23, 34, [])
    assert copies_after(empty.mers, empty.free_pes, shapes, QUARTER, 4.0, 4) == 4
    # a quarter in the middle of the long side leaves room for fewer than three more
    middle = FreeSpace.of(23, 34, [(0, 9, 12, 16)])
    assert copies_after(middle.mers, middle.free_pes, shapes, QUARTER, 4.0, 3) < 3
    # after one quarter at a corner, the second goes flush beside it (11x18 or 12x16 rotated
    # into the pinwheel), so that two more still fit
    one = FreeSpace.of(23, 34, [(0, 0, 12, 16)])
    found = lookahead_placement([one], shapes, QUARTER, 4.0, 3)
    assert found is not None
    spot, (rows, cols) = found
    one.occupy((spot.row, spot.col, rows, cols))
    assert copies_after(one.mers, one.free_pes, shapes, QUARTER, 4.0, 3) == 2


def test_a_wafer_with_room_for_many_more_is_not_searched() -> None:
    shapes = flexible_shapes(24, 23, 34)  # 4 processors: 32 of them fit
    assert lookahead_placement([FreeSpace.of(23, 34, [])], shapes, 24, 4.0, 3) is None


HALF = 384  # 64 processors at 6 PEs each: half of 23x34 (782 PEs) but for 14


def _half_job(job_id: int, submitted: float = 0.0) -> PolicyJob:
    """A flexible 384-PE job asking 16x24, which also takes 12x32 ... 23x17."""
    shapes = flexible_shapes(HALF, 23, 34)
    return replace(
        job(job_id, 16, 24, limit=3600.0, submitted=submitted, shapes=shapes), work_pes=HALF
    )


def test_two_half_wafer_jobs_arriving_together_both_start_at_once() -> None:
    # best fit alone puts the first in 16x24, where no 384-PE rectangle is left beside it; with
    # lookahead_pairs the first goes flush (23x17) and the second takes the other 23x17
    trace = [TraceJob(i, 0.0, 3600.0, 3600.0, 64, "u") for i in (1, 2)]
    spec = ClusterSpec(1, 23, 34, 6)
    assert simulate(trace, spec, PolicyConfig()).max_wait_s == 0.0
    assert simulate(trace, spec, PolicyConfig(lookahead_pairs=False)).max_wait_s == 3600.0


def test_a_half_wafer_job_packs_flush_only_while_one_like_it_waits() -> None:
    # alone, or with only a smaller job waiting, the room beside it is the small jobs': best fit
    # (12x32 leaves an 11x34 strip), not a flush 23x17 that leaves 1-D EASY's spare PEs to nobody
    wafer = [("w0", 23, 34)]
    alone = plan(snapshot(wafer, [_half_job(1)]), 10.0)
    assert [(s.rows, s.cols) for s in alone.starts] == [(12, 32)]
    small = job(2, 4, 4, limit=3600.0, submitted=1.0)
    with_small = plan(snapshot(wafer, [_half_job(1), small]), 10.0)
    assert sorted((s.job_id, s.rows, s.cols) for s in with_small.starts) == [
        (1, 12, 32),
        (2, 4, 4),
    ]
    pair = [_half_job(1), _half_job(2, submitted=1.0)]
    both = plan(snapshot(wafer, pair), 10.0)
    assert sorted((s.rows, s.cols) for s in both.starts) == [(23, 17), (23, 17)]
    off = plan(snapshot(wafer, pair), 10.0, PolicyConfig(lookahead_pairs=False))
    assert [s.job_id for s in off.starts] == [1]
