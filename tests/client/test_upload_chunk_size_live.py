"""A server whose chunk size is not the client's default (SAM_UPLOAD_CHUNK_BYTES set by its
operator): the client asks for it first, so it hashes each file once, in the server's chunks,
and an unchanged resubmit reads no file again (docs/projects.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import client.upload
from client.project import list_project
from client.sdk import SamClient
from client.upload import UploadReport, upload_project
from tests.client.test_upload_live import user  # noqa: F401 (fixture)
from tests.conftest import ADMIN_TOKEN

SERVER_CHUNK = 1 << 20


@pytest.fixture
def settings(tmp_path: Path):  # type: ignore[no-untyped-def]
    from sam_server.config import Settings

    base = Settings(
        data_dir=tmp_path / "data",
        database_url=f"sqlite:///{tmp_path / 'sam.db'}",
        admin_token=ADMIN_TOKEN,
    )
    return base.model_copy(
        update={"storage": base.storage.model_copy(update={"upload_chunk_bytes": SERVER_CHUNK})}
    )


def test_files_are_hashed_once_in_the_servers_chunks(
    live_server,  # type: ignore[no-untyped-def]
    user,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "big.bin").write_bytes(os.urandom(3 * SERVER_CHUNK + 5))
    (root / "small.txt").write_text("hi\n")
    real_hash, hashed = client.upload.hash_file, []

    def counted(local: Path, chunk_bytes: int) -> Any:
        hashed.append((local.name, chunk_bytes))
        return real_hash(local, chunk_bytes)

    monkeypatch.setattr(client.upload, "hash_file", counted)
    sam = SamClient(live_server.url, user)
    first = UploadReport()
    upload_project(sam, list_project(root), first)
    assert sorted(hashed) == [("big.bin", SERVER_CHUNK), ("small.txt", SERVER_CHUNK)]
    assert first.sent_chunks == 5
    hashed.clear()
    again = UploadReport()
    upload_project(sam, list_project(root), again)
    assert hashed == [] and again.sent_chunks == 0  # nothing read, nothing sent
