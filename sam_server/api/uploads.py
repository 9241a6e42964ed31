"""Routes for uploads: chunks, projects and data sets (docs/projects.md; thin: services do it)."""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Request, status
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from sam_server.api.deps import PrincipalDep, SessionDep
from sam_server.services import dataset_store, uploads
from sam_server.services.auth import Principal, tenant_of

router = APIRouter(prefix="/api/v1", tags=["uploads"])
SHA256 = r"^[0-9a-f]{64}$"


class ChunkRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sha256: str = Field(pattern=SHA256)
    size: int = Field(ge=0)


class ChunkQuery(BaseModel):
    """The chunks a client is about to send; the answer names those the tenant lacks."""

    model_config = ConfigDict(extra="forbid")
    chunks: list[ChunkRef] = Field(max_length=1_000_000)


class FileRow(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str = Field(min_length=1, max_length=uploads.MAX_PATH_CHARS)
    size: int = Field(ge=0)
    sha256: str = Field(pattern=SHA256)
    chunks: list[Annotated[str, StringConstraints(pattern=SHA256)]] = Field(max_length=1_000_000)


class ManifestBody(BaseModel):
    """Every file of a project or data set: its path, size, SHA-256 and chunks' SHA-256s."""

    model_config = ConfigDict(extra="forbid")
    files: list[FileRow] = Field(max_length=1_000_000)


def _tenant(session: Any, principal: Principal) -> tuple[str, int]:
    tenant = tenant_of(session, principal)
    return tenant.name, tenant.id


@router.post("/uploads/missing")
def missing(
    body: ChunkQuery, request: Request, session: SessionDep, principal: PrincipalDep
) -> dict[str, Any]:
    """Which of the chunks the caller's tenant has not stored (send those, then commit)."""
    name, tenant_id = _tenant(session, principal)
    settings = request.app.state.settings
    return uploads.missing_chunks(session, settings, name, tenant_id, body.chunks)


@router.put("/uploads/chunks/{digest}")
async def put_chunk(
    digest: str, request: Request, session: SessionDep, principal: PrincipalDep
) -> dict[str, Any]:
    """Store one chunk (the raw body), checked against the SHA-256 in the path. The body goes to
    disk as it arrives, hashed on the way (services/uploads.py IncomingChunk)."""
    name, tenant_id = _tenant(session, principal)
    settings = request.app.state.settings
    incoming = uploads.IncomingChunk(settings, name, digest)
    try:
        async for piece in request.stream():
            incoming.write(piece)
        work = partial(uploads.store_chunk, session, settings, name, tenant_id, incoming)
        result: dict[str, Any] = await anyio.to_thread.run_sync(work)
    finally:
        incoming.discard()
    return result


@router.post("/projects", status_code=status.HTTP_201_CREATED)
def commit_project(
    body: ManifestBody, request: Request, session: SessionDep, principal: PrincipalDep
) -> dict[str, Any]:
    """Commit a project from uploaded chunks: `{digest, files, bytes}`; a job names the digest
    in `spec.project`."""
    name, _ = _tenant(session, principal)
    return uploads.commit_project(request.app.state.settings, name, body.files)


@router.get("/datasets")
def list_datasets(request: Request, session: SessionDep, principal: PrincipalDep) -> dict[str, Any]:
    """The tenant's data sets, the shared ones it may use, and its storage use."""
    name, tenant_id = _tenant(session, principal)
    return dataset_store.list_datasets(session, request.app.state.settings, name, tenant_id)


@router.put("/datasets/{dataset}")
def put_dataset(
    dataset: str,
    body: ManifestBody,
    request: Request,
    session: SessionDep,
    principal: PrincipalDep,
) -> dict[str, Any]:
    """Create or replace a data set from uploaded chunks."""
    name, tenant_id = _tenant(session, principal)
    settings = request.app.state.settings
    return dataset_store.put_dataset(session, settings, name, tenant_id, dataset, body.files)


@router.delete("/datasets/{dataset}")
def delete_dataset(
    dataset: str, request: Request, session: SessionDep, principal: PrincipalDep
) -> dict[str, Any]:
    """Delete a data set; frees the chunks no other data set or project uses."""
    name, tenant_id = _tenant(session, principal)
    settings = request.app.state.settings
    return dataset_store.remove_dataset(session, settings, name, tenant_id, dataset)
