"""Chunked, content-addressed, resumable uploads of a project or a data set (docs/projects.md).

Each file is cut into chunks of the server's chunk size and hashed (SHA-256 per chunk and per
file). The server is asked which chunks its tenant lacks, only those are sent (a few at once),
then the manifest is committed. A resubmit of an unchanged project sends no file bytes; an
interrupted upload, run again, sends only what did not arrive. Hashes are remembered by path,
size, modification time and inode (~/.cache/sam/hashes.json), so an unchanged file is not read
again either.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from client.errors import SamAPIError
from client.project import ProjectFile

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from client.sdk import SamClient

DEFAULT_CHUNK_BYTES = 8 << 20  # the server's SAM_UPLOAD_CHUNK_BYTES default (it says its own)
PARALLEL = 4  # chunks in flight at once
ASK_BATCH = 20_000  # chunk hashes per "which are missing?" request
CACHE_LIMIT = 200_000  # remembered files
QUIET_BELOW_BYTES = 1 << 20  # `sam submit` says what it sent only from this much on
RECHECKS = 3  # rounds of "which are missing?" after sending, and commits tried


def cache_path() -> Path:
    from client.config import hash_cache_path

    return hash_cache_path()


class HashCache:
    """{absolute path: [size, mtime_ns, inode, chunk size, file sha256, [chunk sha256...]]}."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or cache_path()
        self.entries: dict[str, list[Any]] = {}
        self.changed = False
        try:
            loaded = json.loads(self.path.read_text())
            if isinstance(loaded, dict):
                self.entries = loaded
        except (OSError, ValueError):
            pass

    def hashes(self, local: Path, chunk_bytes: int) -> tuple[str, list[str], int]:
        """(file sha256, chunk sha256s, size) of `local`, from the cache when unchanged."""
        info = os.stat(local)
        key = str(local.absolute())
        seen = self.entries.get(key)
        stamp = [info.st_size, info.st_mtime_ns, info.st_ino, chunk_bytes]
        if isinstance(seen, list) and len(seen) == 6 and seen[:4] == stamp:
            return seen[4], list(seen[5]), info.st_size
        whole, chunks, size = hash_file(local, chunk_bytes)
        self.entries[key] = [size, info.st_mtime_ns, info.st_ino, chunk_bytes, whole, chunks]
        self.changed = True
        return whole, chunks, size

    def save(self) -> None:
        if not self.changed:
            return
        if len(self.entries) > CACHE_LIMIT:
            self.entries = dict(list(self.entries.items())[-CACHE_LIMIT:])
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
            tmp.write_text(json.dumps(self.entries))
            os.replace(tmp, self.path)
        except OSError:
            pass  # a cache: the next upload hashes again


def hash_file(local: Path, chunk_bytes: int) -> tuple[str, list[str], int]:
    """(file sha256, chunk sha256s, size), reading `local` once.

    The file's hash and its chunks' hashes are two passes over the same bytes: a chunk's is
    taken in a second thread while this one adds the chunk to the file's (hashlib lets go of
    the GIL on large buffers), so on two cores hashing a file costs about one pass."""
    from concurrent.futures import ThreadPoolExecutor

    whole = hashlib.sha256()
    chunks: list[str] = []
    size = 0
    with open(local, "rb") as handle, ThreadPoolExecutor(max_workers=1) as pool:
        pending = None  # the previous chunk's hash in progress: two chunks in memory at most
        while True:
            block = handle.read(chunk_bytes)
            if not block:
                break
            if pending is not None:
                chunks.append(pending.result())
            pending = pool.submit(_hex_sha256, block)
            whole.update(block)
            size += len(block)
        if pending is not None:
            chunks.append(pending.result())
    return whole.hexdigest(), chunks, size


def _hex_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _region_sha256(local: Path, offset: int, size: int) -> str:
    with open(local, "rb") as handle:
        handle.seek(offset)
        return _hex_sha256(handle.read(size))


def _Changed(local: Path) -> Exception:  # noqa: N802 (raised like a class)
    from client.errors import JobSpecError

    return JobSpecError(f"{local} changed while it was being uploaded; run the command again")


class UploadReport:
    """What an upload did: files, bytes in the project, chunks and bytes actually sent."""

    def __init__(self) -> None:
        self.files = 0
        self.bytes = 0
        self.sent_chunks = 0
        self.sent_bytes = 0


