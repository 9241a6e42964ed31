"""Checkpoints: the job's state as `.npz` (allow_pickle=False) plus a small JSON, written atomically.

Layout in `checkpoint_dir`: `step-00000050.npz` and `step-00000050.json` ({"step": 50, "npz": ...}).
The JSON is written last (both through a temporary file and os.replace), so a checkpoint whose
JSON exists is complete; `latest_checkpoint` only trusts those.
"""

from __future__ import annotations

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
        np.savez(handle, **state)  # type: ignore[arg-type]
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, npz)
    meta_tmp = directory / f".step-{step:08d}.json.tmp"
    meta_tmp.write_text(json.dumps({"step": int(step), "npz": npz.name, "tensors": sorted(state)}))
    os.replace(meta_tmp, directory / f"step-{step:08d}.json")
    return npz


def latest_checkpoint(checkpoint_dir: Path | None) -> tuple[int, Path] | None:
    """(step, .npz path) of the newest complete checkpoint in the directory, or None."""
    if checkpoint_dir is None or not Path(checkpoint_dir).is_dir():
        return None
    found = []
    for path in Path(checkpoint_dir).iterdir():
        match = _NAME.match(path.name)
        if match and (path.with_suffix(".npz")).exists():
            found.append((int(match.group(1)), path.with_suffix(".npz")))
    return max(found) if found else None


def load_checkpoint(path: Path) -> dict[str, np.ndarray]:
    """The state saved in a checkpoint .npz (no pickles are ever loaded)."""
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
