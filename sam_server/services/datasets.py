"""Which data sets a job may read and where they are on the host (docs/data.md).

A name resolves to the tenant's own data set (`sam data put`) first, then to a shared data set
the cluster file offers to that tenant. Anything else (a name nobody has, another tenant's data
set, a shared one the tenant is not allowed) gets the same error: no answer tells a tenant what
others have.
"""

from __future__ import annotations

from pathlib import Path

from sam_server.config import ClusterConfig, Settings
from sam_server.errors import InvalidSpec
from sam_server.storage.layout import tenant_dataset_dir

MOUNT_ROOT = "/datasets"  # a data set NAME is at /datasets/NAME in the data sandbox


def unknown_dataset(name: str) -> InvalidSpec:
    message = (
        f"no data set {name!r} for your tenant: `sam data ls` lists yours and the shared "
        "data sets you may use"
    )
    return InvalidSpec(
        f"data.dataset: {message}", errors=[{"field": "spec.data.dataset", "message": message}]
    )


def resolve_dataset(data_dir: Path, cluster: ClusterConfig, tenant: str, name: str) -> Path:
    """The host path of data set `name` for `tenant`; InvalidSpec (422) when it has none."""
    own = tenant_dataset_dir(data_dir, tenant, name)
    if tenant and own.exists():
        return own.resolve()
    for shared in cluster.datasets:
        allowed = "*" in shared.tenants or tenant in shared.tenants
        if shared.name == name and allowed and tenant and Path(shared.path).exists():
            return Path(shared.path).resolve()
    raise unknown_dataset(name)


def dataset_mounts(settings: Settings, tenant: str, names: list[str]) -> dict[str, Path]:
    """{name: host path} of every data set a job names (InvalidSpec on the first unknown)."""
    if not names:
        return {}
    cluster = settings.load_cluster()
    return {n: resolve_dataset(settings.data_dir, cluster, tenant, n) for n in names}
