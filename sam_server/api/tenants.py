"""Routes for tenants, users and whoami (thin: the services do the work)."""

from __future__ import annotations

from fastapi import APIRouter, status

from sam_server.api.deps import PrincipalDep, SessionDep
from sam_server.schemas.tenants import (
    Quota,
    TenantCreate,
    TenantRead,
    UserCreate,
    UserCreated,
    WhoAmI,
)
from sam_server.services import tenants as svc
from sam_server.services.auth import require_admin, require_manager

router = APIRouter(prefix="/api/v1", tags=["tenants"])


@router.post("/tenants", status_code=status.HTTP_201_CREATED, response_model=TenantRead)
def create_tenant(body: TenantCreate, session: SessionDep, principal: PrincipalDep) -> TenantRead:
    """Create a tenant with its quota (admin)."""
    require_admin(principal)
    tenant = svc.create_tenant(session, name=body.name, quota=body.quota)
    return svc.read_tenant(session, tenant)


@router.get("/tenants", response_model=list[TenantRead])
def list_tenants(session: SessionDep, principal: PrincipalDep) -> list[TenantRead]:
    """All tenants (admin), or the caller's own."""
    return [svc.read_tenant(session, t) for t in svc.list_tenants(session, principal=principal)]


@router.get("/tenants/{name}", response_model=TenantRead)
def get_tenant(name: str, session: SessionDep, principal: PrincipalDep) -> TenantRead:
    """One tenant with its quota and current usage."""
    return svc.read_tenant(session, svc.get_tenant(session, principal=principal, name=name))


@router.put("/tenants/{name}/quota", response_model=TenantRead)
def set_quota(name: str, body: Quota, session: SessionDep, principal: PrincipalDep) -> TenantRead:
    """Replace a tenant's quota (admin)."""
    require_admin(principal)
    tenant = svc.get_tenant(session, principal=principal, name=name)
    svc.apply_quota(tenant, body)
    session.flush()
    return svc.read_tenant(session, tenant)


@router.post(
    "/tenants/{name}/users", status_code=status.HTTP_201_CREATED, response_model=UserCreated
)
def create_user(
    name: str, body: UserCreate, session: SessionDep, principal: PrincipalDep
) -> UserCreated:
    """Create a user in a tenant (the cluster admin, or that tenant's admin); the token is shown
    only in this response."""
    require_manager(principal)
    tenant = svc.get_tenant(session, principal=principal, name=name)
    return svc.create_user(session, tenant=tenant, name=body.name, role=body.role)


@router.get("/whoami", response_model=WhoAmI, response_model_exclude_unset=True)
def whoami(principal: PrincipalDep) -> WhoAmI:
    """The calling principal; admins also see `admin_of` (cluster or tenant)."""
    me = WhoAmI(name=principal.name, tenant=principal.tenant, role=principal.role)
    if principal.role == "admin":
        me.admin_of = "cluster" if principal.is_admin else "tenant"
    return me
