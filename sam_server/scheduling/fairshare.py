"""Usage with half-life decay, and the fair-share factor of a tenant (and of a user in it).

Usage is measured in PE-seconds and decays with a half-life (default 7 days, as Slurm's
`PriorityDecayHalfLife`). The factor is Slurm's classic `F = 2^(-U/S)` with U the tenant's
fraction of all decayed usage and S its fraction of all shares: a tenant that used exactly its
share scores 0.5, one that used nothing scores 1, one that used far more than its share tends
to 0. Within a tenant, users are weighed the same way against equal user shares.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from sam_server.scheduling.model import PolicyJob, TenantState

SLOWDOWN_BOUND_S = 10.0
"""Bounded slowdown divides by max(run time, 10 s) so that tiny jobs do not dominate."""


def bounded_slowdown(wait_s: float, run_s: float, bound_s: float = SLOWDOWN_BOUND_S) -> float:
    """max(1, (wait + run) / max(run, bound))."""
    return max(1.0, (wait_s + run_s) / max(run_s, bound_s))


def slowdown_so_far(job: PolicyJob, now: float) -> float:
    """A job's bounded slowdown as it stands (its time limit standing for its run time): with
    the wait so far if it waits, with the wait it had if it runs."""
    begun = job.started_at if job.state == "running" and job.started_at is not None else now
    return bounded_slowdown(begun - job.submitted_at, job.time_limit_s)


def decay_usage(usage_pe_s: float, elapsed_s: float, half_life_s: float) -> float:
    """Usage after `elapsed_s` seconds of decay (no decay when half_life_s <= 0)."""
    if half_life_s <= 0 or elapsed_s <= 0:
        return usage_pe_s
    decayed: float = usage_pe_s * 0.5 ** (elapsed_s / half_life_s)
    return decayed


def update_usage(usage_pe_s: float, pes: float, seconds: float, half_life_s: float) -> float:
    """Usage after `seconds` more seconds during which `pes` PEs were held.

    The old usage decays over the interval, and the PE-seconds accrued inside it decay from the
    moment they were used (the exact integral), so updating once per minute or once per hour
    gives the same result.
    """
    if seconds <= 0:
        return usage_pe_s
    decayed = decay_usage(usage_pe_s, seconds, half_life_s)
    if half_life_s <= 0:
        return decayed + pes * seconds
    rate = math.log(2) / half_life_s
    return decayed + pes * (1.0 - math.exp(-rate * seconds)) / rate


def _factor(usage_fraction: float, share_fraction: float) -> float:
    """Classic fair share 2^(-U/S), in [0, 1]."""
    if share_fraction <= 0:
        return 0.0
    factor: float = 2.0 ** (-usage_fraction / share_fraction)
    return factor


def tenant_factors(tenants: Mapping[str, TenantState]) -> dict[str, float]:
    """Fair-share factor in [0, 1] of each tenant from its decayed usage and share."""
    total_usage = sum(max(0.0, t.usage_pe_s) for t in tenants.values())
    total_share = sum(max(0.0, t.quota.share) for t in tenants.values())
    factors = {}
    for name, t in tenants.items():
        u = max(0.0, t.usage_pe_s) / total_usage if total_usage > 0 else 0.0
        s = max(0.0, t.quota.share) / total_share if total_share > 0 else 0.0
        factors[name] = _factor(u, s)
    return factors


def user_factor(tenant: TenantState | None, user: str) -> float:
    """Fair-share factor in [0, 1] of `user` among the users of its tenant (equal user shares)."""
    if tenant is None or not tenant.user_usage_pe_s:
        return 1.0
    usage = tenant.user_usage_pe_s
    total = sum(max(0.0, v) for v in usage.values())
    if total <= 0:
        return 1.0
    users = len(usage) + (0 if user in usage else 1)
    return _factor(max(0.0, usage.get(user, 0.0)) / total, 1.0 / users)


def combined_factor(tenant_f: float, user_f: float, user_weight: float) -> float:
    """The job's fair-share factor: the tenant's, nudged by the user's within it; in [0, 1].

    The tenant's factor scales the whole value, so a tenant far over its share cannot climb back
    through its users; `user_weight` in [0, 1] is how much the user's factor counts.
    """
    w = min(1.0, max(0.0, user_weight))
    return tenant_f * ((1.0 - w) + w * user_f)
