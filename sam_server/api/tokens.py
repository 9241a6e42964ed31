"""Routes for API tokens: list, revoke, rotate (thin: `services.tokens` does the work)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, status

from sam_server.api.deps import PrincipalDep, SessionDep
from sam_server.schemas.numbers import INT32_MAX
from sam_server.schemas.tenants import TokenRead, TokenRotated
from sam_server.services import tokens as svc

router = APIRouter(prefix="/api/v1", tags=["tokens"])

# A token's id as `sam token list` shows it (an int4 column: 10^23 is a 422, not a 500).
TokenId = Annotated[int, Path(ge=1, le=INT32_MAX)]


@router.get("/tokens", response_model=list[TokenRead])
def list_tokens(
    session: SessionDep,
    principal: PrincipalDep,
    tenant: str | None = None,
    user: str | None = None,
    include_revoked: bool = False,
) -> list[dict[str, object]]:
    """The tokens the caller manages (own; its tenant's for a tenant admin; all for the cluster
    admin), without secrets."""
    rows = svc.list_tokens(
        session, principal=principal, tenant=tenant, user=user, include_revoked=include_revoked
    )
    return [svc.token_view(t) for t in rows]


@router.post("/tokens/{token_id}/revoke", response_model=TokenRead)
def revoke_token(
    token_id: TokenId, session: SessionDep, principal: PrincipalDep
) -> dict[str, object]:
    """Revoke a token; calls with it answer 401 from now on."""
    return svc.token_view(svc.revoke(session, principal=principal, token_id=token_id))


@router.post(
    "/tokens/{token_id}/rotate", status_code=status.HTTP_201_CREATED, response_model=TokenRotated
)
def rotate_token(
    token_id: TokenId, session: SessionDep, principal: PrincipalDep
) -> dict[str, object]:
    """Revoke a token and issue its user a new one, shown only in this response."""
    token, secret = svc.rotate(session, principal=principal, token_id=token_id)
    return dict(svc.token_view(token), token=secret)
