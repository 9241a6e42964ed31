"""Job priority: a weighted sum of factors, each in [0, 1]. Higher runs sooner, always.

    priority = w_class * class + w_fair_share * fair_share + w_age * age + w_size * size

- class: low 0, normal 1/3, high 2/3, urgent 1.
- fair_share: the tenant's classic 2^(-U/S) factor nudged by the user's (see `fairshare`).
- age: time since the job became eligible over `age_cap_s`, capped at 1.
- size: with `favor_small` (default) the job's size is measured in time, as Slurm sites that
  rank shorter jobs first do: near 1 for the shortest time limits, falling to 0 on a log scale at
  `size_horizon_s`; otherwise PEs / cluster PEs (favour large). The region's area is left out on
  purpose: the jobs that compete for one free rectangle each hold it for their time limit, so
  the shortest first gives the least mean wait (the SPT rule) whatever their areas, and a small
  region already gets ahead through backfill, as it fits holes a large one cannot. Ranking by
  PE-seconds counted area twice: small but long jobs took the holes that short jobs of a medium
  area were waiting for.
  The bonus fades as the job ages (size x (1 - age)), so among jobs that reached the age cap
  seniority alone decides (ties go to the earlier eligible time). Without the fade, a backlog
  longer than the age cap would sort old jobs shortest-first again, and a long job could wait
  behind an endless supply of capped short ones; with it, every job is eventually the oldest.

The default weights (10000, 5000, 1000, 500) follow the anchors' recommendation: class dominates,
then fair share; age outweighs the fading size bonus, so no job starves behind short ones.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Protocol

from sam_domain.jobs import CLASS_RANK
from sam_server.scheduling.fairshare import combined_factor, tenant_factors, user_factor
from sam_server.scheduling.model import (
    PolicyJob,
    PriorityBreakdown,
    PriorityWeights,
    TenantState,
)


class PriorityRules(Protocol):
    """What the factors read: `plugins.priority_sort.PriorityArgs` (or a `PolicyConfig`)."""

    @property
    def weights(self) -> PriorityWeights: ...
    @property
    def age_cap_s(self) -> float: ...
    @property
    def favor_small(self) -> bool: ...
    @property
    def size_horizon_s(self) -> float: ...
    @property
    def user_share_weight(self) -> float: ...


FACTOR_NAMES = ("priority_class", "fair_share", "age", "size")


def size_factor(job: PolicyJob, cluster_pes: int, config: PriorityRules) -> float:
    """The job-size factor in [0, 1] (see the module docstring)."""
    if cluster_pes <= 0:
        return 0.0
    if not config.favor_small:
        return min(1.0, job.pes / cluster_pes)
    limit = max(1.0, job.time_limit_s)
    horizon = max(1.0, config.size_horizon_s)
    return max(0.0, 1.0 - math.log1p(limit) / math.log1p(horizon))


def age_factor(job: PolicyJob, now: float, config: PriorityRules) -> float:
    """Eligible wait over the age cap, in [0, 1]."""
    wait = max(0.0, now - job.eligible_at)
    if config.age_cap_s <= 0:
        return 0.0
    return min(1.0, wait / config.age_cap_s)


class PriorityCalculator:
    """Computes priority breakdowns for the jobs of one snapshot (fair-share factors cached)."""

    def __init__(
        self, tenants: Mapping[str, TenantState], cluster_pes: int, config: PriorityRules
    ) -> None:
        self.tenants = tenants
        self.cluster_pes = cluster_pes
        self.config = config
        self._tenant_f = tenant_factors(tenants)
        self._user_f: dict[tuple[str, str], float] = {}
        self._seen: dict[tuple[object, ...], PriorityBreakdown] = {}
        self._seen_now: float | None = None
        self._size_by_limit: dict[float, float] = {}

    def fair_share(self, job: PolicyJob) -> float:
        """The job's fair-share factor in [0, 1]; a tenant unknown to the snapshot scores 1."""
        key = (job.tenant, job.user)
        if key not in self._user_f:
            t_f = self._tenant_f.get(job.tenant, 1.0)
            u_f = user_factor(self.tenants.get(job.tenant), job.user)
            self._user_f[key] = combined_factor(t_f, u_f, self.config.user_share_weight)
        return self._user_f[key]

    def breakdown(self, job: PolicyJob, now: float) -> PriorityBreakdown:
        """Total priority of `job` at `now` with every factor and its weighted value (shared by
        jobs equal in every field the factors read: an array's tasks, for one)."""
        if now != self._seen_now:
            self._seen, self._seen_now = {}, now
        key = (
            job.eligible_at,
            job.time_limit_s,
            job.rows,
            job.cols,
            job.priority_class,
            job.tenant,
            job.user,
        )
        found = self._seen.get(key)
        if found is None:
            found = self._seen[key] = self._breakdown(job, now)
        return found

    def _breakdown(self, job: PolicyJob, now: float) -> PriorityBreakdown:
        w = self.config.weights
        age = age_factor(job, now, self.config)
        rank = CLASS_RANK.get(job.priority_class, 1) / 3.0
        fair = self.fair_share(job)
        size = self._size(job) * (1.0 - age)
        factors = {"priority_class": rank, "fair_share": fair, "age": age, "size": size}
        weighted = {
            "priority_class": w.priority_class * rank,
            "fair_share": w.fair_share * fair,
            "age": w.age * age,
            "size": w.size * size,
        }
        # the sum in FACTOR_NAMES order, as sum(weighted.values()) adds them
        total = 0.0 + weighted["priority_class"] + weighted["fair_share"]
        total = total + weighted["age"] + weighted["size"]
        return PriorityBreakdown(total, factors, weighted)

    def _size(self, job: PolicyJob) -> float:
        """`size_factor` (by time limit alone when favouring small jobs: a few distinct values)."""
        if not self.config.favor_small:
            return size_factor(job, self.cluster_pes, self.config)
        found = self._size_by_limit.get(job.time_limit_s)
        if found is None:
            found = self._size_by_limit[job.time_limit_s] = size_factor(
                job, self.cluster_pes, self.config
            )
        return found
