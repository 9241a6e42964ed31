"""Request and response bodies for tenants and users."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from sam_server.schemas.numbers import INT32_MAX, INT64_MAX


class Quota(BaseModel):
    """Per-tenant limits; an omitted limit means no limit (share: 1)."""

    model_config = ConfigDict(extra="forbid")
    max_pes: int | None = Field(default=None, ge=1, le=INT64_MAX)
    max_running_jobs: int | None = Field(default=None, ge=0, le=INT32_MAX)
    max_queued_jobs: int | None = Field(default=None, ge=0, le=INT32_MAX)
    # bytes of project and data set chunks kept (None: the server's SAM_MAX_STORAGE_BYTES)
    max_storage_bytes: int | None = Field(default=None, ge=0, le=INT64_MAX)
    share: float = Field(default=1.0, gt=0, le=1e9, allow_inf_nan=False)


class Usage(BaseModel):
    running_jobs: int
    queued_jobs: int
    pes: int
    pe_seconds: float
    storage_bytes: int = 0  # project and data set chunks stored


class TenantCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$")
    quota: Quota = Field(default_factory=Quota)


class TenantRead(BaseModel):
    name: str
    quota: Quota
    usage: Usage


class UserCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
    role: Literal["user", "admin"] = "user"


class UserCreated(BaseModel):
    name: str
    tenant: str
    role: str
    token: str


class WhoAmI(BaseModel):
    name: str
    tenant: str | None
    role: str
    admin_of: Literal["cluster", "tenant"] | None = None  # what an admin role manages


class TokenRead(BaseModel):
    """A token without its secret: only the id and the first characters identify it."""

    id: int
    prefix: str
    user: str
    tenant: str | None
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None
    bootstrap: bool


class TokenRotated(TokenRead):
    token: str  # the new secret, shown only in this response
