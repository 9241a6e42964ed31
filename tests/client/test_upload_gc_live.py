"""The client's uploads beside the server's collection of old project versions (docs/projects.md,
"How long a project version is kept"), on the real server: a chunk freed while an upload counted
on it is sent again, and resubmits racing collections never commit a version with a chunk
missing nor leave the tenant's stored bytes apart from what is on disk."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from client.project import list_project
from client.sdk import SamClient
from client.upload import UploadReport, upload_project
from sam_server.db.models import Tenant
from sam_server.db.session import session_scope
from sam_server.services.storage_count import blob_store
from sam_server.services.storage_gc import collect_tenant
from sam_server.storage.layout import tenant_project_dir
from tests.client.test_upload_live import user  # noqa: F401 (fixture)


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'sam.db'}"


def _collect(settings, **storage: Any):  # type: ignore[no-untyped-def]
    tuned = settings.model_copy(update={"storage": settings.storage.model_copy(update=storage)})
    with session_scope(settings.resolved_database_url) as session:
        tenant_id = session.query(Tenant.id).filter(Tenant.name == "lab").scalar()
        return collect_tenant(session, tuned, "lab", tenant_id)


def _stored_bytes(settings) -> int:  # type: ignore[no-untyped-def]
    with session_scope(settings.resolved_database_url) as session:
        return int(session.query(Tenant.storage_bytes).filter(Tenant.name == "lab").scalar())


def _version(root: Path, shared: bytes, own: bytes) -> list[Any]:
    root.mkdir(parents=True, exist_ok=True)
    (root / "shared.bin").write_bytes(shared)
    (root / "own.bin").write_bytes(own)
    return list_project(root)


def test_a_chunk_freed_during_an_upload_is_sent_again(
    live_server,  # type: ignore[no-untyped-def]
    user,  # noqa: F811
    tmp_path: Path,
    settings,
) -> None:
    shared = os.urandom(5000)
    client = SamClient(live_server.url, user)
    upload_project(client, _version(tmp_path / "v1", shared, b"one"))
    real_put, puts = client.put_file, []

    def slow_put(path: str, local: str, offset: int, size: int) -> object:
        if not puts:  # as if the upload outlasted the grace: what it was told it has is freed
            assert _collect(settings, project_retention_days=0, upload_grace_s=0).chunks == 2
        puts.append(path)
        return real_put(path, local, offset, size)

    client.put_file = slow_put  # type: ignore[method-assign]
    report = UploadReport()
    made = upload_project(client, _version(tmp_path / "v2", shared, b"two"), report)
    assert report.sent_chunks == 2 and report.files == 2  # own.bin, then shared.bin again
    tree = tenant_project_dir(settings.data_dir, "lab", made["digest"])
    assert (tree / "shared.bin").read_bytes() == shared
    assert _stored_bytes(settings) == len(shared) + 3


def test_resubmits_racing_collections_never_lose_a_chunk(
    live_server,  # type: ignore[no-untyped-def]
    user,  # noqa: F811
    tmp_path: Path,
    settings,
) -> None:
    shared = os.urandom(20_000)
    client = SamClient(live_server.url, user)
    store = blob_store(settings)
    stop = threading.Event()
    broken: list[tuple[str, str]] = []
    collected: list[Any] = []

    def collector() -> None:
        while not stop.is_set():
            # an eager collection: no retention, a grace about as long as one upload
            collected.append(_collect(settings, project_retention_days=0, upload_grace_s=0.3))
            with store.lock("lab", exclusive=True):
                have = store.chunk_times("lab")
                for digest in store.manifests("lab"):
                    for entry in store.read_manifest("lab", digest) or []:
                        broken.extend((digest, c) for c in entry.chunks if c not in have)
            time.sleep(0.002)

    thread = threading.Thread(target=collector)
    thread.start()
    try:
        for round_ in range(12):
            files = _version(tmp_path / f"v{round_}", shared, os.urandom(100 + round_))
            made = upload_project(client, files)
            assert made["files"] == 2
            time.sleep(0.1)
    finally:
        stop.set()
        thread.join(30)
    assert broken == []  # no stored version ever named a chunk that was not there
    assert sum(c.freed_bytes for c in collected) > 0  # they did race: versions were freed
    on_disk = sum(
        f.stat().st_size
        for f in (Path(settings.data_dir) / "tenants" / "lab" / "store" / "chunks").rglob("*")
        if f.is_file() and not f.name.startswith(".")
    )
    assert _stored_bytes(settings) == on_disk
