"""What a tenant's store keeps, and freeing the rest (docs/projects.md, "How long a project
version is kept").

A project version (a manifest no data set names) is kept while a job naming it has not ended,
and for `storage.project_retention_days` after the later of its last claim (a commit of it, a
submit naming it) and its last job's end. Past that, `collect_tenant` drops it, then frees every
chunk no kept manifest names, with its assembled files and its read-only tree; the freed bytes
leave the tenant's stored bytes. The scheduler runs `collect` every `storage.storage_gc_every_s`.

Uploads deduplicate by content, so a chunk being freed may be one an upload is counting on: the
server said "you have it" and the client did not send it. Three things keep that safe:

- the tenant's store lock: uploads, commits and submits hold it shared, collection exclusive,
  so a chunk is either freed before an upload looks at it (then it is missing and sent) or
  claimed by the upload before collection looks at it;
- claims: `missing`, a stored chunk, a commit and a submit mark what they count on; collection
  frees nothing claimed in the last `storage.upload_grace_s` (between a client's question and
  its commit);
- the client asks again before it commits and sends what went missing meanwhile; a commit is
  checked under the lock, so a committed manifest's chunks are all there.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from sam_server.config import Settings
from sam_server.db.models import Job, Tenant
from sam_server.services.storage_count import blob_store, count_storage
from sam_server.states import TERMINAL
from sam_server.storage.blobs import BlobStore, assembled_name, is_assembled
from sam_server.storage.layout import dataset_digest, tenant_datasets_root, tenant_projects_root


@dataclass
class Collected:
    """What one collection freed."""

    projects: int = 0
    chunks: int = 0
    freed_bytes: int = 0


def jobs_using(session: Session, tenant_id: int, ended_after: datetime) -> set[str]:
    """The projects named by the tenant's jobs that have not ended or ended after `ended_after`."""
    project = Job.spec["project"].as_string()
    ended = func.coalesce(Job.finished_at, Job.updated_at)
    rows = session.execute(
        select(project)
        .distinct()
        .where(Job.tenant_id == tenant_id)
        .where(project.is_not(None))
        .where(or_(Job.state.notin_([s.value for s in TERMINAL]), ended >= ended_after))
    )
    return {str(digest) for (digest,) in rows if digest}


def dataset_digests(settings: Settings, tenant: str) -> set[str]:
    """The manifests the tenant's data sets are built from. A folder moved aside (a data set
    replaced or removed, '.NAME.old-*', '.NAME.rm-*') no longer counts; one being built
    ('.NAME.*') is never seen here, as it is built and swapped in under the store lock."""
    root = tenant_datasets_root(settings.data_dir, tenant)
    if not root.is_dir():
        return set()
    return {
        digest
        for folder in root.iterdir()
        if not folder.name.startswith(".") and (digest := dataset_digest(folder))
    }


def collect(settings: Settings, session: Session) -> dict[str, Collected]:
    """Collect every tenant's store; {tenant: what was freed} for those where something was."""
    done = {}
    for tenant_id, name in session.execute(select(Tenant.id, Tenant.name)).all():
        result = collect_tenant(session, settings, name, tenant_id)
        if result.projects or result.chunks:
            done[name] = result
    return done


def collect_tenant(
    session: Session,
    settings: Settings,
    tenant: str,
    tenant_id: int,
    *,
    retention_s: float | None = None,
) -> Collected:
    """Drop the tenant's project versions past their retention (`retention_s`, default the
    setting's) and free what nothing kept names; what was freed."""
    store = blob_store(settings)
    if not store.manifests(tenant) and not store.chunk_times(tenant):
        return Collected()
    now = time.time()
    if retention_s is None:
        retention_s = settings.storage.project_retention_days * 86400
    # The jobs are read before the lock: a submit claims its project (under the lock) before
    # its job is written, so a job written after this read has a claim collection will see.
    in_use = jobs_using(session, tenant_id, datetime.fromtimestamp(now - retention_s, UTC))
    session.commit()  # no database transaction is held while the lock is awaited
    claimed_after = now - settings.storage.upload_grace_s
    kept_after = now - max(retention_s, settings.storage.upload_grace_s)
    with store.lock(tenant, exclusive=True):
        named = dataset_digests(settings, tenant)
        dropped = [
            digest
            for digest in store.manifests(tenant)
            if digest not in named
            and digest not in in_use
            and (store.manifest_time(tenant, digest) or now) < kept_after
        ]
        for digest in dropped:
            store.drop_manifest(tenant, digest)
        result = _sweep(settings, store, tenant, claimed_after)
    result.projects = len(dropped)
    _uncount(session, settings, tenant_id, result.freed_bytes)
    return result


def release_manifest(
    session: Session, settings: Settings, tenant: str, tenant_id: int, digest: str
) -> int:
    """Forget manifest `digest` (a data set's, replaced or removed) and free its chunks that no
    kept manifest names, at once (the one who asked sees their storage drop); the bytes freed.
    It stays when a data set is still built from it or it is also a project version in use."""
    store = blob_store(settings)
    retention_s = settings.storage.project_retention_days * 86400
    in_use = jobs_using(session, tenant_id, datetime.fromtimestamp(time.time() - retention_s, UTC))
    session.commit()
    with store.lock(tenant, exclusive=True):
        if digest in dataset_digests(settings, tenant) or digest in in_use:
            return 0
        files = store.read_manifest(tenant, digest) or []
        store.drop_manifest(tenant, digest)
        mine = {chunk for entry in files for chunk in entry.chunks}
        result = _sweep(settings, store, tenant, None, only=mine)
    _uncount(session, settings, tenant_id, result.freed_bytes)
    return result.freed_bytes


def _sweep(
    settings: Settings,
    store: BlobStore,
    tenant: str,
    claimed_after: float | None,
    only: set[str] | None = None,
) -> Collected:
    """Free the chunks (of `only`, or all) that no stored manifest names and that were not
    claimed after `claimed_after` (None: however recently), the assembled files no manifest
    lists, the trees of projects no longer stored and (in a full sweep) chunk bodies whose
    upload stopped half-way. Called under the exclusive lock."""
    kept_chunks: set[str] = set()
    kept_files: set[str] = set()
    manifests = store.manifests(tenant)
    for digest in manifests:
        for entry in store.read_manifest(tenant, digest) or []:
            kept_chunks.update(entry.chunks)
            if is_assembled(entry):
                kept_files.add(assembled_name(entry))
    result = Collected()
    for chunk, claimed_at in store.chunk_times(tenant).items():
        if chunk in kept_chunks or (only is not None and chunk not in only):
            continue
        if claimed_after is not None and claimed_at >= claimed_after:
            continue
        result.freed_bytes += store.drop_chunk(tenant, chunk)
        result.chunks += 1
    for name in store.assembled(tenant):
        if name not in kept_files:
            store.drop_file(tenant, name)
    if claimed_after is not None:  # bodies of chunks whose upload died mid-way
        for staged in store.staging(tenant).iterdir():
            with contextlib.suppress(FileNotFoundError):
                if staged.stat().st_mtime < claimed_after:
                    staged.unlink()
    trees = tenant_projects_root(settings.data_dir, tenant)
    if trees.is_dir():
        stored = set(manifests)
        for tree in trees.iterdir():
            if not tree.name.startswith(".") and tree.name not in stored:
                shutil.rmtree(tree, ignore_errors=True)
    return result


def _uncount(session: Session, settings: Settings, tenant_id: int, freed: int) -> None:
    if freed:
        count_storage(session, settings, tenant_id, -freed)
        session.commit()
