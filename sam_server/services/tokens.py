"""Token verbs: list, revoke, rotate. Secrets are never shown again after creation.

Who may act on a token: its own user; the admin of the token user's tenant; the cluster admin.
A token the caller may not manage answers 404, like a job of another tenant (ids never leak).
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from sam_server.db.models import ApiToken, Tenant, User
from sam_server.db.types import as_utc, utcnow
from sam_server.errors import Conflict, NotFound
from sam_server.services.auth import Principal, hash_token, issue_token


def token_view(token: ApiToken) -> dict[str, object]:
    """The API object of a token: id, prefix, owner and times; never the secret or its hash."""
    user = token.user
    return {
        "id": token.id,
        "prefix": token.prefix,
        "user": user.name,
        "tenant": user.tenant.name if user.tenant is not None else None,
        "created_at": as_utc(token.created_at),
        "last_used_at": as_utc(token.last_used_at),
        "revoked_at": as_utc(token.revoked_at),
        "bootstrap": bool(token.bootstrap),
    }


def list_tokens(
    session: Session,
    *,
    principal: Principal,
    tenant: str | None = None,
    user: str | None = None,
    include_revoked: bool = False,
) -> list[ApiToken]:
    """The tokens the caller may manage (own; its tenant's for a tenant admin; all for the
    cluster admin), oldest first, optionally narrowed to a tenant and a user name."""
    query = select(ApiToken).join(User, ApiToken.user_id == User.id)
    if principal.is_tenant_admin:
        query = query.where(User.tenant_id == principal.tenant_id)
    elif not principal.is_admin:
        query = query.where(ApiToken.user_id == principal.user_id)
    if tenant:
        query = query.join(Tenant, User.tenant_id == Tenant.id).where(Tenant.name == tenant)
    if user:
        query = query.where(User.name == user)
    if not include_revoked:
        query = query.where(ApiToken.revoked_at.is_(None))
    return list(session.execute(query.order_by(ApiToken.id)).scalars())


def managed_token(session: Session, *, principal: Principal, token_id: int) -> ApiToken:
    """Token `token_id` if the caller may manage it, else 404 (never 403: ids must not leak)."""
    # Locked: two rotations of one token at once must not both issue a replacement.
    token = session.get(ApiToken, token_id, with_for_update={"of": ApiToken})
    if token is None or not _may_manage(principal, token):
        raise NotFound(f"no token {token_id}; `sam admin token list` shows yours")
    return token


def _may_manage(principal: Principal, token: ApiToken) -> bool:
    return token.user_id == principal.user_id or principal.manages_tenant(token.user.tenant_id)


def revoke(session: Session, *, principal: Principal, token_id: int) -> ApiToken:
    """Revoke a token at once; calls with it answer 401 from now on. Revoking twice is a no-op."""
    token = managed_token(session, principal=principal, token_id=token_id)
    _refuse_bootstrap(token, "revoke")
    if token.revoked_at is None:
        token.revoked_at = utcnow()
        session.flush()
    return token


def rotate(session: Session, *, principal: Principal, token_id: int) -> tuple[ApiToken, str]:
    """Revoke a live token and issue its user a new one; returns (new token row, its secret)."""
    token = managed_token(session, principal=principal, token_id=token_id)
    _refuse_bootstrap(token, "rotate")
    if token.revoked_at is not None:
        raise Conflict(f"token {token_id} is already revoked; rotate a live token")
    token.revoked_at = utcnow()
    secret = issue_token(session, user=token.user)
    session.flush()
    new = session.execute(
        select(ApiToken).where(ApiToken.token_hash == hash_token(secret))
    ).scalar_one()
    return new, secret


def _refuse_bootstrap(token: ApiToken, verb: str) -> None:
    if token.bootstrap:
        raise Conflict(
            f"token {token.id} is SAM_ADMIN_TOKEN; to {verb} it, start the server with a new "
            "SAM_ADMIN_TOKEN (the old one is revoked at start-up)"
        )
