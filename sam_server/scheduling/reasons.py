"""Why a job is not running: the reason codes of `sam explain`, `GET /jobs/{id}/explain` and
`GET /queue`. A waiting job carries EVERY reason that holds for it, not just the first.

| code                  | meaning                                                                    | what the user can do |
|-----------------------|----------------------------------------------------------------------------|----------------------|
| `CompilePending`      | queued for compilation; waits for a free compile server (or was just sent) | wait; its position says how many compiles are ahead |
| `Compiling`           | its training step is being compiled                                        | wait |
| `Priority`            | higher-priority jobs are waiting ahead of it                                | wait, or raise the class |
| `Resources`           | no online wafer has enough free PEs for its region now                      | wait for running jobs to end (see ETA) |
| `Fragmented`          | enough PEs are free in total, but no free rectangle has its shape           | wait, or ask for a smaller / differently shaped region |
| `ReservedFor`         | a free rectangle fits it only inside the region reserved for the named job, and it would not end before that job starts | shorten `time_limit` so it ends before the reservation |
| `Preempting`          | lower-class jobs are being stopped (checkpointed) to make room for it      | wait; it starts once they have stopped |
| `QuotaMaxPes`         | its tenant's running jobs plus this one would exceed `max_pes`              | wait for the tenant's jobs to end, or ask an admin |
| `QuotaMaxRunningJobs` | its tenant already runs `max_running_jobs` jobs                             | wait for the tenant's jobs to end, or ask an admin |
| `QuotaMaxQueuedJobs`  | its tenant has more unfinished jobs than `max_queued_jobs` (the quota was lowered after submit); the newest wait | cancel other jobs, or ask an admin |
| `WaferUnavailable`    | no online wafer is large enough for its region (a wafer is offline)         | wait for the wafer to come back |

Jobs that can never run (a region larger than every wafer, more PEs than `max_pes`) are rejected
at submit by `quota.can_ever_fit`, never left waiting.
"""

from __future__ import annotations

from sam_server.scheduling.model import JobId, Reason

COMPILE_PENDING = "CompilePending"
COMPILING = "Compiling"
PRIORITY = "Priority"
RESOURCES = "Resources"
FRAGMENTED = "Fragmented"
RESERVED_FOR = "ReservedFor"
PREEMPTING = "Preempting"
QUOTA_MAX_PES = "QuotaMaxPes"
QUOTA_MAX_RUNNING_JOBS = "QuotaMaxRunningJobs"
QUOTA_MAX_QUEUED_JOBS = "QuotaMaxQueuedJobs"
WAFER_UNAVAILABLE = "WaferUnavailable"

REASON_CODES: tuple[str, ...] = (
    COMPILE_PENDING,
    COMPILING,
    PRIORITY,
    RESOURCES,
    FRAGMENTED,
    RESERVED_FOR,
    PREEMPTING,
    QUOTA_MAX_PES,
    QUOTA_MAX_RUNNING_JOBS,
    QUOTA_MAX_QUEUED_JOBS,
    WAFER_UNAVAILABLE,
)
"""Every code a `Reason` may carry (the table above)."""


def compile_pending(slots_ahead: int, dispatched: bool) -> Reason:
    """The job waits for (or was just given) a compile server."""
    if dispatched:
        return Reason(COMPILE_PENDING, "sent to a compile server this cycle")
    return Reason(
        COMPILE_PENDING,
        f"waiting for a free compile server; position {slots_ahead + 1} in the compile queue "
        f"({slots_ahead} compiles ahead; tenants share the slots fairly)",
    )


def compiling() -> Reason:
    """The job is being compiled."""
    return Reason(COMPILING, "being compiled")


def priority(ahead: int) -> Reason:
    """Higher-priority jobs wait ahead of this one."""
    return Reason(PRIORITY, f"{ahead} higher-priority jobs are waiting ahead of it")


def resources(pes: int, most_free: int) -> Reason:
    """Not enough free PEs on any wafer."""
    return Reason(RESOURCES, f"needs {pes} PEs; the most free on one online wafer is {most_free}")


def fragmented(rows: int, cols: int, largest: tuple[int, int]) -> Reason:
    """Enough PEs free, but not in the job's shape."""
    return Reason(
        FRAGMENTED,
        f"needs a {rows}x{cols} rectangle; enough PEs are free but the largest free rectangle "
        f"is {largest[0]}x{largest[1]}",
    )


def reserved_for(job_id: JobId, start: float, wafer_id: str) -> Reason:
    """It only fits inside another job's reservation and would not end before it starts."""
    return Reason(
        RESERVED_FOR,
        f"the free space that fits it is reserved on wafer {wafer_id} for job {job_id} from "
        f"t={start:.0f}; a shorter time_limit would let it run before then",
    )


def preempting(victims: list[JobId]) -> Reason:
    """Lower-class jobs are being stopped for it."""
    names = ", ".join(str(v) for v in victims)
    return Reason(PREEMPTING, f"lower-class jobs {names} are checkpointing to make room")


def quota_max_pes(used: int, pes: int, limit: int) -> Reason:
    """The tenant's max_pes would be exceeded."""
    return Reason(QUOTA_MAX_PES, f"tenant runs {used} PEs; +{pes} would exceed max_pes={limit}")


def quota_max_running(running: int, limit: int) -> Reason:
    """The tenant runs max_running_jobs already."""
    return Reason(QUOTA_MAX_RUNNING_JOBS, f"tenant runs {running} jobs; max_running_jobs={limit}")


def quota_max_queued(limit: int) -> Reason:
    """The tenant has more unfinished jobs than max_queued_jobs."""
    return Reason(
        QUOTA_MAX_QUEUED_JOBS,
        f"tenant has more than max_queued_jobs={limit} unfinished jobs; newer ones wait",
    )


def wafer_unavailable(rows: int, cols: int) -> Reason:
    """No online wafer is large enough."""
    return Reason(WAFER_UNAVAILABLE, f"no online wafer can hold {rows}x{cols}; one is offline")
