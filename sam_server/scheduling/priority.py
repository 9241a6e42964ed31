"""Job priority: a weighted sum of factors, each in [0, 1]. Higher runs sooner, always.

    priority = w_class * class + w_fair_share * fair_share + w_age * age + w_size * size

- class: low 0, normal 1/3, high 2/3, urgent 1.
- fair_share: the tenant's classic 2^(-U/S) factor nudged by the user's (see `fairshare`).
- age: time since the job became eligible over `age_cap_s`, capped at 1.
- size: with `favor_small` (default) 1 for tiny jobs falling to 0 on a log scale of the job's
  requested PE-seconds against the whole cluster for `size_horizon_s`; otherwise PEs / cluster PEs.
  The bonus fades as the job ages (size x (1 - age)), so among jobs that reached the age cap
  seniority alone decides (ties go to the earlier eligible time). Without the fade, a backlog
  longer than the age cap would sort old jobs smallest-first again, and a large job could wait
  behind an endless supply of capped small ones; with it, every job is eventually the oldest.

The default weights (10000, 5000, 1000, 500) follow the anchors' recommendation: class dominates,
then fair share; age outweighs the fading size bonus, so no job starves behind small ones.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from sam_server.scheduling.fairshare import combined_factor, tenant_factors, user_factor
from sam_server.scheduling.model import (
    CLASS_RANK,
    Job,
    PolicyConfig,
    PriorityBreakdown,
    TenantState,
)

FACTOR_NAMES = ("priority_class", "fair_share", "age", "size")


def size_factor(job: Job, cluster_pes: int, config: PolicyConfig) -> float:
    """The job-size factor in [0, 1] (see the module docstring)."""
    if cluster_pes <= 0:
        return 0.0
    if not config.favor_small:
        return min(1.0, job.pes / cluster_pes)
    work = job.pes * max(1.0, job.time_limit_s)
    ref = cluster_pes * max(1.0, config.size_horizon_s)
    return max(0.0, 1.0 - math.log1p(work) / math.log1p(ref))


def age_factor(job: Job, now: float, config: PolicyConfig) -> float:
    """Eligible wait over the age cap, in [0, 1]."""
    if config.age_cap_s <= 0:
        return 0.0
    return min(1.0, max(0.0, now - job.eligible_at) / config.age_cap_s)


class PriorityCalculator:
    """Computes priority breakdowns for the jobs of one snapshot (fair-share factors cached)."""

    def __init__(
        self, tenants: Mapping[str, TenantState], cluster_pes: int, config: PolicyConfig
    ) -> None:
        self.tenants = tenants
        self.cluster_pes = cluster_pes
        self.config = config
        self._tenant_f = tenant_factors(tenants)
        self._user_f: dict[tuple[str, str], float] = {}

    def fair_share(self, job: Job) -> float:
        """The job's fair-share factor in [0, 1]; a tenant unknown to the snapshot scores 1."""
        key = (job.tenant, job.user)
        if key not in self._user_f:
            t_f = self._tenant_f.get(job.tenant, 1.0)
            u_f = user_factor(self.tenants.get(job.tenant), job.user)
            self._user_f[key] = combined_factor(t_f, u_f, self.config.user_share_weight)
        return self._user_f[key]

    def breakdown(self, job: Job, now: float) -> PriorityBreakdown:
        """Total priority of `job` at `now` with every factor and its weighted value."""
        w = self.config.weights
        age = age_factor(job, now, self.config)
        factors = {
            "priority_class": CLASS_RANK.get(job.priority_class, 1) / 3.0,
            "fair_share": self.fair_share(job),
            "age": age,
            "size": size_factor(job, self.cluster_pes, self.config) * (1.0 - age),
        }
        weights = (w.priority_class, w.fair_share, w.age, w.size)
        weighted = {
            name: weight * factors[name] for name, weight in zip(FACTOR_NAMES, weights, strict=True)
        }
        return PriorityBreakdown(sum(weighted.values()), factors, weighted)
