"""Small builders for policy snapshots in tests."""

from __future__ import annotations

from sam_server.scheduling import (
    Allocation,
    PolicyConfig,
    PolicyJob,
    PolicyQuota,
    PolicyWafer,
    Snapshot,
    TenantState,
)


def job(
    job_id: int,
    rows: int,
    cols: int,
    *,
    state: str = "pending",
    tenant: str = "t",
    user: str = "u",
    cls: str = "normal",
    submitted: float = 0.0,
    limit: float = 100.0,
    started: float | None = None,
    preempt_count: int = 0,
    preemptible: bool = True,
    shapes: tuple[tuple[int, int], ...] = (),
) -> PolicyJob:
    """A job; running jobs need `started`."""
    return PolicyJob(
        job_id,
        tenant,
        user,
        cls,
        state,
        submitted,
        submitted,
        rows,
        cols,
        limit,  # type: ignore[arg-type]
        started_at=started,
        preempt_count=preempt_count,
        preemptible=preemptible,
        shapes=shapes,
    )


def running(
    job_id: int, row: int, col: int, rows: int, cols: int, **kw: object
) -> tuple[PolicyJob, Allocation]:
    """A running job and its allocation."""
    kw.setdefault("started", 0.0)
    j = job(job_id, rows, cols, state="running", **kw)  # type: ignore[arg-type]
    return j, Allocation(job_id, j.tenant, row, col, rows, cols)


def snapshot(
    wafers: list[tuple[str, int, int]],
    jobs: list[PolicyJob],
    allocations: dict[str, list[Allocation]] | None = None,
    quotas: dict[str, PolicyQuota] | None = None,
    usage: dict[str, float] | None = None,
    config: PolicyConfig | None = None,
    compile_slots: int = 0,
    offline: set[str] | None = None,
) -> Snapshot:
    """A snapshot of wafers (id, rows, cols), jobs and allocations per wafer id."""
    allocations = allocations or {}
    offline = offline or set()
    ws = tuple(
        PolicyWafer(wid, r, c, wid not in offline, tuple(allocations.get(wid, ())))
        for wid, r, c in wafers
    )
    names = {j.tenant for j in jobs} | set(quotas or {}) | set(usage or {})
    tenants = {
        n: TenantState((quotas or {}).get(n, PolicyQuota()), (usage or {}).get(n, 0.0))
        for n in sorted(names)
    }
    return Snapshot(ws, tenants, tuple(jobs), compile_slots, config or PolicyConfig())


def overlaps(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    """Whether rectangles (row, col, rows, cols) share a PE."""
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]
