"""Tenant quotas: `max_pes`, `max_running_jobs`, `max_queued_jobs` (None = no limit).

`can_ever_fit` is the submit-time check (the API's 422): a job that can never run is rejected,
never left pending. `QuotaLedger` tracks what each tenant holds while a plan is built, so no
tenant ever exceeds a limit through the plan's own starts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sam_server.scheduling import reasons
from sam_server.scheduling.model import (
    JobId,
    PolicyJob,
    PolicyQuota,
    PolicyWafer,
    Reason,
    TenantState,
)


def can_ever_fit(
    rows: int,
    cols: int,
    wafers: Iterable[PolicyWafer | tuple[int, int] | tuple[int, int, str]],
    quota: PolicyQuota | None,
    arch: str | None = None,
) -> str | None:
    """Why a rows x cols job can never run on these wafers under `quota`, or None if it can.

    `wafers` are policy wafers or (rows, cols[, arch]) tuples; a job with an `arch` ("wse3")
    can only use wafers of that arch. Offline wafers count (they may come back). The message
    tells the user what to change.
    """
    if rows < 1 or cols < 1:
        return f"region {rows}x{cols} is empty; ask for at least 1x1 PEs"
    described = [_described(w) for w in wafers]
    if not described:
        return "the cluster has no wafers; ask an admin to add one"
    shapes = [(r, c) for r, c, a in described if arch is None or a is None or a == arch]
    if not shapes:
        have = sorted({a for _, _, a in described if a})
        return (
            f"the job targets {arch} but the cluster has only {', '.join(have)} wafers; set "
            f"compile_options.target_device to one of those or ask an admin for a {arch} wafer"
        )
    if not any(r >= rows and c >= cols for r, c in shapes):
        biggest = max(shapes, key=lambda s: s[0] * s[1])
        return (
            f"region {rows}x{cols} is larger than every wafer (largest {biggest[0]}x{biggest[1]}); "
            "ask for a smaller region"
        )
    if quota is not None:
        if quota.max_pes is not None and rows * cols > quota.max_pes:
            return (
                f"region {rows}x{cols} = {rows * cols} PEs exceeds the tenant's "
                f"max_pes={quota.max_pes}; ask for a smaller region or a larger quota"
            )
        if quota.max_running_jobs is not None and quota.max_running_jobs < 1:
            return "the tenant's max_running_jobs is 0; ask an admin to raise it"
    return None


def _described(
    wafer: PolicyWafer | tuple[int, int] | tuple[int, int, str],
) -> tuple[int, int, str | None]:
    """(rows, cols, arch or None) of a policy wafer or a (rows, cols[, arch]) tuple."""
    if isinstance(wafer, PolicyWafer):
        return wafer.rows, wafer.cols, wafer.arch
    arch = wafer[2] if len(wafer) > 2 else None
    return int(wafer[0]), int(wafer[1]), str(arch) if arch is not None else None


@dataclass
class QuotaLedger:
    """PEs and jobs held by each tenant's running jobs, updated as a plan starts jobs."""

    quotas: dict[str, PolicyQuota]
    running_pes: dict[str, int] = field(default_factory=dict)
    running_jobs: dict[str, int] = field(default_factory=dict)
    over_queued: set[JobId] = field(default_factory=set)

    @classmethod
    def of(cls, tenants: Mapping[str, TenantState], jobs: Sequence[PolicyJob]) -> QuotaLedger:
        """The ledger of a snapshot's running jobs, and the jobs over `max_queued_jobs`."""
        ledger = cls({name: t.quota for name, t in tenants.items()})
        for job in jobs:
            if job.state == "running":
                ledger.add(job)
        ledger.over_queued = _over_queued(ledger.quotas, jobs)
        return ledger

    def add(self, job: PolicyJob) -> None:
        """Count `job` as running."""
        self.running_pes[job.tenant] = self.running_pes.get(job.tenant, 0) + job.pes
        self.running_jobs[job.tenant] = self.running_jobs.get(job.tenant, 0) + 1

    def remove(self, job: PolicyJob) -> None:
        """Stop counting `job` (it was preempted)."""
        self.running_pes[job.tenant] = self.running_pes.get(job.tenant, 0) - job.pes
        self.running_jobs[job.tenant] = self.running_jobs.get(job.tenant, 0) - 1

    def allows(self, job: PolicyJob, pes: int | None = None) -> bool:
        """Whether quotas let `job` start now (in a region of `pes` PEs, default its own).

        The same test as `blocks`, without building the reasons: the plan's walk asks it for
        every pending job, and a busy tenant's thousands of held jobs made the messages cost.
        """
        quota = self.quotas.get(job.tenant)
        if quota is None:
            return True
        if quota.max_queued_jobs is not None and job.id in self.over_queued:
            return False
        need = job.pes if pes is None else pes
        if quota.max_pes is not None and self.running_pes.get(job.tenant, 0) + need > quota.max_pes:
            return False
        running = self.running_jobs.get(job.tenant, 0)
        return quota.max_running_jobs is None or running + 1 <= quota.max_running_jobs

    def blocks(self, job: PolicyJob) -> list[Reason]:
        """Every quota reason that keeps `job` from starting now (empty: quotas allow it)."""
        quota = self.quotas.get(job.tenant)
        found: list[Reason] = []
        if job.id in self.over_queued and quota is not None and quota.max_queued_jobs is not None:
            found.append(reasons.quota_max_queued(quota.max_queued_jobs))
        if quota is None:
            return found
        used = self.running_pes.get(job.tenant, 0)
        if quota.max_pes is not None and used + job.pes > quota.max_pes:
            found.append(reasons.quota_max_pes(used, job.pes, quota.max_pes))
        running = self.running_jobs.get(job.tenant, 0)
        if quota.max_running_jobs is not None and running + 1 > quota.max_running_jobs:
            found.append(reasons.quota_max_running(running, quota.max_running_jobs))
        return found


def _over_queued(quotas: Mapping[str, PolicyQuota], jobs: Sequence[PolicyJob]) -> set[JobId]:
    """Jobs beyond their tenant's `max_queued_jobs`, counting running jobs first, then by age."""
    limited = {name for name, quota in quotas.items() if quota.max_queued_jobs is not None}
    if not limited:
        return set()  # (no pass over every job when no tenant has the limit)
    by_tenant: dict[str, list[PolicyJob]] = {}
    for job in jobs:
        if job.tenant in limited:
            by_tenant.setdefault(job.tenant, []).append(job)
    over: set[JobId] = set()
    for tenant, tenant_jobs in by_tenant.items():
        quota = quotas.get(tenant)
        if quota is None or quota.max_queued_jobs is None:
            continue
        ranked = sorted(tenant_jobs, key=lambda j: (j.state != "running", j.submitted_at, j.id))
        over.update(j.id for j in ranked[quota.max_queued_jobs :] if j.state != "running")
    return over
