"""`arch` (Filter): a job compiled for one wafer arch ("wse2", "wse3") runs only on wafers of it.

A job or wafer that names no arch (trace replays) matches every wafer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from sam_server.scheduling.framework.cycle import CycleState
from sam_server.scheduling.framework.points import Filter
from sam_server.scheduling.model import PolicyJob, arch_matches


@dataclass(frozen=True)
class ArchArgs:
    """No arguments: the arch is the job's compile target's."""


@dataclass(frozen=True)
class Arch(Filter):
    name: ClassVar[str] = "arch"
    args: ArchArgs = field(default_factory=ArchArgs)

    def wafers(self, state: CycleState, job: PolicyJob) -> list[bool] | None:
        if job.arch is None:
            return None
        return [arch_matches(w, job) for w in state.snapshot.wafers]
