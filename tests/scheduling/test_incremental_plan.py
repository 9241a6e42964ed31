"""A plan made with what the last plans left behind (the queue order kept between cycles, the
explained positions chosen at once) is the plan made from scratch, cycle after cycle, while
jobs arrive, end, start, change class, are held and released, are cancelled and quotas change."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

import pytest

from sam_server.scheduling import (
    Allocation,
    Plan,
    PolicyConfig,
    PolicyJob,
    PolicyQuota,
    Snapshot,
    static_order,
)
from sam_server.scheduling import policy as policy_module
from sam_server.scheduling.plugins import priority_sort
from sam_server.scheduling.priority import PriorityCalculator
from tests.scheduling.factories import snapshot

WAFERS = [("w0", 40, 40), ("w1", 40, 40), ("w2", 30, 50)]
TENANTS = ("a", "b", "c")
CLASSES = ("low", "normal", "normal", "high")


class _Selection:
    """Like the live loop's ExplainSelection: the positions of the jobs to explain."""

    def __init__(self, depth: int, every: int, changed: set[object]) -> None:
        self.depth, self.every, self.changed = depth, every, changed

    def __call__(self, jobs: Sequence[PolicyJob]) -> list[int]:
        return [
            k
            for k, job in enumerate(jobs)
            if k < self.depth or k % self.every == 0 or job.id in self.changed
        ]


class _World:
    """A cluster that evolves between cycles; unchanged jobs keep their objects, as the live
    scheduler's row cache keeps them."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.jobs: dict[int, PolicyJob] = {}
        self.allocs: dict[int, tuple[str, Allocation]] = {}
        self.held: dict[
            int, PolicyJob
        ] = {}  # out of the snapshot (a hold, as scheduler.gates does)
        self.quotas = {t: PolicyQuota(max_running_jobs=6) for t in TENANTS}
        self.next_id = 0
        self.now = 10_000.0
        self.changed: set[object] = set()

    def arrive(self, count: int) -> None:
        for _ in range(count):
            tenant = self.rng.choice(TENANTS)
            submitted = self.now - self.rng.choice([0.0, 5.0, 700.0, 7200.0])
            job = PolicyJob(
                self.next_id,
                tenant,
                f"{tenant}-u{self.rng.randint(0, 2)}",
                self.rng.choice(CLASSES),  # type: ignore[arg-type]
                self.rng.choice(("pending", "pending", "queued", "compiling")),  # type: ignore[arg-type]
                submitted,
                submitted + self.rng.choice([0.0, 0.0, 30.0]),
                self.rng.randint(4, 20),
                self.rng.randint(4, 20),
                self.rng.choice([60.0, 600.0, 3600.0]),
            )
            self.jobs[job.id] = job
            self.changed.add(job.id)
            self.next_id += 1

    def apply(self, plan: Plan) -> None:
        """The plan's starts run; compiles end as pending jobs."""
        for start in plan.starts:
            job = self.jobs[start.job_id]  # type: ignore[index]
            self.jobs[job.id] = replace(
                job, state="running", rows=start.rows, cols=start.cols, started_at=self.now
            )
            rect = (start.row, start.col, start.rows, start.cols)
            self.allocs[job.id] = (start.wafer_id, Allocation(job.id, job.tenant, *rect))  # type: ignore[arg-type]
        for job_id in plan.compiles:
            job = self.jobs[job_id]  # type: ignore[index]
            self.jobs[job.id] = replace(job, state="pending", eligible_at=self.now)
            self.changed.add(job.id)

    def churn(self) -> None:
        """Ends, class changes, holds and releases, cancels, a quota change; then time passes."""
        rng = self.rng
        running = [j for j in self.jobs.values() if j.state == "running"]
        for job in rng.sample(running, min(len(running), rng.randint(0, 4))):
            del self.jobs[job.id]  # ended
            self.allocs.pop(job.id, None)
        waiting = [j for j in self.jobs.values() if j.state != "running"]
        for job in rng.sample(waiting, min(len(waiting), 3)):
            self.jobs[job.id] = replace(job, priority_class=rng.choice(CLASSES))  # type: ignore[arg-type]
            self.changed.add(job.id)
        for job in rng.sample(waiting, min(len(waiting), 2)):
            if job.id in self.jobs and self.jobs[job.id] is job:
                self.held[job.id] = self.jobs.pop(job.id)  # held: the same object comes back
        for job_id in rng.sample(sorted(self.held), min(len(self.held), 1)):
            self.jobs[job_id] = self.held.pop(job_id)  # released
        for job in rng.sample(waiting, min(len(waiting), 2)):
            if self.jobs.get(job.id) is job:
                del self.jobs[job.id]  # cancelled
        tenant = rng.choice(TENANTS)
        self.quotas[tenant] = PolicyQuota(
            max_pes=rng.choice([None, 1500, 4000]), max_running_jobs=rng.choice([None, 3, 8])
        )
        self.now += rng.choice([1.0, 30.0, 900.0])

    def snapshot(self, config: PolicyConfig) -> Snapshot:
        allocations: dict[str, list[Allocation]] = {}
        for wafer_id, alloc in self.allocs.values():
            allocations.setdefault(wafer_id, []).append(alloc)
        jobs = list(self.jobs.values())
        self.rng.shuffle(jobs)  # the row cache's order is no order
        return snapshot(
            WAFERS, jobs, allocations, quotas=dict(self.quotas), config=config, compile_slots=2
        )


def _from_scratch(snap: Snapshot) -> Snapshot:
    """The same snapshot with every job a new object (nothing to reuse from earlier plans)."""
    return replace(snap, jobs=tuple(replace(j) for j in snap.jobs))


def _plain_order(snap: Snapshot, now: float, started: set[object]) -> list[object]:
    """The queue order as one sort by the whole key (priority, eligible, submitted, id)."""
    pes = sum(w.rows * w.cols for w in snap.wafers if w.online)
    calc = PriorityCalculator(snap.tenants, pes, snap.config)
    waiting = [j for j in snap.jobs if j.state != "running" and j.id not in started]
    key = lambda j: (-calc.breakdown(j, now).total, j.eligible_at, j.submitted_at, j.id)  # noqa: E731
    return [j.id for j in sorted(waiting, key=key)]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("ordering", ["priority", "fifo"])
def test_the_incremental_plan_is_the_plan_from_scratch_over_many_cycles(
    seed: int, ordering: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = _World(seed)
    config = PolicyConfig(ordering=ordering, reserve_after_s=600.0)  # type: ignore[arg-type]
    kept = static_order.StaticOrder()  # what the cycles leave behind
    world.arrive(100)  # (more than _FEW_NEW: merged by a sort; later ones inserted)
    for _ in range(25):
        snap = world.snapshot(config)
        selection = _Selection(depth=5, every=7, changed=set(world.changed))
        monkeypatch.setattr(priority_sort, "STATIC", kept)
        incremental = policy_module.plan(snap, world.now, explain_only=selection)
        monkeypatch.setattr(priority_sort, "STATIC", static_order.StaticOrder())
        scratch = policy_module.plan(_from_scratch(snap), world.now, explain_only=selection)
        assert incremental == scratch
        assert list(incremental.waiting) == list(scratch.waiting)  # queue order, as stored
        if ordering == "priority":
            started = {s.job_id for s in incremental.starts}
            assert incremental.order == _plain_order(snap, world.now, started)
        world.changed.clear()
        world.apply(incremental)
        world.churn()
        world.arrive(world.rng.choice([0, 1, 3, 8, 80]))
