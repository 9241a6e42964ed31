"""The planning cycle's fast helpers (fit tables, vectorized best fit, priority breakdowns)
decide exactly as plain computations: a whole plan made with each helper swapped for a plain
version is the same plan, field for field, over busy generated clusters with flexible shapes,
quotas, an offline and a slot-limited wafer, preemption, migration and reservations."""

from __future__ import annotations

import random

import pytest

from sam_server.scheduling import explain, layers, migration, placement, policy, preemption
from sam_server.scheduling import reservation as timed
from sam_server.scheduling.framework import cycle
from sam_server.scheduling.geometry import FreeSpace, _mers_cached, pareto_front
from sam_server.scheduling.model import (
    CLASS_RANK,
    Allocation,
    PolicyConfig,
    PolicyJob,
    PolicyQuota,
    PolicyWafer,
    PriorityBreakdown,
    Snapshot,
    TenantState,
)
from sam_server.scheduling.priority import (
    FACTOR_NAMES,
    PriorityCalculator,
    age_factor,
    size_factor,
)
from sam_server.scheduling.shapes import flexible_shapes, free_space_shapes

TENANTS = ("a", "b", "c")
CLASSES = ("low", "normal", "normal", "high", "urgent")
NOW = 100_000.0


def _cluster(seed: int) -> Snapshot:
    """Four 40x56 wafers (one offline, one running at most 12 regions) and a 30x40 one, about
    85% held by running jobs; 300 waiting jobs, most of them flexible."""
    rng = random.Random(seed)
    dims = [(40, 56)] * 4 + [(30, 40)]
    spaces = [FreeSpace.of(r, c, []) for r, c in dims]
    allocs: list[list[Allocation]] = [[] for _ in dims]
    jobs: list[PolicyJob] = []
    room = 0.85 * sum(r * c for r, c in dims)
    for _ in range(2000):
        if sum(j.pes for j in jobs) > room:
            break
        rows, cols = rng.randint(3, 16), rng.randint(3, 16)
        spot = placement.choose_placement(spaces, rows, cols, "first_fit")
        if spot is None:
            continue
        spaces[spot.wafer_index].occupy((spot.row, spot.col, rows, cols))
        tenant = rng.choice(TENANTS)
        jid = len(jobs)
        allocs[spot.wafer_index].append(Allocation(jid, tenant, spot.row, spot.col, rows, cols))
        started = NOW - rng.uniform(0, 7200)
        jobs.append(
            PolicyJob(
                jid,
                tenant,
                f"{tenant}-u{rng.randint(0, 3)}",
                rng.choice(CLASSES),  # type: ignore[arg-type]
                "running",
                started - 60,
                started - 60,
                rows,
                cols,
                rng.choice([1800.0, 3600.0, 14400.0]),
                started_at=started,
                preemptible=rng.random() < 0.8,
            )
        )
    wafers = tuple(
        PolicyWafer(
            f"w{i}",
            r,
            c,
            online=i != 2,
            allocations=tuple(allocs[i]),
            max_jobs=12 if i == 1 else None,
        )
        for i, (r, c) in enumerate(dims)
    )
    for k in range(300):
        rows, cols = rng.randint(2, 24), rng.randint(2, 24)
        tenant = rng.choice(TENANTS)
        submitted = NOW - rng.uniform(0, 86400)
        flexible = rng.random() < 0.8
        jobs.append(
            PolicyJob(
                10_000 + k,
                tenant,
                f"{tenant}-u{rng.randint(0, 3)}",
                rng.choice(CLASSES),  # type: ignore[arg-type]
                rng.choice(("pending",) * 6 + ("queued", "compiling")),  # type: ignore[arg-type]
                submitted,
                submitted,
                rows,
                cols,
                rng.choice([300.0, 1800.0, 3600.0, 14400.0]),
                shapes=flexible_shapes(rows * cols, 40, 56) if flexible else (),
            )
        )
    tenants = {
        t: TenantState(
            PolicyQuota(max_pes=rng.choice([None, 5000]), max_running_jobs=rng.choice([None, 60])),
            rng.uniform(1e6, 1e8),
        )
        for t in TENANTS
    }
    return Snapshot(wafers, tenants, tuple(jobs), compile_slots_free=2)


def _plain_fits(space: FreeSpace, rows: int, cols: int) -> bool:
    return any(m[2] - m[0] >= rows and m[3] - m[1] >= cols for m in space.mers)