def upload_files(
    client: SamClient,
    files: list[ProjectFile],
    *,
    cache: HashCache | None = None,
    report: UploadReport | None = None,
    on_chunk: Callable[[int], None] | None = None,
) -> list[dict[str, Any]]:
    """Send the chunks of `files` the tenant lacks; the manifest rows to commit."""
    cache = cache or HashCache()
    report = report or UploadReport()
    # The server's chunk size first (an empty question): files are hashed once, in the chunks
    # it takes, and an unchanged file's hashes come from the cache whatever size it uses.
    chunk_bytes = int(client.call("POST", "/uploads/missing", json={"chunks": []})["chunk_bytes"])
    while True:  # once, or twice if the server's chunk size changed meanwhile
        rows, where = _hash_all(files, chunk_bytes, cache)
        missing, server_chunk = _ask_missing(client, where)
        if server_chunk == chunk_bytes:
            break
        chunk_bytes = server_chunk
    report.files += len(rows)
    report.bytes += sum(r["size"] for r in rows)

    def send(chunk: str) -> int:
        local, offset, size = where[chunk]
        # The server checks each chunk against its hash (a 422 when they differ): the bytes go
        # from the file to the socket without being read here (sendfile). Only when the server
        # refuses a chunk is it read and hashed here, to say whether the file changed meanwhile.
        try:
            if os.stat(local).st_size < offset + size:
                raise _Changed(local)
            client.put_file(f"/uploads/chunks/{chunk}", str(local), offset, size)
        except SamAPIError as exc:
            if exc.status == 422 and _region_sha256(local, offset, size) != chunk:
                raise _Changed(local) from None
            raise
        if on_chunk is not None:
            on_chunk(size)
        return size

    for _ in range(RECHECKS):
        if not missing:
            break
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(PARALLEL, len(missing))) as pool:
            for size in pool.map(send, missing):
                report.sent_chunks += 1
                report.sent_bytes += size
        # Asked again before the commit: a chunk the server had at first may have been freed
        # while the rest went (its last project version collected); it goes now.
        missing, _ = _ask_missing(client, where)
    return rows


def _hash_all(
    files: list[ProjectFile], chunk_bytes: int, cache: HashCache
) -> tuple[list[dict[str, Any]], dict[str, tuple[Path, int, int]]]:
    """Manifest rows, and where each chunk is read from: {chunk: (file, offset, size)}."""
    rows: list[dict[str, Any]] = []
    where: dict[str, tuple[Path, int, int]] = {}
    for f in files:
        whole, chunks, size = cache.hashes(f.local, chunk_bytes)
        rows.append({"path": f.path, "size": size, "sha256": whole, "chunks": chunks})
        for i, chunk in enumerate(chunks):
            offset = i * chunk_bytes
            where.setdefault(chunk, (f.local, offset, min(chunk_bytes, size - offset)))
    cache.save()
    return rows, where


def _ask_missing(
    client: SamClient, where: dict[str, tuple[Path, int, int]]
) -> tuple[list[str], int]:
    """(the chunks the tenant lacks, the server's chunk size)."""
    wanted = list(where)
    missing: list[str] = []
    chunk_bytes = DEFAULT_CHUNK_BYTES
    for start in range(0, max(len(wanted), 1), ASK_BATCH):
        batch = [{"sha256": c, "size": where[c][2]} for c in wanted[start : start + ASK_BATCH]]
        answer = client.call("POST", "/uploads/missing", json={"chunks": batch})
        missing += answer["missing"]
        chunk_bytes = int(answer["chunk_bytes"])
    return missing, chunk_bytes


def _upload_and_commit(
    client: SamClient, files: list[ProjectFile], report: UploadReport | None, method: str, path: str
) -> dict[str, Any]:
    """Send what is missing and commit; again when the commit finds a chunk gone (freed by the
    server between the last question and the commit)."""
    report = report or UploadReport()
    counted = (report.files, report.bytes)
    for attempt in range(RECHECKS):
        report.files, report.bytes = counted  # the project's size, once however many tries
        rows = upload_files(client, files, report=report)
        try:
            result: dict[str, Any] = client.call(method, path, json={"files": rows})
            return result
        except SamAPIError as exc:
            gone = exc.status == 422 and "were not uploaded" in exc.detail
            if not gone or attempt == RECHECKS - 1:
                raise
    raise AssertionError("unreachable")


def upload_project(
    client: SamClient, files: list[ProjectFile], report: UploadReport | None = None
) -> dict[str, Any]:
    """Upload a project; `{digest, files, bytes}` (the digest goes in the spec's `project`)."""
    return _upload_and_commit(client, files, report, "POST", "/projects")


def upload_dataset(
    client: SamClient, name: str, files: list[ProjectFile], report: UploadReport | None = None
) -> dict[str, Any]:
    """Create or replace data set `name` from `files`."""
    return _upload_and_commit(client, files, report, "PUT", f"/datasets/{name}")


def project_listing(job_file: Path, origins: dict[str, Path]) -> list[ProjectFile]:
    """The files of the job file's folder to send, plus those the job file names from outside
    it or that .samignore leaves out ({name: file} in `origins`): the job needs them."""
    from client.errors import JobSpecError
    from client.project import list_project

    own_cache = cache_path().resolve()
    listing = [f for f in list_project(job_file.resolve().parent) if f.local.resolve() != own_cache]
    have = {f.path: f.local for f in listing}
    for name, local in origins.items():
        if name not in have:
            listing.append(ProjectFile(name, local, local.stat().st_size))
        elif have[name].resolve() != local.resolve():
            raise JobSpecError(
                f"{local} would be sent as {name!r}, which is already a file of the project; "
                "rename one of them"
            )
    return sorted(listing, key=lambda f: f.path)


def with_project(
    client: SamClient, spec: dict[str, Any], listing: list[ProjectFile]
) -> tuple[dict[str, Any], UploadReport]:
    """Upload the project and name it in the spec (`project`); what was sent."""
    report = UploadReport()
    result = upload_project(client, listing, report)
    return {**spec, "project": result["digest"]}, report


def sent_line(report: UploadReport) -> str:
    """`project: N files, SIZE (sent SIZE in K chunks)` for stderr."""
    from client.project import human_bytes

    return (
        f"project: {report.files} files, {human_bytes(report.bytes)} "
        f"(sent {human_bytes(report.sent_bytes)} in {report.sent_chunks} chunks)"
    )
