"""Checkpoint retention: only the newest K checkpoints of a job stay on disk."""

from __future__ import annotations

import numpy as np

from wse_sim.runtime import latest_checkpoint, load_checkpoint, prune_checkpoints, save_checkpoint


def test_prune_keeps_the_newest_k(tmp_path):
    for step in (50, 100, 150, 200, 250):
        save_checkpoint(tmp_path, step, {"w": np.full(3, step, dtype=np.float32)})
    assert prune_checkpoints(tmp_path, keep=2) == [50, 100, 150]
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == [
        "step-00000200.json",
        "step-00000200.npz",
        "step-00000250.json",
        "step-00000250.npz",
    ]
    step, path = latest_checkpoint(tmp_path)
    assert step == 250 and load_checkpoint(path)["w"][0] == 250
    assert prune_checkpoints(tmp_path, keep=2) == []
    assert prune_checkpoints(tmp_path / "missing", keep=1) == []
