"""Where a tenant's stored things live under the data directory."""

from __future__ import annotations

from pathlib import Path


def tenant_dataset_dir(data_dir: Path, tenant: str, name: str) -> Path:
    """The files of tenant `tenant`'s data set `name` (what `sam data put` stored)."""
    return Path(data_dir) / "tenants" / tenant / "datasets" / name / "files"
