"""Old project versions are freed (docs/projects.md, "How long a project version is kept"):
kept while a job naming them has not ended and for the retention after, then their chunks no
kept version or data set uses leave the disk and the tenant's stored bytes; a chunk an upload
counts on is never lost to a collection running beside it."""

from __future__ import annotations

import os
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from sam_server.db.models import Job, Tenant
from sam_server.db.session import session_scope
from sam_server.services.storage_gc import collect, collect_tenant
from sam_server.storage.blobs import LocalBlobStore
from sam_server.storage.layout import tenant_project_dir
from tests.api.helpers import MODEL_PY, alice_and_eve, spec, submit
from tests.api.test_uploads import project, put_files, sha, usage

DAY = 86400
SHARED = os.urandom(3000)  # in every version
OLD_ONLY = os.urandom(2000)
NEW_ONLY = os.urandom(1000)


def _files(extra: bytes) -> dict[str, bytes]:
    return {"model.py": MODEL_PY.encode(), "shared.bin": SHARED, "data/own.bin": extra}


def _collect(settings, **storage: Any):  # type: ignore[no-untyped-def]
    """One collection of tenant acme's store with these storage settings."""
    tuned = settings.model_copy(update={"storage": settings.storage.model_copy(update=storage)})
    with session_scope(settings.resolved_database_url) as session:
        tenant_id = session.query(Tenant.id).filter(Tenant.name == "acme").scalar()
        return collect_tenant(session, tuned, "acme", tenant_id)


def _age(settings, seconds: float) -> None:  # type: ignore[no-untyped-def]
    """Everything acme stored and claimed so far, as if it had been `seconds` ago."""
    then = time.time() - seconds
    for folder, _, names in os.walk(Path(settings.data_dir) / "tenants" / "acme" / "store"):
        for name in names:
            os.utime(Path(folder) / name, (then, then))


def _end(settings, job_id: str, days_ago: float) -> None:  # type: ignore[no-untyped-def]
    ended = datetime.now(UTC) - timedelta(days=days_ago)
    with session_scope(settings.resolved_database_url) as session:
        session.execute(
            update(Job).where(Job.id == job_id).values(state="succeeded", finished_at=ended)
        )


def _job(client, who, digest: str) -> str:  # type: ignore[no-untyped-def]
    made = submit(client, who, spec(project=digest), files={"model.py": MODEL_PY})
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


def _missing(client, who, *blobs: bytes) -> list[str]:  # type: ignore[no-untyped-def]
    ask = {"chunks": [{"sha256": sha(b), "size": len(b)} for b in blobs]}
    answer = client.post("/api/v1/uploads/missing", json=ask, headers=who)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["missing"])


def test_a_version_is_freed_once_its_jobs_ended_past_the_retention(client, settings) -> None:  # type: ignore[no-untyped-def]
    alice, _ = alice_and_eve(client)
    old = project(client, alice, _files(OLD_ONLY))
    old_job = _job(client, alice, old)
    new = project(client, alice, _files(NEW_ONLY))
    new_job = _job(client, alice, new)
    stored = usage(client, "acme")
    assert stored == len(MODEL_PY) + len(SHARED) + len(OLD_ONLY) + len(NEW_ONLY)
    _age(settings, 10 * DAY)

    assert _collect(settings).freed_bytes == 0  # both jobs still to run: both versions stay
    _end(settings, old_job, days_ago=1)
    assert _collect(settings).freed_bytes == 0  # ended within the retention (3 days)
    _end(settings, old_job, days_ago=4)
    done = _collect(settings)
    assert (done.projects, done.chunks, done.freed_bytes) == (1, 1, len(OLD_ONLY))
    assert usage(client, "acme") == stored - len(OLD_ONLY)
    # gone from disk: its own chunk and its tree; what the kept version shares stays
    assert _missing(client, alice, OLD_ONLY, SHARED, NEW_ONLY) == [sha(OLD_ONLY)]
    assert not tenant_project_dir(settings.data_dir, "acme", old).exists()
    kept = tenant_project_dir(settings.data_dir, "acme", new)
    assert (kept / "shared.bin").read_bytes() == SHARED
    late = submit(client, alice, spec(project=old), files={"model.py": MODEL_PY})
    assert late.status_code == 422 and "no uploaded project" in late.json()["detail"]
    # the running job's version is kept however old; once it ends (and is past the
    # retention) the tenant stores nothing
    _age(settings, 10 * DAY)  # (the question above claimed SHARED and NEW_ONLY)
    assert _collect(settings).freed_bytes == 0
    _end(settings, new_job, days_ago=4)
    with session_scope(settings.resolved_database_url) as session:  # as the scheduler does
        assert collect(settings, session)["acme"].projects == 1
    assert usage(client, "acme") == 0


