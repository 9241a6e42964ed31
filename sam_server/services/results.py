"""Where a job's results live in the artifact store, and reading them back for their tenant.

The layout (under SAM_DATA_DIR), shared by wafer workers (writers) and the server (reader):
- checkpoints: `checkpoints/<job>/step-N.npz`, or `tenants/<tenant>/<checkpoint_dir>/<job>/`
  when the spec sets `run_options.checkpoint_dir` (a folder of the tenant's own space);
- final weights: `results/<job>/weights.pt`, a torch state_dict of the model's parameters and
  buffers under the model's own names, loadable with `torch.load(weights_only=True)`;
- the report: the job row (`GET .../report`) and its heatmaps under `reports/<job>/`.
Paths are built only from validated values (job ids, tenant names, `tenant_relative_dir`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from sam_domain.run import RunSpec

if TYPE_CHECKING:
    from sam_server.db.models import Job

WEIGHTS_FILE = "weights.pt"
_CKPT = re.compile(r"^step-(\d{8})\.json$")


def checkpoint_dir(data_dir: Path, *, job_id: str, tenant: str, spec: Mapping[str, object]) -> Path:
    """The folder of a job's checkpoints (see the module docstring)."""
    relative = RunSpec.of(spec).run.checkpoint_dir
    root = data_dir.resolve()
    if relative:
        return root / "tenants" / tenant / relative / job_id
    return root / "checkpoints" / job_id


def weights_path(data_dir: Path, job_id: str) -> Path:
    """The final weights file of a job (it exists once the job succeeded)."""
    return data_dir.resolve() / "results" / job_id / WEIGHTS_FILE


class CheckpointEntry(TypedDict):
    """A complete checkpoint: its step and its size in bytes."""

    step: int
    bytes: int


def list_checkpoints(directory: Path) -> list[CheckpointEntry]:
    """`[{step, bytes}]` of the complete checkpoints in `directory`, oldest first."""
    if not directory.is_dir():
        return []
    found: list[CheckpointEntry] = []
    for meta in directory.iterdir():
        match = _CKPT.match(meta.name)
        npz = meta.with_suffix(".npz")
        if match and npz.is_file():
            found.append({"step": int(match.group(1)), "bytes": npz.stat().st_size})
    return sorted(found, key=lambda c: c["step"])


def checkpoint_file(directory: Path, step: int) -> Path | None:
    """The .npz of checkpoint `step` in `directory` if it is complete, else None."""
    npz = directory / f"step-{int(step):08d}.npz"
    return npz if npz.is_file() and npz.with_suffix(".json").is_file() else None


def job_checkpoint_dir(data_dir: Path, job: Job) -> Path:
    """`checkpoint_dir` of a stored job."""
    return checkpoint_dir(data_dir, job_id=job.id, tenant=job.tenant.name, spec=job.spec)


def job_artifacts(data_dir: Path, job: Job) -> dict[str, object]:
    """What a job has to download, with the API path of each piece."""
    base = f"/api/v1/jobs/{job.id}"
    weights = weights_path(data_dir, job.id)
    checkpoints = [
        {**c, "url": f"{base}/checkpoints/{c['step']}"}
        for c in list_checkpoints(job_checkpoint_dir(data_dir, job))
    ]
    return {
        "job_id": job.id,
        "state": job.state,
        "weights": (
            {"url": f"{base}/weights", "bytes": weights.stat().st_size, "format": "torch"}
            if weights.is_file()
            else None
        ),
        "checkpoints": checkpoints,
        "checkpoint_dir": RunSpec.of(job.spec).run.checkpoint_dir,
        "report": f"{base}/report",
    }
