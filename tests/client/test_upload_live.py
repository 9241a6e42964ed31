"""Uploads against the real server (uvicorn, SQLite): an unchanged project is sent once, an
interrupted upload resumes with what is missing, `sam data put/ls/du/rm` (docs/projects.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from client.errors import SamConnectionError
from client.project import list_project
from client.sdk import SamClient
from client.upload import UploadReport, upload_project
from sam_server.storage.layout import tenant_dataset_dir, tenant_project_dir
from tests.client.test_cli_e2e import sam
from tests.conftest import ADMIN_TOKEN


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'sam.db'}"


@pytest.fixture
def user(live_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert sam(live_server.url, ADMIN_TOKEN, "admin", "tenant", "create", "lab").exit_code == 0
    made = sam(live_server.url, ADMIN_TOKEN, "admin", "user", "create", "lab", "alice")
    return made.stdout.strip()


def _project(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "weights.bin").write_bytes(os.urandom((8 << 20) * 2 + 12345))  # three chunks
    (root / "small.txt").write_text("hello\n")
    return root


def test_an_unchanged_project_is_sent_once(live_server, user, tmp_path: Path, settings) -> None:  # type: ignore[no-untyped-def]
    root = _project(tmp_path / "project")
    client = SamClient(live_server.url, user)
    first, again = UploadReport(), UploadReport()
    digest = upload_project(client, list_project(root), first)["digest"]
    assert first.sent_chunks == 4 and first.sent_bytes == first.bytes == (16 << 20) + 12345 + 6
    assert upload_project(client, list_project(root), again)["digest"] == digest
    assert again.sent_chunks == 0 and again.sent_bytes == 0 and again.bytes == first.bytes
    tree = tenant_project_dir(settings.data_dir, "lab", digest)
    assert (tree / "weights.bin").read_bytes() == (root / "weights.bin").read_bytes()
    # one changed file: only its chunk goes again
    (root / "small.txt").write_text("changed\n")
    changed = UploadReport()
    assert upload_project(client, list_project(root), changed)["digest"] != digest
    assert changed.sent_chunks == 1 and changed.sent_bytes == 8


def test_chunks_go_the_same_over_httpx_as_over_the_quick_path(
    live_server, user, tmp_path: Path, settings
) -> None:  # type: ignore[no-untyped-def]
    """Over plain HTTP the CLI sends a chunk from its file with sendfile; over httpx (HTTPS,
    a custom transport) it reads the chunk and sends its bytes: the same project either way."""
    import httpx

    root = _project(tmp_path / "project")
    quick = upload_project(SamClient(live_server.url, user), list_project(root))
    (root / "weights.bin").write_bytes(os.urandom((8 << 20) + 7))  # new chunks to send
    report = UploadReport()
    over_httpx = SamClient(live_server.url, user, transport=httpx.HTTPTransport())
    again = upload_project(over_httpx, list_project(root), report)
    assert report.sent_chunks == 2 and again["digest"] != quick["digest"]
    tree = tenant_project_dir(settings.data_dir, "lab", again["digest"])
    assert (tree / "weights.bin").read_bytes() == (root / "weights.bin").read_bytes()


def test_an_interrupted_upload_resumes_with_what_is_missing(
    live_server, user, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    root = _project(tmp_path / "project")
    client = SamClient(live_server.url, user)
    real_put, sent = client.put_file, []

    def flaky(path: str, local: str, offset: int, size: int) -> object:
        if len(sent) == 2:
            raise SamConnectionError(live_server.url, "connection reset")
        sent.append(path)
        return real_put(path, local, offset, size)

    client.put_file = flaky  # type: ignore[method-assign]
    with pytest.raises(SamConnectionError):
        upload_project(client, list_project(root))
    client.put_file = real_put  # type: ignore[method-assign]
    resumed = UploadReport()
    upload_project(client, list_project(root), resumed)
    assert resumed.sent_chunks == 2  # 4 chunks, 2 arrived before the break


def test_sam_data_put_ls_du_rm(live_server, user, tmp_path: Path, settings) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "digits"
    folder.mkdir()
    (folder / "x.npy").write_bytes(b"\x93NUMPY" + bytes(1000))
    (folder / "y.npy").write_bytes(b"\x93NUMPY" + bytes(10))
    url = live_server.url
    put = sam(url, user, "data", "put", "digits", str(folder))
    assert put.exit_code == 0, put.stderr
    assert "data set digits stored: 2 files" in put.stderr and "/datasets/digits" in put.stderr
    assert (tenant_dataset_dir(settings.data_dir, "lab", "digits") / "y.npy").stat().st_size == 16
    listed = sam(url, user, "data", "ls")
    assert (
        listed.exit_code == 0 and "digits" in listed.stdout and "/datasets/digits" in listed.stdout
    )
    du = json.loads(sam(url, user, "data", "du", "-o", "json").stdout)
    assert du["bytes"] == 1022 and du["limit"] == settings.storage.max_storage_bytes
    one = sam(url, user, "data", "put", "single", str(folder / "x.npy"))
    assert one.exit_code == 0 and "1 files" in one.stderr and "(sent 0 B)" in one.stderr
    gone = sam(url, user, "data", "rm", "digits")
    assert gone.exit_code == 0 and "16 B freed" in gone.stderr  # x.npy's chunk is single's too
    missing = sam(url, user, "data", "rm", "digits")
    assert missing.exit_code == 1 and "no data set 'digits'" in missing.stderr
