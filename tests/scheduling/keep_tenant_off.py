"""A scheduling plugin written as docs/architecture.md ("Writing a scheduling plugin") shows:
no job of tenant X on wafer Y. One file; `test_writing_a_plugin.py` adds it to a profile."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from sam_server.scheduling.framework.cycle import CycleState
from sam_server.scheduling.framework.points import Filter
from sam_server.scheduling.model import PolicyJob


@dataclass(frozen=True)
class KeepTenantOffArgs:
    """- tenant: whose jobs are kept off.
    - wafer: the id of the wafer they never run on."""

    tenant: str = ""
    wafer: str = ""


@dataclass(frozen=True)
class KeepTenantOff(Filter):
    name: ClassVar[str] = "keep_tenant_off"
    args: KeepTenantOffArgs = field(default_factory=KeepTenantOffArgs)

    def wafers(self, state: CycleState, job: PolicyJob) -> list[bool] | None:
        if job.tenant != self.args.tenant:
            return None  # every wafer
        return [w.id != self.args.wafer for w in state.snapshot.wafers]
