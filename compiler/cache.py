"""The compile cache: content-addressed artifacts plus a cheap request index.

- `request_key` hashes what the user sent (the spec's compile sections, sam_domain.compile, the uploaded files,
  region shape, arch, mode, compiler and torch versions) without tracing: a hit costs a hash and
  a small JSON read.
- `content_key` hashes what was compiled (the canonical graph, the initial tensors, the compile
  options, arch, region shape, compiler and torch versions): two requests that trace to the same
  graph share one artifact.
Layout: CACHE/index/<request_key>.json -> {"cache_key", "artifact" (relative dir or null),
"summary"} or {"error": {kind, message, details}} for a cached unsupported_op/compile_oom; CACHE/artifacts/<cache_key>/ (see `compiler.artifact`). Every write is a temp file
or directory renamed into place, so concurrent compiles of one key never corrupt the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from compiler import COMPILER_VERSION
from compiler.ir import canonical_json
from compiler.plan_options import PlanOptions
from sam_domain.compile import compile_sections

TYPE_CHECKING = False
if TYPE_CHECKING:
    from sam_domain.compile import CompileSummary
    from sam_domain.ir import IrGraph


@lru_cache(maxsize=1)
def torch_version() -> str:
    """The installed torch version, read from package metadata (no torch import)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        return "unknown"


def _scoped(body: dict[str, Any], namespace: str | None) -> dict[str, Any]:
    """`body` with the cache namespace (the tenant) in it; no namespace keeps the old keys."""
    return body if namespace is None else dict(body, namespace=namespace)


def _sources(
    body: dict[str, Any], spec: dict[str, Any], datasets: Mapping[str, str] | None
) -> dict[str, Any]:
    """`body` with what the trace reads besides the uploaded files: the project (its digest: a
    runner job's model.py or data_utils.py is in the project, not in `files`) and the data sets
    a runner job's script reads at compile (their resolved folders, `dataset_fingerprint`).
    Neither set keeps the old keys."""
    if spec.get("project"):
        body = dict(body, project=spec["project"])
    if datasets:
        body = dict(body, datasets=dict(sorted(datasets.items())))
    return body


def dataset_fingerprint(datasets: Mapping[str, Path] | None) -> dict[str, str]:
    """{name: resolved folder, its inode and mtime} of the data sets bound at compile: `sam data
    put` swaps a new folder in for each version (same path, another inode), so a replaced data
    set compiles afresh. A folder whose files are changed in place keeps its fingerprint."""
    found = {}
    for name, path in (datasets or {}).items():
        folder = Path(path).resolve()
        try:
            stat = folder.stat()
        except OSError:
            found[name] = str(folder)
            continue
        found[name] = f"{folder}:{stat.st_ino}:{stat.st_mtime_ns}"
    return found


def request_key(
    spec: dict[str, Any],
    files: dict[str, str],
    region: tuple[int, int],
    arch: str,
    mode: str,
    namespace: str | None = None,
    datasets: Mapping[str, str] | None = None,
) -> str:
    """First-level key: a hash of the request, computable in well under a millisecond.

    `namespace` (the tenant) is part of every key, so one tenant's compile is never a cache hit
    for another's: the cache cannot tell a tenant what others compiled.
    """
    keyed = compile_sections(spec)  # the spec sections that change the compiled step
    body = {
        "spec": keyed,
        "files": dict(sorted(files.items())),
        "region": list(region),
        "arch": arch,
        "mode": mode,
        "compiler": COMPILER_VERSION,
        "torch": torch_version(),
    }
    body = _sources(body, spec, datasets)
    return hashlib.sha256(canonical_json(_scoped(body, namespace)).encode()).hexdigest()


_STEP_OPTIONS = ("fp16_enabled", "_micro_batches")


def trace_key(
    spec: dict[str, Any],
    files: dict[str, str],
    namespace: str | None = None,
    datasets: Mapping[str, str] | None = None,
) -> str:
    """Hash of what tracing depends on: the model, data and train sections and the files."""
    traced: dict[str, Any] = {s: spec.get(s) for s in ("model", "data", "train")}
    if spec.get("entry"):  # a runner job's script and epochs (its schedule spans them)
        sections = compile_sections(spec)
        traced.update(entry=sections["entry"], epochs=sections["epochs"])
    body = {
        "spec": traced,
        # fp16 turns loss scaling on and micro-batching changes the traced shapes
        "step": {k: (spec.get("compile_options") or {}).get(k) for k in _STEP_OPTIONS},
        "files": dict(sorted(files.items())),
        "compiler": COMPILER_VERSION,
    }
    body = _sources(body, spec, datasets)
    return hashlib.sha256(canonical_json(_scoped(body, namespace)).encode()).hexdigest()


def content_key(
    graph: IrGraph,
    tensors: dict[str, np.ndarray],
    options: PlanOptions,
    arch: str,
    region: tuple[int, int],
    namespace: str | None = None,
) -> str:
    """Second-level key: graph, shapes, dtypes, initial values, options, arch, region, versions
    (and the namespace: tenants never share an artifact, so none can observe or alter
    another's)."""
    digest = hashlib.sha256()
    digest.update(canonical_json(graph).encode())
    for name in sorted(tensors):
        array = np.ascontiguousarray(tensors[name])
        digest.update(f"{name}:{array.dtype}:{array.shape}".encode())
        digest.update(array.tobytes())
    rest = {
        "options": options,
        "arch": arch,
        "region": list(region),
        "compiler": COMPILER_VERSION,
        "torch": torch_version(),
    }
    digest.update(canonical_json(_scoped(rest, namespace)).encode())
    return digest.hexdigest()


def artifact_dir(cache_dir: Path, key: str) -> Path:
    """Where the artifact of content key `key` lives."""
    return Path(cache_dir) / "artifacts" / key


class IndexEntry(TypedDict, total=False):
    """A request key's index entry: what its compile gave (the content key, the artifact's path
    under the cache, None for validate_only, its digest and the summary), or the error of a
    deterministic verdict (unsupported_op, compile_oom), cached so a resubmit fails at once."""

    cache_key: str
    artifact: str | None
    summary: CompileSummary
    digest: str
    error: dict[str, Any]  # CompileError.to_dict()


def read_index(cache_dir: Path, req_key: str) -> IndexEntry | None:
    """The index entry of a request key, if it exists and its artifact is complete."""
    path = Path(cache_dir) / "index" / f"{req_key}.json"
    try:
        entry: IndexEntry = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    artifact = entry.get("artifact")
    if artifact and not (Path(cache_dir) / artifact / "manifest.json").exists():
        return None
    return entry


def write_index(cache_dir: Path, req_key: str, entry: IndexEntry) -> None:
    """Atomically publish an index entry."""
    directory = Path(cache_dir) / "index"
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{req_key}.", dir=directory)
    with os.fdopen(fd, "w") as handle:
        json.dump(entry, handle)
    os.replace(tmp, directory / f"{req_key}.json")
