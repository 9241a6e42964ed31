"""Projects and data sets over the API: content-addressed chunks per tenant, manifests checked
against the limits, storage counted against the tenant's quota (docs/projects.md)."""

from __future__ import annotations

import hashlib
from typing import Any

from sam_server.storage.layout import tenant_dataset_dir, tenant_project_dir
from tests.api.helpers import ADMIN, MODEL_PY, alice_and_eve, spec, submit

CHUNK = 8 << 20
RAW = {"Content-Type": "application/octet-stream"}  # as the client sends a chunk


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def put_files(client, who, files: dict[str, bytes]) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
    """Upload every file's chunks the tenant lacks; the manifest rows."""
    rows, chunks = [], {}
    for path, data in files.items():
        parts = [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]
        chunks.update({sha(p): p for p in parts})
        rows.append(
            {
                "path": path,
                "size": len(data),
                "sha256": sha(data),
                "chunks": [sha(p) for p in parts],
            }
        )
    ask = {"chunks": [{"sha256": d, "size": len(p)} for d, p in chunks.items()]}
    missing = client.post("/api/v1/uploads/missing", json=ask, headers=who)
    assert missing.status_code == 200, missing.text
    for digest in missing.json()["missing"]:
        r = client.put(
            f"/api/v1/uploads/chunks/{digest}", content=chunks[digest], headers={**who, **RAW}
        )
        assert r.status_code == 200, r.text
    return rows


def project(client, who, files: dict[str, bytes]) -> str:  # type: ignore[no-untyped-def]
    r = client.post("/api/v1/projects", json={"files": put_files(client, who, files)}, headers=who)
    assert r.status_code == 201, r.text
    return str(r.json()["digest"])


def usage(client, tenant: str) -> int:  # type: ignore[no-untyped-def]
    return int(
        client.get(f"/api/v1/tenants/{tenant}", headers=ADMIN).json()["usage"]["storage_bytes"]
    )


def test_a_project_is_stored_once_and_a_job_names_it(client, settings) -> None:  # type: ignore[no-untyped-def]
    alice, eve = alice_and_eve(client)
    files = {
        "model.py": MODEL_PY.encode(),
        "nets/__init__.py": b"",
        "data/x.bin": bytes(range(256)) * 5,
    }
    digest = project(client, alice, files)
    tree = tenant_project_dir(settings.data_dir, "acme", digest)
    assert (tree / "data" / "x.bin").read_bytes() == files["data/x.bin"]
    stored = usage(client, "acme")
    assert stored == sum(len(v) for v in files.values())
    # the same project again: nothing is missing, nothing more is stored, the same digest
    ask = {"chunks": [{"sha256": sha(v), "size": len(v)} for v in files.values() if v]}
    assert client.post("/api/v1/uploads/missing", json=ask, headers=alice).json()["missing"] == []
    assert project(client, alice, files) == digest and usage(client, "acme") == stored
    job = submit(client, alice, spec(project=digest), files={"model.py": MODEL_PY})
    assert job.status_code == 201, job.text
    # the text sent must be the project's own file
    other = submit(client, alice, spec(project=digest), files={"model.py": MODEL_PY + "#"})
    assert other.status_code == 422 and "differs from the project" in other.json()["detail"]


