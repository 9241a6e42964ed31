"""Checkpoints: the job's state as `.npz` (allow_pickle=False) plus a small JSON, written atomically.

Layout in `checkpoint_dir`: `step-00000050.npz` and `step-00000050.json` ({"step": 50, "npz": ...,
"sha256": the .npz's hash}). The JSON is written last (both through a temporary file and
os.replace), so a checkpoint whose JSON exists is complete; `latest_checkpoint` only trusts those.
`load_checkpoint` checks the .npz against the recorded hash: a changed checkpoint is never loaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import numpy as np

_NAME = re.compile(r"^step-(\d{8})\.json$")


class CheckpointError(ValueError):
    """A checkpoint is unreadable or belongs to another job; resume from an older one or restart."""


def save_checkpoint(checkpoint_dir: Path, step: int, state: dict[str, np.ndarray]) -> Path:
    """Write `state` as the checkpoint of `step` (steps done); returns the .npz path."""
    directory = Path(checkpoint_dir)
    directory.mkdir(parents=True, exist_ok=True)
    npz = directory / f"step-{step:08d}.npz"
    tmp = directory / f".step-{step:08d}.npz.tmp"
    with open(tmp, "wb") as handle:
        # numpy's stubs let **arrays collide with savez's allow_pickle: bool keyword
        np.savez(handle, **state)  # type: ignore[arg-type]
        handle.flush()
        os.fsync(handle.fileno())
    digest = _sha256(tmp)
    os.replace(tmp, npz)
    meta_tmp = directory / f".step-{step:08d}.json.tmp"
    meta = {"step": int(step), "npz": npz.name, "tensors": sorted(state), "sha256": digest}
    meta_tmp.write_text(json.dumps(meta))
    os.replace(meta_tmp, directory / f"step-{step:08d}.json")
    return npz


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def list_checkpoints(checkpoint_dir: Path | None) -> list[tuple[int, Path]]:
    """(step, .npz path) of every complete checkpoint in the directory, newest first."""
    if checkpoint_dir is None or not Path(checkpoint_dir).is_dir():
        return []
    found = []
    for path in Path(checkpoint_dir).iterdir():
        match = _NAME.match(path.name)
        if match and (path.with_suffix(".npz")).exists():
            found.append((int(match.group(1)), path.with_suffix(".npz")))
    return sorted(found, reverse=True)


def latest_checkpoint(checkpoint_dir: Path | None) -> tuple[int, Path] | None:
    """(step, .npz path) of the newest complete checkpoint in the directory, or None."""
    found = list_checkpoints(checkpoint_dir)
    return found[0] if found else None


def set_aside(path: Path) -> None:
    """Rename a checkpoint that failed its check (kept for inspection, never listed again)."""
    path = Path(path)
    for part in (path.with_suffix(".json"), path):
        try:
            os.replace(part, part.with_name(f".corrupt-{part.name}"))
        except OSError:
            pass


def checkpoint_sha256(path: Path) -> str | None:
    """The hash recorded in a checkpoint's JSON when it was saved (None if unreadable)."""
    try:
        meta = json.loads(Path(path).with_suffix(".json").read_text())
    except (OSError, ValueError):
        return None
    value = meta.get("sha256") if isinstance(meta, dict) else None
    return value if isinstance(value, str) else None


def verify_checkpoint(path: Path, expected_sha256: str | None = None) -> None:
    """`CheckpointError` unless the .npz matches the hash recorded when it was saved: its JSON's,
    and `expected_sha256` (kept apart from the file, e.g. in the database) when given."""
    path = Path(path)
    recorded = checkpoint_sha256(path)
    try:
        actual = _sha256(path)
    except OSError as exc:
        raise CheckpointError(f"cannot check checkpoint {path}: {exc}") from exc
    if recorded is None or actual != recorded or expected_sha256 not in (None, actual):
        raise CheckpointError(
            f"checkpoint {path.name} does not match the hash recorded when it was saved "
            "(changed since, or saved without one); it is not loaded"
        )


def load_checkpoint(path: Path, *, expected_sha256: str | None = None) -> dict[str, np.ndarray]:
    """The state saved in a checkpoint .npz, once it matches its recorded hash (no pickles are
    ever loaded)."""
    verify_checkpoint(path, expected_sha256)
    try:
        with np.load(Path(path), allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    except (OSError, ValueError) as exc:
        raise CheckpointError(
            f"cannot read checkpoint {path}: {exc}; resume from an older checkpoint"
        ) from exc


def prune_checkpoints(checkpoint_dir: Path | None, keep: int) -> list[int]:
    """Delete every complete checkpoint but the newest `keep`; returns the steps removed.

    The JSON (the mark of completeness) goes first, so a crash mid-way never leaves a JSON that
    names a missing .npz.
    """
    if checkpoint_dir is None or not Path(checkpoint_dir).is_dir() or keep < 1:
        return []
    steps = sorted(
        int(m.group(1)) for p in Path(checkpoint_dir).iterdir() if (m := _NAME.match(p.name))
    )
    removed = steps[:-keep]
    for step in removed:
        base = Path(checkpoint_dir) / f"step-{step:08d}"
        base.with_suffix(".json").unlink(missing_ok=True)
        base.with_suffix(".npz").unlink(missing_ok=True)
    return removed
