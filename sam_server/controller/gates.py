"""What keeps a waiting job away from the policy this cycle, as Slurm shows it: a hold
(`JobHeldUser`, `JobHeldAdmin`), an unmet dependency (`Dependency`, or
`DependencyNeverSatisfied`), an array's `%N` limit (`JobArrayTaskLimit`), or an array task
waiting for its twin's compile (`CompilePending`).

These are reasons, not states: the job stays queued/compiling/pending, and the snapshot simply
leaves it out, so the pure policy never places it. A job whose dependency can never be met is
cancelled when it (or the cluster: SAM_KILL_INVALID_DEPEND) asks for Slurm's kill_invalid_depend.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from sam_server.db.models import Job
from sam_server.services.dependencies import dependency_verdicts
from sam_server.services.dispatch import cancel_unsatisfiable, store_explanations
from sam_server.states import LEASED, WAITING, JobState

GATED_STATES = WAITING
# Tasks that count against an array's %N: on a wafer, or on their way to one.
IN_FLIGHT = LEASED


@dataclass(frozen=True)
class Gate:
    code: str
    message: str


def gate_jobs(session: Session, jobs: list[Any], *, kill_invalid_depend: bool) -> set[str]:
    """The ids of waiting jobs the policy must not see; writes each one's reasons (explain) and
    cancels those whose dependency can never be met if kill_invalid_depend applies. `jobs` are
    the cycle's plain rows (`snapshot.ActiveJob`): only a job to cancel is loaded as an object."""
    # only a held, dependent or array job can be gated (one cheap pass over 100,000 rows)
    waiting = [
        j
        for j in jobs
        if (j.hold or j.dependency or j.array_job_id)
        and j.state in GATED_STATES
        and not j.cancel_requested
    ]
    gates: dict[str, list[Gate]] = defaultdict(list)
    for job in waiting:
        if job.hold == "admin":
            gates[job.id].append(
                Gate("JobHeldAdmin", "held by an administrator; only one can release it")
            )
        elif job.hold:
            gates[job.id].append(Gate("JobHeldUser", f"held; `sam release {job.id}` lets it run"))
    by_id = {j.id: j for j in waiting}
    for job_id, verdict in dependency_verdicts(
        session, [j for j in waiting if j.dependency]
    ).items():
        job = by_id[job_id]
        if verdict.status == "never":
            if job.kill_invalid_depend or kill_invalid_depend:
                _kill(session, job, verdict.message)
                gates.pop(job_id, None)
                continue
            gates[job_id].append(
                Gate(
                    "DependencyNeverSatisfied", f"{verdict.message}; it can never start: cancel it"
                )
            )
        elif verdict.status == "waiting":
            gates[job_id].append(Gate("Dependency", f"waits for {verdict.message}"))
    _gate_arrays(jobs, waiting, gates)
    _write_reasons(session, [(by_id[job_id], reasons) for job_id, reasons in gates.items()])
    return set(gates)


def _gate_arrays(jobs: list[Any], waiting: list[Any], gates: dict[str, list[Gate]]) -> None:
    """Admit an array's lowest waiting tasks up to its %N (minus the tasks in flight), and of
    tasks with one compile hash send only one to a compile server."""
    tasks = sorted(
        (
            j
            for j in waiting
            if j.array_job_id and j.state != JobState.COMPILING and j.id not in gates
        ),
        key=lambda j: (j.array_job_id or "", j.array_task_id or 0),
    )
    if not tasks:
        return  # (no pass over every job when no array task waits)
    in_flight: dict[str, int] = defaultdict(int)
    compiling: dict[str, str] = {}
    for job in jobs:
        if job.array_job_id and job.state in IN_FLIGHT:
            in_flight[job.array_job_id] += 1
        if job.state == JobState.COMPILING and job.compile_hash:
            compiling.setdefault(job.compile_hash, job.id)
    admitted: dict[str, int] = defaultdict(int)
    for job in tasks:
        array = job.array_job_id or ""
        limit = job.array_max_running
        if limit is not None and in_flight[array] + admitted[array] >= limit:
            gates[job.id].append(
                Gate(
                    "JobArrayTaskLimit",
                    f"array {array} runs at most {limit} tasks at once (%{limit}); "
                    f"{in_flight[array]} are running or compiling",
                )
            )
            continue
        admitted[array] += 1
        if job.state == JobState.QUEUED and job.compile_hash:
            twin = compiling.setdefault(job.compile_hash, job.id)
            if twin != job.id:
                gates[job.id].append(
                    Gate("CompilePending", f"shares the compile of {twin} (identical inputs)")
                )


def _kill(session: Session, row: Any, why: str) -> None:
    job = session.get(Job, row.id)
    if job is None:
        return
    cancel_unsatisfiable(session, job, why=why)


def _write_reasons(session: Session, gated: list[tuple[Any, list[Gate]]]) -> None:
    """Store the explanation of each gated job whose first reason changed, in one UPDATE: with
    an array of 10,000 tasks held at %10, rewriting every task each cycle would cost as much as
    the whole plan."""
    changed = [
        {
            "_id": row.id,
            "reason": reasons[0].code,
            "explain": {
                "position": None,
                "reasons": [{"code": g.code, "message": g.message} for g in reasons],
                "eta": None,
            },
        }
        for row, reasons in gated
        if row.reason != reasons[0].code
    ]
    store_explanations(session, changed)
