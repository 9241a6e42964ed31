"""`sam up`'s embedded cluster (SQLite, filesystem broker, real worker processes) for e2e tests:
started from a cluster file, ready, stopped again however the test ends."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import free_port

TINY = "wafers:\n  - {id: tiny, arch: wse2, rows: 64, cols: 64}\ncompile_servers: 1\n"


@contextmanager
def running_cluster(
    root: Path, cluster_yaml: str, *, admin_token: str, ready_s: float = 120, **env: str
) -> Iterator:  # type: ignore[type-arg]
    """A started Cluster with its data under `root`; `env`: SAM_* settings for its processes
    (a database or broker URL from the environment is dropped: the embedded ones are used)."""
    from sam_server.config import Settings
    from sam_worker.supervisor import Cluster

    cluster_file = root / "cluster.yaml"
    cluster_file.write_text(cluster_yaml)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SAM_CLUSTER", str(cluster_file))
        for key, value in env.items():
            mp.setenv(key, value)
        for key in ("SAM_DATABASE_URL", "SAM_BROKER_URL"):
            mp.delenv(key, raising=False)
        cluster = Cluster(
            Settings(data_dir=root / "data", admin_token=admin_token), port=free_port()
        )
        cluster.start()
        try:
            cluster.wait_ready(ready_s)
            yield cluster
        finally:
            cluster.stop()
