"""Content-addressed storage of a tenant's uploaded files: projects and data sets (docs/projects.md).

A file travels as chunks of at most SAM_UPLOAD_CHUNK_BYTES, each named by its SHA-256; the
file is named by the SHA-256 of its whole content, and a project (or a data set) by the hash
of its manifest, the sorted list of (path, size, file hash, chunk hashes). Every tenant has its
own space: a chunk is stored once per tenant and never looked up in another tenant's space
(a hit across tenants would tell one tenant what another uploaded).

`BlobStore` is the one interface the server and the workers use. `LocalBlobStore` keeps
everything under the data directory, which every process of a one-machine cluster (or a
shared file system) sees. An S3-compatible object store can replace it: chunks and manifests
become objects under `TENANT/chunks/` and `TENANT/manifests/`, and `materialize` fills a local
cache on the worker that runs the job, as this one fills its `projects/` folder.

Nothing here decides what to keep: services/storage_gc.py frees what no kept manifest names,
under the tenant's store lock, sparing chunks and manifests claimed within a grace period (a
claim is the stored file's modification time here, set again by each `claim_*`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import uuid
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol

DIGEST = re.compile(r"^[0-9a-f]{64}$")
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


class BlobError(ValueError):
    """Stored content does not match what its manifest says (a chunk missing or altered)."""


@dataclass(frozen=True)
class FileEntry:
    """One file of a manifest: where it goes, its size and hashes."""

    path: str  # relative, '/'-separated, checked plain (services/uploads.py)
    size: int
    sha256: str
    chunks: tuple[str, ...]


def assembled_name(entry: FileEntry) -> str:
    """The name of a file assembled from several chunks: the SHA-256 of its size and chunk list,
    which fix its content (each chunk was checked against its hash when it arrived). The file's
    own SHA-256 is the uploader's word, not re-read here: naming the copy by it would let a
    manifest whose file hash does not match its chunks stand for another file's content."""
    listed = f"{entry.size}:" + ",".join(entry.chunks)
    return hashlib.sha256(listed.encode()).hexdigest()


def is_assembled(entry: FileEntry) -> bool:
    """Whether the store keeps the file as an assembled copy (`assembled_name`), not as its one
    chunk (a file of one chunk whose hash is the file's own)."""
    return entry.chunks != (entry.sha256,)


def manifest_bytes(files: Iterable[FileEntry]) -> bytes:
    """The canonical text of a manifest (sorted by path): its SHA-256 names it."""
    rows = [
        {"path": f.path, "size": f.size, "sha256": f.sha256, "chunks": list(f.chunks)}
        for f in sorted(files, key=lambda f: f.path)
    ]
    return json.dumps({"files": rows}, sort_keys=True, separators=(",", ":")).encode()


def parse_manifest(data: bytes) -> list[FileEntry]:
    """The files of a stored manifest (written by `manifest_bytes`)."""
    rows = json.loads(data)["files"]
    return [FileEntry(r["path"], int(r["size"]), r["sha256"], tuple(r["chunks"])) for r in rows]