def test_a_resubmit_claims_the_version_again(client, settings) -> None:  # type: ignore[no-untyped-def]
    alice, _ = alice_and_eve(client)
    digest = project(client, alice, _files(OLD_ONLY))
    _end(settings, _job(client, alice, digest), days_ago=30)
    _age(settings, 30 * DAY)
    assert project(client, alice, _files(OLD_ONLY)) == digest  # unchanged: nothing sent
    assert _collect(settings).freed_bytes == 0  # its retention starts again
    _job(client, alice, digest)
    # an upload that would pass the quota frees the versions whose jobs all ended first
    _age(settings, 30 * DAY)
    with session_scope(settings.resolved_database_url) as session:
        session.execute(update(Job).values(state="succeeded", finished_at=datetime.now(UTC)))
        session.execute(update(Tenant).values(max_storage_bytes=usage(client, "acme") + 10))
    assert _missing(client, alice, b"x" * 500) == [sha(b"x" * 500)]  # no 413
    assert usage(client, "acme") == 0


def test_a_chunk_an_upload_was_told_it_has_is_not_freed(client, settings) -> None:  # type: ignore[no-untyped-def]
    """The upload asks which chunks are missing (SHARED is not: not sent), the collection runs
    before the chunks are sent and committed: SHARED stays, the new version is whole."""
    alice, _ = alice_and_eve(client)
    old = project(client, alice, _files(OLD_ONLY))
    _end(settings, _job(client, alice, old), days_ago=30)
    _age(settings, 30 * DAY)
    assert _missing(client, alice, MODEL_PY.encode(), SHARED, NEW_ONLY) == [sha(NEW_ONLY)]
    done = _collect(settings)
    assert (done.projects, done.freed_bytes) == (1, len(OLD_ONLY))
    rows = put_files(client, alice, {"data/own.bin": NEW_ONLY})  # only the missing one goes
    rows += put_files(client, alice, {"model.py": MODEL_PY.encode(), "shared.bin": SHARED})
    committed = client.post("/api/v1/projects", json={"files": rows}, headers=alice)
    assert committed.status_code == 201, committed.text
    tree = tenant_project_dir(settings.data_dir, "acme", committed.json()["digest"])
    assert (tree / "shared.bin").read_bytes() == SHARED
    assert usage(client, "acme") == len(MODEL_PY) + len(SHARED) + len(NEW_ONLY)


def test_a_commit_naming_a_freed_chunk_is_refused_whole(client, settings) -> None:  # type: ignore[no-untyped-def]
    """An upload slower than the grace: the chunk it was told it has is freed before its
    commit, which is refused (never stored with a chunk missing) and says what to send."""
    alice, _ = alice_and_eve(client)
    old = project(client, alice, _files(OLD_ONLY))
    _end(settings, _job(client, alice, old), days_ago=30)
    assert _missing(client, alice, SHARED, NEW_ONLY) == [sha(NEW_ONLY)]
    _age(settings, 30 * DAY)  # the upload's claim is older than the grace now
    assert _collect(settings).freed_bytes == len(MODEL_PY) + len(SHARED) + len(OLD_ONLY)
    rows = put_files(client, alice, {"data/own.bin": NEW_ONLY})
    rows += [
        {"path": "shared.bin", "size": len(SHARED), "sha256": sha(SHARED), "chunks": [sha(SHARED)]}
    ]
    refused = client.post("/api/v1/projects", json={"files": rows}, headers=alice)
    assert refused.status_code == 422 and "were not uploaded" in refused.json()["detail"]
    assert usage(client, "acme") == len(NEW_ONLY)


def test_a_collection_beside_a_commit_frees_none_of_its_chunks(
    client,  # type: ignore[no-untyped-def]
    settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A collection (with no grace at all) starts while a commit is between its check of the
    chunks and the writing of its manifest: it waits for the commit (the store lock), then
    sees the chunks named and frees none of them."""
    alice, _ = alice_and_eve(client)
    rows = put_files(client, alice, _files(NEW_ONLY))  # sent, not committed yet
    _age(settings, 30 * DAY)
    stored = usage(client, "acme")
    real, seen = LocalBlobStore.materialize, {}

    def materialize(self, tenant, files, dest):  # type: ignore[no-untyped-def]
        beside = threading.Thread(
            target=lambda: seen.update(done=_collect(settings, upload_grace_s=0))
        )
        beside.start()
        beside.join(0.5)  # it would have freed them by now, were it not for the lock
        seen["thread"] = beside
        return real(self, tenant, files, dest)

    monkeypatch.setattr(LocalBlobStore, "materialize", materialize)
    committed = client.post("/api/v1/projects", json={"files": rows}, headers=alice)
    seen["thread"].join(30)
    assert committed.status_code == 201, committed.text
    assert seen["done"].freed_bytes == 0 and usage(client, "acme") == stored
    tree = tenant_project_dir(settings.data_dir, "acme", committed.json()["digest"])
    assert (tree / "shared.bin").read_bytes() == SHARED
    assert _missing(client, alice, MODEL_PY.encode(), SHARED, NEW_ONLY) == []
