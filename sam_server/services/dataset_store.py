"""A tenant's own data sets: `sam data put / ls / rm / du` (docs/data.md).

A data set is stored as a project is (chunks, then a manifest: services/uploads.py) and built
as a read-only tree at the folder `datasets.resolve_dataset` binds at /datasets/NAME.
Replacing or removing one frees the chunks no other data set or project of the tenant uses.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from sam_server.config import Settings
from sam_server.errors import InvalidSpec, NotFound
from sam_server.schemas.job_spec import DATASET_NAME
from sam_server.services.uploads import blob_store, check_manifest, count_storage, storage_limit
from sam_server.storage.blobs import BlobError, assembled_name, manifest_bytes
from sam_server.storage.layout import tenant_dataset_dir, tenant_datasets_root

MANIFEST = "manifest"  # beside files/: the digest of the data set's manifest


def _check_name(name: str) -> None:
    if not re.match(DATASET_NAME, name):
        raise InvalidSpec(
            f"data set name {name!r}: use letters, digits, '_', '-' and '.' (at most 64, not "
            "starting with '.')"
        )


def put_dataset(
    session: Session, settings: Settings, tenant: str, tenant_id: int, name: str, rows: list[Any]
) -> dict[str, Any]:
    """Store (or replace) data set `name` from uploaded chunks; `{name, files, bytes, ...}`."""
    _check_name(name)
    manifest = check_manifest(settings, tenant, rows, what=f"data set {name}", max_total=None)
    store = blob_store(settings)
    folder = tenant_datasets_root(settings.data_dir, tenant) / name
    fresh = folder.with_name(f".{name}.{uuid.uuid4().hex}")
    try:
        store.materialize(tenant, manifest.files, fresh / "files")
        store.put_manifest(tenant, manifest.digest, manifest_bytes(manifest.files))
        (fresh / MANIFEST).write_text(manifest.digest + "\n")
        old = _swap_in(fresh, folder)
    except BlobError as exc:
        raise InvalidSpec(f"data set {name}: {exc}") from None
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
    replaced = old is not None
    if old is not None:
        _forget(session, settings, tenant, tenant_id, _digest_of(old), keep=manifest.digest)
        shutil.rmtree(old, ignore_errors=True)
    return {"name": name, **manifest.view(), "replaced": replaced}


def _swap_in(fresh: Path, folder: Path) -> Path | None:
    """Put `fresh` at `folder`; the previous folder, moved aside, or None."""
    old = None
    if folder.exists():
        old = folder.with_name(f".{folder.name}.old-{uuid.uuid4().hex}")
        os.rename(folder, old)
    os.rename(fresh, folder)
    return old


def _digest_of(folder: Path) -> str | None:
    try:
        return (folder / MANIFEST).read_text().strip() or None
    except OSError:
        return None


def remove_dataset(
    session: Session, settings: Settings, tenant: str, tenant_id: int, name: str
) -> dict[str, Any]:
    """Delete data set `name` and free the chunks nothing else of the tenant uses."""
    _check_name(name)
    folder = tenant_datasets_root(settings.data_dir, tenant) / name
    if not folder.is_dir():
        raise NotFound(f"no data set {name!r} of your tenant; `sam data ls` lists them")
    aside = folder.with_name(f".{name}.rm-{uuid.uuid4().hex}")
    os.rename(folder, aside)
    freed = _forget(session, settings, tenant, tenant_id, _digest_of(aside), keep=None)
    shutil.rmtree(aside, ignore_errors=True)
    return {"name": name, "freed_bytes": freed}


def _forget(
    session: Session,
    settings: Settings,
    tenant: str,
    tenant_id: int,
    digest: str | None,
    keep: str | None,
) -> int:
    """Drop manifest `digest` and its chunks that no other manifest of the tenant names (nor
    `keep`); the bytes freed, taken off the tenant's stored bytes."""
    store = blob_store(settings)
    if digest is None or digest == keep:
        return 0
    files = store.read_manifest(tenant, digest) or []
    if _still_named(settings, tenant, digest):
        return 0
    store.drop_manifest(tenant, digest)
    used: set[str] = set()
    for other in store.manifests(tenant):
        used.update(c for f in store.read_manifest(tenant, other) or [] for c in f.chunks)
    freed = 0
    for entry in files:
        if not any(c in used for c in entry.chunks):
            store.drop_file(tenant, assembled_name(entry))
        for chunk in entry.chunks:
            if chunk not in used:
                freed += store.drop_chunk(tenant, chunk)
                used.add(chunk)  # a chunk listed twice is freed once
    if freed:
        count_storage(session, settings, tenant_id, -freed)
    return freed


def _still_named(settings: Settings, tenant: str, digest: str) -> bool:
    """Whether another data set of the tenant is built from the same manifest."""
    root = tenant_datasets_root(settings.data_dir, tenant)
    if not root.is_dir():
        return False
    return any(_digest_of(p) == digest for p in root.iterdir() if not p.name.startswith("."))


def _tree_size(root: Path) -> tuple[int, int]:
    files = size = 0
    for folder, _, names in os.walk(root):
        for name in names:
            files += 1
            size += os.lstat(os.path.join(folder, name)).st_size
    return files, size


def list_datasets(
    session: Session, settings: Settings, tenant: str, tenant_id: int
) -> dict[str, Any]:
    """The tenant's data sets and the shared ones it may use, and its storage use."""
    store = blob_store(settings)
    own = []
    root = tenant_datasets_root(settings.data_dir, tenant)
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        if folder.name.startswith(".") or not folder.is_dir():
            continue
        digest = _digest_of(folder)
        files = store.read_manifest(tenant, digest) if digest else None
        if files is not None:
            count, size = len(files), sum(f.size for f in files)
        else:  # placed by an operator without an upload
            count, size = _tree_size(tenant_dataset_dir(settings.data_dir, tenant, folder.name))
        own.append({"name": folder.name, "files": count, "bytes": size, "shared": False})
    shared = [
        {"name": d.name, "files": None, "bytes": None, "shared": True}
        for d in settings.load_cluster().datasets
        if ("*" in d.tenants or tenant in d.tenants) and Path(d.path).exists()
    ]
    used, limit = storage_limit(session, settings, tenant_id)
    return {
        "datasets": own + [s for s in shared if s["name"] not in {o["name"] for o in own}],
        "storage": {"bytes": used, "limit": limit, **_project_use(settings, tenant, root)},
    }


def _project_use(settings: Settings, tenant: str, root: Path) -> dict[str, int]:
    """How many stored manifests are projects (not a data set's) and the bytes they list."""
    store = blob_store(settings)
    datasets = {_digest_of(p) for p in root.iterdir()} if root.is_dir() else set()
    projects = [d for d in store.manifests(tenant) if d not in datasets]
    listed = 0
    for digest in projects:
        listed += sum(f.size for f in store.read_manifest(tenant, digest) or [])
    return {"projects": len(projects), "project_bytes": listed}
