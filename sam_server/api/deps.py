"""FastAPI dependencies: the database session and the calling principal."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from sam_server.db.session import transaction
from sam_server.services.auth import Principal, authenticate


def get_session(request: Request) -> Iterator[Session]:
    """One session per request: committed when the route returns, rolled back on error."""
    with transaction(request.app.state.sessions) as session:
        yield session


# scope="function": the commit happens before the response is sent. FastAPI's default for a
# dependency with yield ("request") ends it after the response, so a client could be told 201
# before the commit, read its own write too early (a token just created answered 401), or be
# told of a success whose commit then failed.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]


def principal_from_header(session: Session, header: str | None) -> Principal:
    """The principal of an `Authorization: Bearer` header, or 401."""
    scheme, _, token = (header or "").partition(" ")
    return authenticate(session, token=token.strip() if scheme.lower() == "bearer" else None)


def get_principal(request: Request, session: SessionDep) -> Principal:
    """The principal of the bearer token, or 401."""
    return principal_from_header(session, request.headers.get("authorization"))


PrincipalDep = Annotated[Principal, Depends(get_principal)]
