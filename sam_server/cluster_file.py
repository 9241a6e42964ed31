"""The cluster file (`SAM_CLUSTER`): wafers, compile servers, shared data sets."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator


def arch_grid(arch: str) -> tuple[int, int]:
    """(rows, cols) of an architecture's usable fabric: the simulator's figures (wse_sim.arch is
    the one source). Imported here, not at the top: only reading a cluster file needs it, and
    the API and policy processes that never read one should not import the simulator."""
    from wse_sim.arch import get_arch

    found = get_arch(arch)
    return found.rows, found.cols


class WaferConfig(BaseModel):
    """One simulated wafer of the cluster file."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
    arch: Literal["wse2", "wse3"] = "wse2"
    rows: int | None = Field(default=None, ge=1)
    cols: int | None = Field(default=None, ge=1)
    # Jobs this wafer runs at once: its worker runs that many threads, and the policy never
    # places more regions on it (a placed region that no thread runs would only hold PEs).
    max_jobs: int = Field(default=16, ge=1, le=256)

    @model_validator(mode="after")
    def _fit_arch(self) -> WaferConfig:
        full_rows, full_cols = arch_grid(self.arch)
        self.rows = self.rows or full_rows
        self.cols = self.cols or full_cols
        if self.rows > full_rows or self.cols > full_cols:
            raise ValueError(
                f"wafer {self.id}: {self.rows}x{self.cols} exceeds the {self.arch} fabric "
                f"({full_rows}x{full_cols})"
            )
        return self


class SharedDataset(BaseModel):
    """A site's data set offered read-only to some tenants (the HPC /datasets tree)."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}$")
    path: Path  # a host directory (or file) every wafer worker can read
    tenants: list[str] = Field(default_factory=list)  # the tenants allowed; ["*"] = all


class ClusterConfig(BaseModel):
    """The cluster file (``SAM_CLUSTER``): wafers and the number of compile servers."""

    model_config = ConfigDict(extra="forbid")
    wafers: list[WaferConfig] = Field(min_length=1)
    compile_servers: int = Field(default=1, ge=1)
    # Compiles each compile server runs at once (`sam worker compile` runs that many threads).
    compile_slots: int = Field(default=2, ge=1, le=64)
    datasets: list[SharedDataset] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_ids(self) -> ClusterConfig:
        ids = [w.id for w in self.wafers]
        if len(ids) != len(set(ids)):
            raise ValueError("wafer ids must be unique")
        return self


DEFAULT_CLUSTER = ClusterConfig(
    wafers=[WaferConfig(id="wse-0", arch="wse2"), WaferConfig(id="wse-1", arch="wse2")],
    compile_servers=1,
)


_PARSED: dict[Path, tuple[tuple[int, int], object]] = {}


def cluster_yaml(path: Path) -> object:
    """The parsed cluster file, parsed again only when it changed (the scheduler reads it every
    cycle; YAML parsing a 100-wafer file took 0.2 s)."""
    stat = path.stat()
    stamp = (stat.st_mtime_ns, stat.st_size)
    cached = _PARSED.get(path)
    if cached is None or cached[0] != stamp:
        cached = (stamp, yaml.safe_load(path.read_text()))
        _PARSED[path] = cached
    return cached[1]
