"""Where a tenant's stored things live under the data directory."""

from __future__ import annotations

from pathlib import Path


def tenant_dataset_dir(data_dir: Path, tenant: str, name: str) -> Path:
    """The files of tenant `tenant`'s data set `name` (what `sam data put` stored)."""
    return Path(data_dir) / "tenants" / tenant / "datasets" / name / "files"


def tenant_datasets_root(data_dir: Path, tenant: str) -> Path:
    """The folder of tenant `tenant`'s data sets (one folder per name)."""
    return Path(data_dir) / "tenants" / tenant / "datasets"


def tenant_project_dir(data_dir: Path, tenant: str, digest: str) -> Path:
    """Project `digest` of tenant `tenant` as a read-only tree (what a job sees at /job/src)."""
    return tenant_projects_root(data_dir, tenant) / digest


def tenant_projects_root(data_dir: Path, tenant: str) -> Path:
    """The folder of tenant `tenant`'s project trees (one folder per stored project)."""
    return Path(data_dir) / "tenants" / tenant / "projects"


DATASET_MANIFEST = "manifest"  # in a data set's folder, beside files/: its manifest's digest


def dataset_digest(folder: Path) -> str | None:
    """The digest of the manifest data set folder `folder` is built from (None: none, e.g. a
    data set an operator placed without an upload)."""
    try:
        return (folder / DATASET_MANIFEST).read_text().strip() or None
    except OSError:
        return None
