"""`quota` (Filter): a job its tenant's quotas hold (max PEs, max running jobs) is skipped.

It neither starts nor holds back the jobs behind it (`sam explain` says which quota holds it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from sam_server.scheduling.framework.cycle import CycleState
from sam_server.scheduling.framework.points import Filter
from sam_server.scheduling.model import PolicyJob


@dataclass(frozen=True)
class QuotaArgs:
    """No arguments: the quotas are the tenants' (docs/contract.md section 2)."""


@dataclass(frozen=True)
class Quota(Filter):
    name: ClassVar[str] = "quota"
    args: QuotaArgs = field(default_factory=QuotaArgs)

    def admits(self, state: CycleState, job: PolicyJob) -> bool:
        return state.ledger.allows(job)
