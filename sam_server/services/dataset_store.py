"""A tenant's own data sets: `sam data put / ls / rm / du` (docs/data.md).

A data set is stored as a project is (chunks, then a manifest: services/uploads.py) and built
as a read-only tree at the folder `datasets.resolve_dataset` binds at /datasets/NAME.
Replacing or removing one frees at once the chunks no other data set or kept project version of
the tenant uses (services/storage_gc.py).
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
from sam_server.services.storage_count import blob_store, storage_limit
from sam_server.services.storage_gc import dataset_digests, release_manifest
from sam_server.services.uploads import check_manifest
from sam_server.storage.blobs import BlobError, manifest_bytes
from sam_server.storage.layout import (
    DATASET_MANIFEST,
    dataset_digest,
    tenant_dataset_dir,
    tenant_datasets_root,
)


def _check_name(name: str) -> None:
    if not re.match(DATASET_NAME, name):
        raise InvalidSpec(
            f"data set name {name!r}: use letters, digits, '_', '-' and '.' (at most 64, not "
            "starting with '.')"
        )


def put_dataset(
    session: Session, settings: Settings, tenant: str, tenant_id: int, name: str, rows: list[Any]
) -> dict[str, object]:
    """Store (or replace) data set `name` from uploaded chunks; `{name, files, bytes, ...}`."""
    _check_name(name)
    store = blob_store(settings)
    folder = tenant_datasets_root(settings.data_dir, tenant) / name
    fresh = folder.with_name(f".{name}.{uuid.uuid4().hex}")
    try:
        with store.lock(tenant, exclusive=False):  # its chunks are not freed meanwhile
            manifest = check_manifest(
                settings, tenant, rows, what=f"data set {name}", max_total=None
            )
            store.materialize(tenant, manifest.files, fresh / "files")
            store.put_manifest(tenant, manifest.digest, manifest_bytes(manifest.files))
            (fresh / DATASET_MANIFEST).write_text(manifest.digest + "\n")
            old = _swap_in(fresh, folder)
    except BlobError as exc:
        raise InvalidSpec(f"data set {name}: {exc}") from None
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
    if old is not None:
        replaced = dataset_digest(old)
        if replaced is not None and replaced != manifest.digest:
            release_manifest(session, settings, tenant, tenant_id, replaced)
        shutil.rmtree(old, ignore_errors=True)
    return {"name": name, **manifest.view(), "replaced": old is not None}


def _swap_in(fresh: Path, folder: Path) -> Path | None:
    """Put `fresh` at `folder`; the previous folder, moved aside, or None."""
    old = None
    if folder.exists():
        old = folder.with_name(f".{folder.name}.old-{uuid.uuid4().hex}")
        os.rename(folder, old)
    os.rename(fresh, folder)
    return old


def remove_dataset(
    session: Session, settings: Settings, tenant: str, tenant_id: int, name: str
) -> dict[str, object]:
    """Delete data set `name` and free the chunks nothing else of the tenant uses."""
    _check_name(name)
    folder = tenant_datasets_root(settings.data_dir, tenant) / name
    if not folder.is_dir():
        raise NotFound(f"no data set {name!r} of your tenant; `sam data ls` lists them")
    aside = folder.with_name(f".{name}.rm-{uuid.uuid4().hex}")
    os.rename(folder, aside)
    digest = dataset_digest(aside)
    freed = 0 if digest is None else release_manifest(session, settings, tenant, tenant_id, digest)
    shutil.rmtree(aside, ignore_errors=True)
    return {"name": name, "freed_bytes": freed}


def _tree_size(root: Path) -> tuple[int, int]:
    files = size = 0
    for folder, _, names in os.walk(root):
        for name in names:
            files += 1
            size += os.lstat(os.path.join(folder, name)).st_size
    return files, size


def list_datasets(
    session: Session, settings: Settings, tenant: str, tenant_id: int
) -> dict[str, object]:
    """The tenant's data sets and the shared ones it may use, and its storage use."""
    store = blob_store(settings)
    own = []
    root = tenant_datasets_root(settings.data_dir, tenant)
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        if folder.name.startswith(".") or not folder.is_dir():
            continue
        digest = dataset_digest(folder)
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
    datasets = dataset_digests(settings, tenant)
    projects = [d for d in store.manifests(tenant) if d not in datasets]
    listed = 0
    for digest in projects:
        listed += sum(f.size for f in store.read_manifest(tenant, digest) or [])
    return {"projects": len(projects), "project_bytes": listed}
