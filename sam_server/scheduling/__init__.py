"""SAM's scheduling policy: a pure `plan(snapshot, now) -> Plan` and the helpers around it.

No database, broker or clock inside; see `policy` for the cycle, `reasons` for the reason codes,
`fairshare` for usage decay and `quota.can_ever_fit` for the submit-time check.
"""

from sam_server.scheduling.fairshare import decay_usage, update_usage
from sam_server.scheduling.model import (
    Allocation,
    JobExplain,
    Plan,
    PolicyConfig,
    PolicyJob,
    PolicyQuota,
    PolicyWafer,
    Preempt,
    PriorityBreakdown,
    PriorityWeights,
    Reason,
    Reservation,
    Snapshot,
    Start,
    TenantState,
    WaferMetrics,
    easy_config,
    fcfs_config,
)
from sam_server.scheduling.policy import plan
from sam_server.scheduling.quota import can_ever_fit
from sam_server.scheduling.reasons import REASON_CODES

__all__ = [
    "Allocation",
    "PolicyJob",
    "JobExplain",
    "Plan",
    "PolicyConfig",
    "Preempt",
    "PriorityBreakdown",
    "PriorityWeights",
    "PolicyQuota",
    "REASON_CODES",
    "Reason",
    "Reservation",
    "Snapshot",
    "Start",
    "TenantState",
    "PolicyWafer",
    "WaferMetrics",
    "can_ever_fit",
    "decay_usage",
    "easy_config",
    "fcfs_config",
    "plan",
    "update_usage",
]
