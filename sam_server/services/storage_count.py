"""A tenant's storage: the store of its uploads and the count of its stored bytes against its
limit (the `max_storage_bytes` quota, else the setting), shared by uploads, data sets and the
collection of old project versions."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from sam_server.config import Settings
from sam_server.db.models import Tenant
from sam_server.errors import PayloadTooLarge
from sam_server.storage.blobs import BlobStore, LocalBlobStore


def blob_store(settings: Settings) -> BlobStore:
    """The storage of uploaded files (the data directory's; one interface, see blobs.py)."""
    return LocalBlobStore(settings.data_dir)


def gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def storage_limit(session: Session, settings: Settings, tenant_id: int) -> tuple[int, int]:
    """(bytes stored, the most the tenant may store) for the tenant."""
    row = session.execute(
        select(Tenant.storage_bytes, Tenant.max_storage_bytes).where(Tenant.id == tenant_id)
    ).one()
    limit = settings.storage.max_storage_bytes if row[1] is None else int(row[1])
    return int(row[0] or 0), limit


def over_storage(used: int, adding: int, limit: int, source: str) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"storage limit: the tenant stores {used} bytes ({gib(used)}) and this upload adds "
        f"{adding} bytes ({gib(adding)}), over its {source} of {limit} bytes ({gib(limit)}); "
        "`sam data du` shows what is stored (the project versions of jobs that have not ended "
        "included) and `sam data rm` frees a data set"
    )


def limit_source(session: Session, tenant_id: int) -> str:
    own = session.execute(
        select(Tenant.max_storage_bytes).where(Tenant.id == tenant_id)
    ).scalar_one()
    return "quota max_storage_bytes" if own is not None else "limit SAM_MAX_STORAGE_BYTES"


def count_storage(session: Session, settings: Settings, tenant_id: int, delta: int) -> None:
    """Add `delta` bytes to the tenant's stored bytes; a 413 naming the limit and the usage
    when that goes past it (one UPDATE, so concurrent uploads cannot both pass the limit)."""
    if delta <= 0:
        session.execute(
            update(Tenant)
            .where(Tenant.id == tenant_id)
            .values(storage_bytes=Tenant.storage_bytes + delta)
        )
        return
    _, limit = storage_limit(session, settings, tenant_id)
    done = session.execute(
        update(Tenant)
        .where(Tenant.id == tenant_id)
        .where(Tenant.storage_bytes + delta <= limit)
        .values(storage_bytes=Tenant.storage_bytes + delta)
    )
    if getattr(done, "rowcount", 1) == 0:
        used, limit = storage_limit(session, settings, tenant_id)
        raise over_storage(used, delta, limit, limit_source(session, tenant_id))