class BlobStore(Protocol):
    """What the server and the workers need of the storage of uploaded files."""

    def claim_chunks(self, tenant: str, digests: Iterable[str]) -> dict[str, int]:
        """{digest: size} of the given chunks the tenant has stored (others are absent), each
        marked as claimed now: an upload counts on it, so collection leaves it alone for
        `upload_grace_s` (services/storage_gc.py)."""
        ...

    def staging(self, tenant: str) -> Path:
        """A local folder for the chunks being received, on the store's file system so that
        `put_chunk_file` moves one in without copying it."""
        ...

    def put_chunk_file(self, tenant: str, digest: str, path: Path) -> bool:
        """Store the chunk whose bytes are file `path` (of `staging`; its SHA-256 checked by the
        caller, who removes `path` after); False when it was there already."""
        ...

    def chunk_times(self, tenant: str) -> dict[str, float]:
        """{digest: when it was stored or last claimed (epoch seconds)} of every stored chunk."""
        ...

    def lock(self, tenant: str, *, exclusive: bool) -> AbstractContextManager[None]:
        """The tenant's store lock: uploads and commits hold it shared, collection exclusive,
        so that a chunk an upload counts on is never freed between its check and its use."""
        ...

    def claim_manifest(self, tenant: str, digest: str) -> bool:
        """Mark a stored manifest as used now (a commit or a submit naming it); False when the
        tenant has no such manifest."""
        ...

    def manifest_time(self, tenant: str, digest: str) -> float | None:
        """When the manifest was stored or last claimed (epoch seconds); None when absent."""
        ...

    def drop_chunk(self, tenant: str, digest: str) -> int:
        """Delete a chunk; the bytes freed (0 when it was not there)."""
        ...

    def put_manifest(self, tenant: str, digest: str, data: bytes) -> None:
        """Store a manifest; one already stored is claimed (`claim_manifest`) instead."""
        ...

    def read_manifest(self, tenant: str, digest: str) -> list[FileEntry] | None: ...

    def manifests(self, tenant: str) -> list[str]:
        """Digests of every manifest the tenant has stored."""
        ...

    def drop_manifest(self, tenant: str, digest: str) -> None: ...

    def drop_file(self, tenant: str, digest: str) -> None:
        """Forget a file assembled from several chunks, named `assembled_name(entry)` (its
        chunks stay until dropped)."""
        ...

    def assembled(self, tenant: str) -> list[str]:
        """Names of every assembled file the tenant's store holds."""
        ...

    def materialize(self, tenant: str, files: list[FileEntry], dest: Path) -> Path:
        """`files` as a read-only tree at `dest` (a local folder), built once; raises BlobError
        when a chunk is missing or a file's content does not match its hash."""
        ...