def test_a_file_of_several_chunks_is_what_its_chunks_hold(client, settings) -> None:  # type: ignore[no-untyped-def]
    """The server checks every chunk against its hash as it arrives and puts a file of several
    chunks together without reading it again: the copy is named by its chunk list, so a
    manifest that claims another file's SHA-256 gets its own chunks' bytes and cannot stand
    for that file's content in a later project."""
    alice, _ = alice_and_eve(client)
    real = bytes(range(256)) * (CHUNK // 256) + b"the real tail"
    forged = bytes(CHUNK) + b"a forged tail"
    rows = put_files(client, alice, {"model.py": MODEL_PY.encode(), "big.bin": forged})
    for row in rows:
        if row["path"] == "big.bin":
            assert len(row["chunks"]) == 2
            row["sha256"] = sha(real)  # claims the real file's hash
    made = client.post("/api/v1/projects", json={"files": rows}, headers=alice)
    assert made.status_code == 201, made.text
    lying = tenant_project_dir(settings.data_dir, "acme", made.json()["digest"])
    assert (lying / "big.bin").read_bytes() == forged
    digest = project(client, alice, {"model.py": MODEL_PY.encode(), "big.bin": real})
    tree = tenant_project_dir(settings.data_dir, "acme", digest)
    assert (tree / "big.bin").read_bytes() == real
    assert (tree / "big.bin").stat().st_mode & 0o222 == 0  # read-only


def test_another_tenant_neither_finds_nor_names_a_tenants_chunks_or_project(client) -> None:  # type: ignore[no-untyped-def]
    alice, eve = alice_and_eve(client)
    secret = b"alice's weights " * 100
    digest = project(client, alice, {"model.py": MODEL_PY.encode(), "secret.bin": secret})
    ask = {"chunks": [{"sha256": sha(secret), "size": len(secret)}]}
    # eve's tenant has no such chunk: no oracle of what another tenant uploaded
    assert client.post("/api/v1/uploads/missing", json=ask, headers=eve).json()["missing"] == [
        sha(secret)
    ]
    theirs = submit(client, eve, spec(project=digest), files={"model.py": MODEL_PY})
    nobody = submit(client, eve, spec(project="0" * 64), files={"model.py": MODEL_PY})
    assert theirs.status_code == nobody.status_code == 422
    assert theirs.json()["detail"].replace(digest[:12], "X") == nobody.json()["detail"].replace(
        "0" * 12, "X"
    )
    # and a manifest naming alice's chunks is refused for eve
    rows = [{"path": "s.bin", "size": len(secret), "sha256": sha(secret), "chunks": [sha(secret)]}]
    stolen = client.post("/api/v1/projects", json={"files": rows}, headers=eve)
    assert stolen.status_code == 422 and "not uploaded" in stolen.json()["detail"]


def test_a_chunk_must_match_its_hash_and_the_chunk_size(client, settings) -> None:  # type: ignore[no-untyped-def]
    alice, _ = alice_and_eve(client)
    r = client.put(f"/api/v1/uploads/chunks/{sha(b'a')}", content=b"b", headers=alice)
    assert r.status_code == 422 and "altered" in r.json()["detail"]
    settings.storage.upload_chunk_bytes = 1 << 16
    big = b"x" * ((1 << 16) + 1)
    r = client.put(f"/api/v1/uploads/chunks/{sha(big)}", content=big, headers=alice)
    assert r.status_code == 413 and "SAM_UPLOAD_CHUNK_BYTES" in r.json()["detail"]


def test_a_manifest_naming_a_chunk_that_is_no_digest_is_a_422(client) -> None:  # type: ignore[no-untyped-def]
    """Found by tests/security/test_schema_fuzz.py: a chunk name that is no SHA-256 reached the
    blob store's path builder and answered 500."""
    alice, _ = alice_and_eve(client)
    row = {"path": "a.py", "size": 1, "sha256": sha(b"a"), "chunks": ["m\x10\U000f4cde"]}
    for url, method in (("/api/v1/projects", "POST"), ("/api/v1/datasets/d", "PUT")):
        r = client.request(method, url, json={"files": [row]}, headers=alice)
        assert r.status_code == 422, r.text
        assert r.json()["errors"][0]["field"] == "files.0.chunks.0", r.text


def test_storage_quota_is_a_413_naming_the_limit_and_the_usage(client) -> None:  # type: ignore[no-untyped-def]
    alice, _ = alice_and_eve(client)
    r = client.put("/api/v1/tenants/acme/quota", json={"max_storage_bytes": 1000}, headers=ADMIN)
    assert r.status_code == 200 and r.json()["quota"]["max_storage_bytes"] == 1000
    put_files(client, alice, {"a": b"a" * 600})
    ask = {"chunks": [{"sha256": sha(b"b" * 600), "size": 600}]}
    early = client.post("/api/v1/uploads/missing", json=ask, headers=alice)
    late = client.put(
        f"/api/v1/uploads/chunks/{sha(b'b' * 600)}", content=b"b" * 600, headers=alice
    )
    for answer in (early, late):
        detail = answer.json()["detail"]
        assert answer.status_code == 413 and "max_storage_bytes of 1000" in detail
        assert "stores 600 bytes" in detail and "adds 600" in detail
    assert usage(client, "acme") == 600  # the refused chunk was not counted


def test_project_limits_and_paths(client, settings) -> None:  # type: ignore[no-untyped-def]
    alice, _ = alice_and_eve(client)
    settings.storage.max_project_files = 2
    rows = put_files(client, alice, {"a": b"1", "b": b"2", "c": b"3"})
    r = client.post("/api/v1/projects", json={"files": rows}, headers=alice)
    assert (
        r.status_code == 413
        and "3 files" in r.json()["detail"]
        and "SAM_MAX_PROJECT_FILES=2" in r.json()["detail"]
    )
    (
        settings.storage.max_project_files,
        settings.storage.max_file_bytes,
        settings.storage.max_project_bytes,
    ) = 10, 4, 6
    for files, words in (
        ({"big": b"12345"}, ["big is 5 bytes", "SAM_MAX_FILE_BYTES=4"]),
        ({"a": b"1234", "b": b"123"}, ["7 bytes", "SAM_MAX_PROJECT_BYTES=6"]),
        ({"../up": b"1"}, ["'../up' is not a plain relative path"]),
        ({"d": b"1", "d/e": b"2"}, ["'d' is both a file and a folder"]),
    ):
        r = client.post(
            "/api/v1/projects", json={"files": put_files(client, alice, files)}, headers=alice
        )
        assert r.status_code in (413, 422) and all(w in r.json()["detail"] for w in words), r.text


def test_data_sets_put_list_use_replace_and_remove(client, settings) -> None:  # type: ignore[no-untyped-def]
    alice, eve = alice_and_eve(client)
    shared = b"shared with the project " * 10
    digest = project(client, alice, {"model.py": MODEL_PY.encode(), "rows.csv": shared})
    rows = put_files(client, alice, {"x.npy": b"x" * 300, "rows.csv": shared})
    r = client.put("/api/v1/datasets/points", json={"files": rows}, headers=alice)
    assert r.status_code == 200 and r.json()["files"] == 2, r.text
    assert (
        tenant_dataset_dir(settings.data_dir, "acme", "points") / "x.npy"
    ).read_bytes() == b"x" * 300
    listing = client.get("/api/v1/datasets", headers=alice).json()
    assert [(d["name"], d["bytes"]) for d in listing["datasets"]] == [("points", 300 + len(shared))]
    assert (
        listing["storage"]["projects"] == 1
        and client.get("/api/v1/datasets", headers=eve).json()["datasets"] == []
    )
    data = {"source": "file", "file": "model.py", "function": "make_batch", "dataset": "points",
            "task": "regression", "input_shape": [8], "batch_size": 4}  # fmt: skip
    body = MODEL_PY + "\ndef make_batch(step, batch_size):\n    return None\n"
    assert submit(client, alice, spec(data=data), files={"model.py": body}).status_code == 201
    before = usage(client, "acme")
    replaced = client.put(
        "/api/v1/datasets/points",
        json={"files": put_files(client, alice, {"y": b"y"})},
        headers=alice,
    )
    assert replaced.json()["replaced"] is True
    # x.npy's chunk was freed; rows.csv's is the project's too and stays
    assert usage(client, "acme") == before - 300 + 1
    assert client.delete("/api/v1/datasets/points", headers=eve).status_code == 404
    gone = client.delete("/api/v1/datasets/points", headers=alice)
    assert gone.status_code == 200 and gone.json()["freed_bytes"] == 1
    assert not tenant_dataset_dir(settings.data_dir, "acme", "points").exists()
    assert (
        tenant_project_dir(settings.data_dir, "acme", digest).joinpath("rows.csv").read_bytes()
        == shared
    )
