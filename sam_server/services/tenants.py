"""Tenants, their quotas and usage, and their users."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from sam_server.db.models import Job, Tenant, User
from sam_server.errors import AlreadyExists, TenantNotFound
from sam_server.schemas.tenants import Quota, TenantRead, Usage, UserCreated
from sam_server.services.auth import Principal, issue_token
from sam_server.services.transitions import TERMINAL
from sam_server.states import HOLDS_REGION


def _add_new(session: Session, row: Tenant | User, taken: str) -> None:
    """Insert `row`; a name already taken (the unique constraint) is AlreadyExists(`taken`)."""
    session.add(row)
    try:
        session.flush()
    except IntegrityError as exc:
        session.rollback()
        raise AlreadyExists(taken) from exc


def create_tenant(session: Session, *, name: str, quota: Quota) -> Tenant:
    """A new tenant with `quota`; a duplicate name is a 409."""
    tenant = Tenant(name=name)
    apply_quota(tenant, quota)
    _add_new(session, tenant, f"tenant {name!r} already exists")
    return tenant


def apply_quota(tenant: Tenant, quota: Quota) -> None:
    """Copy `quota` onto the tenant row."""
    tenant.max_pes = quota.max_pes
    tenant.max_running_jobs = quota.max_running_jobs
    tenant.max_queued_jobs = quota.max_queued_jobs
    tenant.max_storage_bytes = quota.max_storage_bytes
    tenant.share = quota.share


def get_tenant(session: Session, *, principal: Principal, name: str) -> Tenant:
    """Tenant `name` if the caller may see it (admins: all; users: their own), else 404."""
    if not principal.is_admin and principal.tenant != name:
        raise TenantNotFound(f"no tenant {name!r}")
    tenant = session.execute(select(Tenant).where(Tenant.name == name)).scalar_one_or_none()
    if tenant is None:
        raise TenantNotFound(f"no tenant {name!r}; `sam admin tenant create {name}` makes one")
    return tenant


def list_tenants(session: Session, *, principal: Principal) -> list[Tenant]:
    """All tenants for admins; a user's own tenant otherwise."""
    query = select(Tenant).order_by(Tenant.name)
    if not principal.is_admin:
        query = query.where(Tenant.id == principal.tenant_id)
    return list(session.execute(query).scalars())


def tenant_usage(session: Session, tenant: Tenant) -> Usage:
    """Current running/queued counts and PEs held by the tenant's running jobs."""
    running = HOLDS_REGION
    rows = session.execute(
        select(
            Job.state, func.count(), func.coalesce(func.sum(Job.region_rows * Job.region_cols), 0)
        )
        .where(Job.tenant_id == tenant.id, Job.state.not_in([s.value for s in TERMINAL]))
        .group_by(Job.state)
    ).all()
    n_running = sum(n for state, n, _ in rows if state in running)
    n_queued = sum(n for state, n, _ in rows if state not in running)
    pes = sum(int(p or 0) for state, _, p in rows if state in running)
    return Usage(
        running_jobs=n_running,
        queued_jobs=n_queued,
        pes=pes,
        pe_seconds=tenant.usage_pe_s,
        storage_bytes=tenant.storage_bytes or 0,
    )


def read_tenant(session: Session, tenant: Tenant) -> TenantRead:
    """The API view of a tenant: quota and current usage."""
    quota = Quota(
        max_pes=tenant.max_pes,
        max_running_jobs=tenant.max_running_jobs,
        max_queued_jobs=tenant.max_queued_jobs,
        max_storage_bytes=tenant.max_storage_bytes,
        share=tenant.share,
    )
    return TenantRead(name=tenant.name, quota=quota, usage=tenant_usage(session, tenant))


def create_user(session: Session, *, tenant: Tenant, name: str, role: str) -> UserCreated:
    """A new user of `tenant` with a fresh token, returned in clear only here."""
    user = User(name=name, tenant_id=tenant.id, role=role)
    _add_new(session, user, f"user {name!r} already exists in tenant {tenant.name!r}")
    token = issue_token(session, user=user)
    return UserCreated(name=name, tenant=tenant.name, role=role, token=token)