class _PlainFitIndex:
    def __init__(self, spaces: list[FreeSpace | None]) -> None:
        self.spaces = [s for s in spaces if s is not None]

    def fits(self, rows: int, cols: int) -> bool:
        return any(_plain_fits(s, rows, cols) for s in self.spaces)

    def cut_shapes(self, pes: int, max_aspect: float) -> tuple[tuple[int, int], ...]:
        sides = [(m[2] - m[0], m[3] - m[1]) for s in self.spaces for m in s.mers]
        return free_space_shapes(pes, pareto_front(sides), max_aspect)


def plain_best_fit(
    space: FreeSpace, rows: int, cols: int
) -> tuple[tuple[int, ...], int, int] | None:
    """Every corner of every MER that holds the shape, placed on a copy of the space: the
    least (shrink of the largest free rectangle, area of the MER, row, col)."""
    before = max(((m[2] - m[0]) * (m[3] - m[1]) for m in space.mers), default=0)
    scored = []
    for r0, c0, r1, c1 in space.mers:
        if r1 - r0 < rows or c1 - c0 < cols:
            continue
        for r in (r0, r1 - rows):
            for c in (c0, c1 - cols):
                after = space.copy()
                after.occupy((r, c, rows, cols))
                largest = max(((m[2] - m[0]) * (m[3] - m[1]) for m in after.mers), default=0)
                scored.append((before - largest, (r1 - r0) * (c1 - c0), r, c))
    if not scored:
        return None
    shrink, hole, r, c = min(scored)
    return (shrink, hole), r, c


def _plain_tightest(space: FreeSpace, rows: int, cols: int) -> float:
    holes = [
        (m[2] - m[0]) * (m[3] - m[1])
        for m in space.mers
        if m[2] - m[0] >= rows and m[3] - m[1] >= cols
    ]
    return float(min(holes, default=float("inf")))


def _plain_breakdown(self: PriorityCalculator, job: PolicyJob, now: float) -> PriorityBreakdown:
    age = age_factor(job, now, self.config)
    factors = {
        "priority_class": CLASS_RANK.get(job.priority_class, 1) / 3.0,
        "fair_share": self.fair_share(job),
        "age": age,
        "size": size_factor(job, self.cluster_pes, self.config) * (1.0 - age),
    }
    w = self.config.weights
    weights = dict(zip(FACTOR_NAMES, (w.priority_class, w.fair_share, w.age, w.size), strict=True))
    weighted = {name: weights[name] * factors[name] for name in FACTOR_NAMES}
    return PriorityBreakdown(sum(weighted.values()), factors, weighted)


CONFIGS = {
    "default": PolicyConfig(),
    "no-preemption": PolicyConfig(preemption=False, reservations=3, reserve_after_s=0.0),
    "first-fit": PolicyConfig(placement="first_fit", preemption=False),
    "strict": PolicyConfig(backfill=False),
    "one-reservation": PolicyConfig(reservations=1, protect_oldest=0, preemption=False),
}


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_plan_with_plain_helpers_is_the_same_plan(
    seed: int, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    snap = _cluster(seed)
    config = CONFIGS[name]
    _mers_cached.cache_clear()
    fast = policy.plan(snap, NOW, config)
    assert fast.waiting and (fast.starts or not config.backfill)
    with monkeypatch.context() as patched:
        patched.setattr(FreeSpace, "fits", _plain_fits)
        for module in (placement, explain, layers, cycle):
            patched.setattr(module, "FitIndex", _PlainFitIndex)
        for module in (placement, preemption, migration, timed):
            patched.setattr(module, "best_fit_on", plain_best_fit)
        patched.setattr(placement, "_tightest_hole", _plain_tightest)
        patched.setattr(PriorityCalculator, "_breakdown", _plain_breakdown)
        _mers_cached.cache_clear()
        slow = policy.plan(snap, NOW, config)
    assert slow == fast
    assert repr(slow) == repr(fast)  # (-0.0 and 0.0 compare equal)


@pytest.mark.parametrize(
    "shapes", [[], [(40, 56)], [(40, 56), (30, 80), (40, 56)], [(0, 5), (12, 3), (5, 12)]]
)
def test_the_wafer_size_table_holds_a_shape_exactly_when_some_wafer_does(
    shapes: list[tuple[int, int]],
) -> None:
    view = explain.ClusterView([], _PlainFitIndex([]), _PlainFitIndex([]), None, shapes)  # type: ignore[arg-type]
    for rows in range(-1, 45):
        for cols in range(0, 85):
            plain = any(r >= rows and c >= cols for r, c in shapes)
            assert explain.table_fits(view.wafer_widths, rows, cols) == plain, (rows, cols)
