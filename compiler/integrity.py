"""Content hashes of artifacts, checked whenever one is loaded or reused from the cache.

An artifact's manifest lists the SHA-256 of every other file in it ("files"); the artifact's
digest is the SHA-256 of the manifest itself. Trusted code keeps that digest outside the
artifact (the compile index, the job row in the database), so a changed file is caught twice:
its hash no longer matches the manifest, and a rewritten manifest no longer matches the digest.
A mismatch is never run: a cache entry is recompiled, a job fails with `artifact_corrupt`.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

from compiler.errors import ArtifactCorrupt

_CHUNK = 1 << 20


# path -> ((inode, size, ctime_ns), sha256): a file unchanged since it was last hashed in this
# process is not read again (a cached compile stays a few stat calls). ctime cannot be set
# back by a file's writer, unlike mtime, so any later write invalidates the entry.
_SEEN: OrderedDict[str, tuple[tuple[int, int, int], str]] = OrderedDict()
_SEEN_MAX = 4096


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file, read in chunks (remembered while the file is unchanged)."""
    key = os.fspath(path)
    before = os.stat(key)
    stamp = (before.st_ino, before.st_size, before.st_ctime_ns)
    known = _SEEN.get(key)
    if known is not None and known[0] == stamp:
        _SEEN.move_to_end(key)
        return known[1]
    digest = hashlib.sha256()
    with open(key, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    after = os.stat(key)
    if (after.st_ino, after.st_size, after.st_ctime_ns) == stamp:  # not written meanwhile
        _SEEN[key] = (stamp, digest.hexdigest())
        while len(_SEEN) > _SEEN_MAX:
            _SEEN.popitem(last=False)
    return digest.hexdigest()


def hash_files(root: Path) -> dict[str, str]:
    """{relative path: sha256} of every file under `root` except manifest.json."""
    out = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if rel != "manifest.json":
            out[rel] = file_sha256(path)
    return out


def artifact_digest(root: Path) -> str:
    """The digest of an artifact: the SHA-256 of its manifest (which lists every file's hash)."""
    return file_sha256(Path(root) / "manifest.json")


# artifact dir -> (stat stamps of all its files, manifest digest, manifest): an artifact none
# of whose files changed since it last passed is not re-read (a cached compile stays cheap).
_VERIFIED: OrderedDict[str, tuple[dict[str, tuple[int, int, int]], str, dict[str, Any]]] = (
    OrderedDict()
)


def _stamps(root: Path, prefix: str = "") -> dict[str, tuple[int, int, int]]:
    """{relative path: (inode, size, ctime)} of every entry under `root` (os.scandir: pathlib
    cost ~40 ms per cached compile of a 60-file artifact)."""
    out = {}
    with os.scandir(root) as entries:
        for entry in entries:
            st = entry.stat(follow_symlinks=False)
            out[prefix + entry.name] = (st.st_ino, st.st_size, st.st_ctime_ns)
            if entry.is_dir(follow_symlinks=False):
                out.update(_stamps(Path(entry.path), f"{prefix}{entry.name}/"))
    return out


def verify_artifact(root: Path, expected: str | None = None) -> dict[str, object]:
    """The artifact's manifest if every file matches its hash (and the manifest `expected`, when
    given); raises `ArtifactCorrupt` naming the first mismatch otherwise."""
    root = Path(root)
    key = os.fspath(root.resolve())
    stamps = _stamps(root)
    known = _VERIFIED.get(key)
    if known is not None and known[0] == stamps and expected in (None, known[1]):
        _VERIFIED.move_to_end(key)
        return known[2]
    manifest = _verify_files(root, expected)
    if _stamps(root) == stamps:  # nothing was written while we checked
        _VERIFIED[key] = (stamps, artifact_digest(root), manifest)
        while len(_VERIFIED) > 256:
            _VERIFIED.popitem(last=False)
    return manifest


def _verify_files(root: Path, expected: str | None) -> dict[str, object]:
    raw = (root / "manifest.json").read_bytes()
    if expected is not None and hashlib.sha256(raw).hexdigest() != expected:
        raise ArtifactCorrupt(_message(root, "manifest.json"))
    manifest: dict[str, object] = json.loads(raw)
    listed = manifest.get("files")
    if not isinstance(listed, dict):
        raise ArtifactCorrupt(_message(root, "manifest.json (no file hashes)"))
    found = hash_files(root)
    for name in sorted(set(listed) | set(found)):
        if listed.get(name) != found.get(name):
            raise ArtifactCorrupt(_message(root, name))
    return manifest


def quarantine(root: Path) -> Path | None:
    """Move a corrupt artifact aside (kept for inspection, never loaded again); its cache index
    entries stop resolving, so the next compile of its inputs rebuilds it."""
    root = Path(root)
    target = root.parent / ".quarantine" / f"{root.name}-{time.time_ns()}"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(root, target)
    except OSError:
        return None
    return target


def _message(root: Path, name: str) -> str:
    return (
        f"the compiled artifact {root.name[:16]} failed its integrity check ({name} changed "
        "after it was written); it was not run and has been set aside: resubmit the job to "
        "recompile it, and tell an admin"
    )
