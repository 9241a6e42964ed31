"""Fair-share usage: charge running jobs' PE-seconds to their tenants and users, with decay."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from sam_server.db.models import Tenant, User
from sam_server.db.types import as_utc, utcnow
from sam_server.scheduling import update_usage
from sam_server.states import HOLDS_REGION


def charge_usage(session: Session, jobs: list[Any], *, half_life_s: float) -> None:
    """Advance every tenant's (and user's) decayed usage to now, adding the PEs held since."""
    now = utcnow()
    tenant_pes: dict[int, float] = defaultdict(float)
    user_pes: dict[int, float] = defaultdict(float)
    for job in jobs:
        if job.state in HOLDS_REGION and job.region_rows and job.region_cols:
            tenant_pes[job.tenant_id] += job.region_rows * job.region_cols
            user_pes[job.user_id] += job.region_rows * job.region_cols
    for tenant in session.execute(select(Tenant)).scalars():
        last = as_utc(tenant.usage_at) or now
        elapsed = max(0.0, (now - last).total_seconds())
        tenant.usage_pe_s = update_usage(
            tenant.usage_pe_s, tenant_pes[tenant.id], elapsed, half_life_s
        )
        tenant.usage_at = now
        users = session.execute(select(User).where(User.tenant_id == tenant.id)).scalars()
        for user in users:
            user.usage_pe_s = update_usage(user.usage_pe_s, user_pes[user.id], elapsed, half_life_s)