class LocalBlobStore:
    """Chunks, files and manifests under `root/tenants/TENANT/store/` (one file system)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _store(self, tenant: str) -> Path:
        if not tenant or "/" in tenant or tenant.startswith("."):
            raise ValueError(f"tenant name {tenant!r} is not a plain name")
        return self.root / "tenants" / tenant / "store"

    def _chunk(self, tenant: str, digest: str) -> Path:
        if not DIGEST.match(digest):
            raise ValueError(f"{digest!r} is not a SHA-256 digest")
        return self._store(tenant) / "chunks" / digest[:2] / digest

    def _manifest(self, tenant: str, digest: str) -> Path:
        if not DIGEST.match(digest):
            raise ValueError(f"{digest!r} is not a SHA-256 digest")
        return self._store(tenant) / "manifests" / f"{digest}.json"

    def claim_chunks(self, tenant: str, digests: Iterable[str]) -> dict[str, int]:
        sizes = {}
        for digest in digests:
            path = self._chunk(tenant, digest)
            try:
                os.utime(path)
                sizes[digest] = path.stat().st_size
            except FileNotFoundError:
                continue
        return sizes

    def chunk_times(self, tenant: str) -> dict[str, float]:
        times = {}
        for path in (self._store(tenant) / "chunks").glob("??/*"):
            if DIGEST.match(path.name):
                with contextlib.suppress(FileNotFoundError):
                    times[path.name] = path.stat().st_mtime
        return times

    @contextlib.contextmanager
    def lock(self, tenant: str, *, exclusive: bool) -> Iterator[None]:
        # flock: held per open file, so two threads of one process exclude each other too.
        path = self._store(tenant) / ".lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)  # lets go of the lock

    def claim_manifest(self, tenant: str, digest: str) -> bool:
        try:
            os.utime(self._manifest(tenant, digest))
        except FileNotFoundError:
            return False
        return True

    def manifest_time(self, tenant: str, digest: str) -> float | None:
        try:
            return self._manifest(tenant, digest).stat().st_mtime
        except FileNotFoundError:
            return None

    def staging(self, tenant: str) -> Path:
        folder = self._store(tenant) / "incoming"
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def put_chunk_file(self, tenant: str, digest: str, path: Path) -> bool:
        target = self._chunk(tenant, digest)
        os.chmod(path, 0o444)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, target)  # never over a chunk another upload stored meanwhile
        except FileExistsError:
            return False
        return True

    def drop_chunk(self, tenant: str, digest: str) -> int:
        target = self._chunk(tenant, digest)
        try:
            size = target.stat().st_size
            target.unlink()
        except FileNotFoundError:
            return 0
        return size

    def put_manifest(self, tenant: str, digest: str, data: bytes) -> None:
        if not _write_once(self._manifest(tenant, digest), data):
            self.claim_manifest(tenant, digest)

    def read_manifest(self, tenant: str, digest: str) -> list[FileEntry] | None:
        try:
            return parse_manifest(self._manifest(tenant, digest).read_bytes())
        except FileNotFoundError:
            return None

    def manifests(self, tenant: str) -> list[str]:
        folder = self._store(tenant) / "manifests"
        if not folder.is_dir():
            return []
        return sorted(p.stem for p in folder.glob("*.json") if DIGEST.match(p.stem))

    def drop_manifest(self, tenant: str, digest: str) -> None:
        self._manifest(tenant, digest).unlink(missing_ok=True)

    def drop_file(self, tenant: str, digest: str) -> None:
        if DIGEST.match(digest):
            (self._store(tenant) / "files" / digest[:2] / digest).unlink(missing_ok=True)

    def assembled(self, tenant: str) -> list[str]:
        folder = self._store(tenant) / "files"
        return [p.name for p in folder.glob("??/*") if DIGEST.match(p.name)]

    def materialize(self, tenant: str, files: list[FileEntry], dest: Path) -> Path:
        if dest.is_dir():
            return dest
        tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex}")
        try:
            tmp.mkdir(parents=True)
            for entry in files:
                target = tmp / entry.path
                target.parent.mkdir(parents=True, exist_ok=True)
                os.link(self._file(tenant, entry), target)
            for folder, _, _ in os.walk(tmp):
                os.chmod(folder, 0o755)
            try:
                os.rename(tmp, dest)
            except OSError:
                if not dest.is_dir():  # another process built the same tree first: keep it
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return dest

    def _file(self, tenant: str, entry: FileEntry) -> Path:
        """The file's content as one read-only file of the store: the chunk itself when it is
        one chunk, else its chunks put end to end once per chunk list (by the kernel where it
        can: a project of gigabytes is not read through Python again, nor hashed again)."""
        if not is_assembled(entry):
            path = self._chunk(tenant, entry.sha256)
            if not path.is_file():
                raise BlobError(f"{entry.path}: chunk {entry.sha256[:12]} is not stored")
            return path
        name = assembled_name(entry)
        path = self._store(tenant) / "files" / name[:2] / name
        if path.is_file():
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
        try:
            with open(tmp, "wb") as out:
                for chunk in entry.chunks:
                    try:
                        source = open(self._chunk(tenant, chunk), "rb")  # noqa: SIM115
                    except FileNotFoundError:
                        raise BlobError(f"{entry.path}: chunk {chunk[:12]} is not stored") from None
                    with source:
                        _append(source, out)
            if tmp.stat().st_size != entry.size:
                raise BlobError(f"{entry.path}: its chunks do not add up to the file's size")
            os.chmod(tmp, 0o444)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return path


def _append(source: BinaryIO, out: BinaryIO) -> None:
    """Copy the rest of `source` to the end of `out`: copy_file_range, else plain reads."""
    start = out.tell()
    try:
        while os.copy_file_range(source.fileno(), out.fileno(), 1 << 30):
            pass
        return
    except OSError:  # not on this file system or kernel: copy through memory
        out.seek(start)
        out.truncate()
        source.seek(0)
    shutil.copyfileobj(source, out, 8 << 20)


def _write_once(target: Path, data: bytes) -> bool:
    """Write `data` at `target` atomically, read-only; False when another writer won."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}")
    try:
        with open(tmp, "wb") as out:
            out.write(data)
        os.chmod(tmp, 0o444)
        try:
            os.link(tmp, target)
        except FileExistsError:
            return False
    finally:
        tmp.unlink(missing_ok=True)
    return True
