"""Principals and API tokens: random, prefixed, stored only as a SHA-256 hash, shown once."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import bindparam, select, update
from sqlalchemy.orm import Session

from sam_server.db.models import ApiToken, Tenant, User
from sam_server.db.types import as_utc, utcnow
from sam_server.errors import Forbidden, Unauthorized

TOKEN_PREFIX = "sam_"
ADMIN_NAME = "admin"
# Admins of this tenant are cluster admins with a tenant of their own (they can submit urgent jobs).
SYSTEM_TENANT = "system"
LAST_USED_EVERY = timedelta(seconds=60)  # how stale a token's last_used_at may get


@dataclass(frozen=True)
class TenantQuota:
    """The caller's tenant limits, read together with the token (None = no limit)."""

    max_pes: int | None
    max_running_jobs: int | None
    max_queued_jobs: int | None
    share: float


@dataclass(frozen=True)
class Principal:
    """Who is calling: a user of a tenant (role user or admin), or a cluster admin (no tenant).

    Two kinds of admin: the cluster admin (the SAM_ADMIN_TOKEN principal, or a user with role
    admin in the `system` tenant) manages tenants, quotas and urgent priority; a tenant admin
    (role admin inside any other tenant) manages only its own tenant's users and tokens.
    """

    user_id: int
    name: str
    role: str
    tenant_id: int | None
    tenant: str | None
    quota: TenantQuota | None = None
    token_id: int | None = None

    @property
    def is_admin(self) -> bool:
        """True only for the cluster admin: every cluster-wide power checks this."""
        return self.role == "admin" and (self.tenant_id is None or self.tenant == SYSTEM_TENANT)

    @property
    def is_tenant_admin(self) -> bool:
        """An admin of one tenant: manages that tenant's users and tokens, nothing more."""
        return self.role == "admin" and not self.is_admin

    def manages_tenant(self, tenant_id: int | None) -> bool:
        """Whether this principal may manage the users and tokens of tenant `tenant_id`."""
        return self.is_admin or (self.is_tenant_admin and tenant_id == self.tenant_id)


def hash_token(token: str) -> str:
    """The stored form of a token (tokens are high-entropy, so a fast hash is right)."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    """A fresh token: prefix + 32 random bytes, URL-safe."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def issue_token(
    session: Session, *, user: User, token: str | None = None, bootstrap: bool = False
) -> str:
    """Store a token for `user` (a new random one unless given) and return it in clear, once."""
    token = token or new_token()
    session.add(
        ApiToken(
            user_id=user.id, token_hash=hash_token(token), prefix=token[:8], bootstrap=bootstrap
        )
    )
    return token


# One statement per request: token, user and tenant limits together (every call pays for this).
_AUTH_QUERY = (
    select(
        ApiToken.token_hash,
        ApiToken.revoked_at,
        ApiToken.id,
        ApiToken.last_used_at,
        User.id,
        User.name,
        User.role,
        User.tenant_id,
        Tenant.name,
        Tenant.max_pes,
        Tenant.max_running_jobs,
        Tenant.max_queued_jobs,
        Tenant.share,
    )
    .join(User, ApiToken.user_id == User.id)
    .outerjoin(Tenant, User.tenant_id == Tenant.id)
    .where(ApiToken.token_hash == bindparam("digest"))
)  # built once: the per-request cost is the bound digest, not a new statement and cache key


def authenticate(session: Session, *, token: str | None) -> Principal:
    """The principal owning `token`, or `Unauthorized`."""
    if not token:
        raise Unauthorized(
            "send 'Authorization: Bearer <token>'; `sam admin user create` makes one"
        )
    digest = hash_token(token)
    row = session.execute(_AUTH_QUERY, {"digest": digest}).first()
    if row is None or row[1] is not None or not hmac.compare_digest(row[0], digest):
        raise Unauthorized("the token is unknown or revoked; ask an admin for a new one")
    _touch(session, row[2], row[3])
    user_id, name, role, tenant_id, tenant = row[4:9]
    quota = TenantQuota(row[9], row[10], row[11], row[12]) if tenant_id is not None else None
    return Principal(user_id, name, role, tenant_id, tenant, quota, token_id=row[2])


def _touch(session: Session, token_id: int, last_used: datetime | None) -> None:
    """Stamp the token's last use, at most once per LAST_USED_EVERY (a cheap UPDATE)."""
    now = utcnow()
    seen = as_utc(last_used)
    if seen is None or now - seen >= LAST_USED_EVERY:
        session.execute(update(ApiToken).where(ApiToken.id == token_id).values(last_used_at=now))


def revoke_token(session: Session, *, token: str) -> None:
    """Revoke `token`; later calls with it get 401."""
    row = session.execute(
        select(ApiToken).where(ApiToken.token_hash == hash_token(token))
    ).scalar_one_or_none()
    if row is not None:
        row.revoked_at = utcnow()


def require_admin(principal: Principal) -> None:
    """Raise `Forbidden` unless `principal` is the cluster admin."""
    if not principal.is_admin:
        who = "a tenant admin manages only its tenant's users and tokens; " * (
            principal.is_tenant_admin
        )
        raise Forbidden(f"this call is for the cluster admin only; {who}ask the cluster admin")


def require_manager(principal: Principal) -> None:
    """Raise `Forbidden` unless `principal` is the cluster admin or a tenant admin."""
    if not (principal.is_admin or principal.is_tenant_admin):
        raise Forbidden("this call is for tenant admins and the cluster admin")


def bootstrap_admin(session: Session, *, token: str) -> None:
    """Make sure the admin principal exists and `token` (SAM_ADMIN_TOKEN) authenticates it."""
    admin = session.execute(
        select(User).where(User.name == ADMIN_NAME, User.tenant_id.is_(None))
    ).scalar_one_or_none()
    if admin is None:
        admin = User(name=ADMIN_NAME, tenant_id=None, role="admin")
        session.add(admin)
        session.flush()
    digest = hash_token(token)
    current = session.execute(
        select(ApiToken).where(ApiToken.token_hash == digest)
    ).scalar_one_or_none()
    if current is None:
        issue_token(session, user=admin, token=token, bootstrap=True)
    elif current.user_id == admin.id:
        current.bootstrap = True
    # A new SAM_ADMIN_TOKEN replaces the old one: every other live token of the bootstrap
    # principal is revoked, so a leaked admin token dies with a restart under a new value.
    session.execute(
        update(ApiToken)
        .where(
            ApiToken.user_id == admin.id,
            ApiToken.token_hash != digest,
            ApiToken.revoked_at.is_(None),
        )
        .values(revoked_at=utcnow())
    )


def tenant_of(session: Session, principal: Principal) -> Tenant:
    """The caller's tenant; admins without a tenant cannot act as one."""
    if principal.tenant_id is None:
        raise Forbidden("the admin principal has no tenant; submit jobs with a tenant user's token")
    tenant = session.get(Tenant, principal.tenant_id)
    assert tenant is not None
    return tenant
