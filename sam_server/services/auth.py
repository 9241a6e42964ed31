"""Principals and API tokens: random, prefixed, stored only as a SHA-256 hash, shown once."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from sam_server.db.models import ApiToken, Tenant, User
from sam_server.db.types import utcnow
from sam_server.errors import Forbidden, Unauthorized

TOKEN_PREFIX = "sam_"
ADMIN_NAME = "admin"


@dataclass(frozen=True)
class TenantQuota:
    """The caller's tenant limits, read together with the token (None = no limit)."""

    max_pes: int | None
    max_running_jobs: int | None
    max_queued_jobs: int | None
    share: float


@dataclass(frozen=True)
class Principal:
    """Who is calling: a user of a tenant, or an admin (who may have no tenant)."""

    user_id: int
    name: str
    role: str
    tenant_id: int | None
    tenant: str | None
    quota: TenantQuota | None = None

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


def hash_token(token: str) -> str:
    """The stored form of a token (tokens are high-entropy, so a fast hash is right)."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    """A fresh token: prefix + 32 random bytes, URL-safe."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def issue_token(session: Session, *, user: User, token: str | None = None) -> str:
    """Store a token for `user` (a new random one unless given) and return it in clear, once."""
    token = token or new_token()
    session.add(ApiToken(user_id=user.id, token_hash=hash_token(token), prefix=token[:8]))
    return token


# One statement per request: token, user and tenant limits together (every call pays for this).
_AUTH_QUERY = (
    select(
        ApiToken.token_hash,
        ApiToken.revoked_at,
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
    quota = TenantQuota(row[7], row[8], row[9], row[10]) if row[5] is not None else None
    return Principal(row[2], row[3], row[4], row[5], row[6], quota)


def revoke_token(session: Session, *, token: str) -> None:
    """Revoke `token`; later calls with it get 401."""
    row = session.execute(
        select(ApiToken).where(ApiToken.token_hash == hash_token(token))
    ).scalar_one_or_none()
    if row is not None:
        row.revoked_at = utcnow()


def require_admin(principal: Principal) -> None:
    """Raise `Forbidden` unless `principal` is an admin."""
    if not principal.is_admin:
        raise Forbidden("this call is for admins only")


def bootstrap_admin(session: Session, *, token: str) -> None:
    """Make sure the admin principal exists and `token` (SAM_ADMIN_TOKEN) authenticates it."""
    admin = session.execute(
        select(User).where(User.name == ADMIN_NAME, User.tenant_id.is_(None))
    ).scalar_one_or_none()
    if admin is None:
        admin = User(name=ADMIN_NAME, tenant_id=None, role="admin")
        session.add(admin)
        session.flush()
    exists = session.execute(
        select(ApiToken.id).where(ApiToken.token_hash == hash_token(token))
    ).first()
    if exists is None:
        issue_token(session, user=admin, token=token)


def tenant_of(session: Session, principal: Principal) -> Tenant:
    """The caller's tenant; admins without a tenant cannot act as one."""
    if principal.tenant_id is None:
        raise Forbidden("the admin principal has no tenant; submit jobs with a tenant user's token")
    tenant = session.get(Tenant, principal.tenant_id)
    assert tenant is not None
    return tenant
