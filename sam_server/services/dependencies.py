"""Job dependencies with Slurm's meaning: `afterok:ID[:ID]`, `afterany:ID`, `afternotok:ID`,
`singleton`, joined by commas (every one must hold). An ID may name a whole array.

`parse_dependency` checks the text at submit; `dependency_status` is what the scheduler asks
each cycle: satisfied, waiting (reason `Dependency`) or never (`DependencyNeverSatisfied`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from sam_server.db.models import Job
from sam_server.errors import InvalidSpec
from sam_server.states import ENDED, JobState

KINDS = ("afterok", "afterany", "afternotok", "singleton")
NOT_OK = (JobState.FAILED.value, JobState.CANCELLED.value)

Status = Literal["satisfied", "waiting", "never"]


@dataclass(frozen=True)
class Condition:
    """One comma-separated part: a kind and the jobs (or arrays) it names."""

    kind: str
    job_ids: tuple[str, ...] = ()

    def text(self) -> str:
        return ":".join((self.kind, *self.job_ids))


def _dep_error(text: str, why: str) -> InvalidSpec:
    message = f"dependency {text!r}: {why}; write e.g. afterok:ID[:ID],afterany:ID,afternotok:ID,singleton"
    return InvalidSpec(message, errors=[{"field": "spec.dependency", "message": message}])


def parse_dependency(text: str) -> list[Condition]:
    """The conditions of a `--dependency` value, or `InvalidSpec` naming what is wrong."""
    raw = str(text).strip()
    if "?" in raw:
        raise _dep_error(raw, "'?' (any of) is not supported; use ',' (all of)")
    conditions = []
    for part in filter(None, (p.strip() for p in raw.split(","))):
        kind, *ids = part.split(":")
        if kind not in KINDS:
            raise _dep_error(raw, f"{kind!r} is not one of {', '.join(KINDS)}")
        ids = [i.strip() for i in ids if i.strip()]
        if kind == "singleton" and ids:
            raise _dep_error(raw, "singleton takes no job id")
        if kind != "singleton" and not ids:
            raise _dep_error(raw, f"{kind} needs at least one job id ({kind}:ID)")
        conditions.append(Condition(kind, tuple(ids)))
    if not conditions:
        raise _dep_error(raw, "no condition given")
    return conditions


def check_targets(session: Session, conditions: list[Condition], *, tenant_id: int | None) -> None:
    """Every job id named exists in the submitter's tenant (as a job or an array)."""
    wanted = {i for c in conditions for i in c.job_ids}
    if not wanted:
        return
    found = set(
        session.execute(
            select(Job.id).where(Job.id.in_(wanted), Job.tenant_id == tenant_id)
        ).scalars()
    )
    found |= {
        array_id
        for array_id in session.execute(
            select(Job.array_job_id).where(
                Job.array_job_id.in_(wanted - found), Job.tenant_id == tenant_id
            )
        ).scalars()
        if array_id is not None
    }
    missing = sorted(wanted - found)
    if missing:
        raise _dep_error(
            ",".join(c.text() for c in conditions),
            f"no job {', '.join(missing)} in your tenant (`sam queue --all` lists yours)",
        )


@dataclass(frozen=True)
class Verdict:
    status: Status
    message: str


def _targets(session: Session, ids: set[str], tenant_id: int) -> dict[str, list[str]]:
    """{named id: the states of the job, or of every task of the array, it names}."""
    out: dict[str, list[str]] = {i: [] for i in ids}
    if not ids:
        return out
    rows = session.execute(
        select(Job.id, Job.array_job_id, Job.state).where(
            or_(Job.id.in_(ids), Job.array_job_id.in_(ids)), Job.tenant_id == tenant_id
        )
    )
    for job_id, array_id, state in rows:
        key = job_id if job_id in out else array_id
        if key is not None:
            out[key].append(state)
    return out


def judge(condition: Condition, states: dict[str, list[str]]) -> Verdict:
    """One condition against the named jobs' states (singleton is judged by the caller)."""
    waiting, never = [], []
    for job_id in condition.job_ids:
        seen = states.get(job_id) or []
        if not seen:  # purged by retention: it ended, but how is no longer known
            if condition.kind != "afterany":
                never.append(f"{job_id} is no longer known")
            continue
        if any(s not in ENDED for s in seen):
            waiting.append(f"{job_id} has not ended")
        elif condition.kind == "afterok" and any(s != JobState.SUCCEEDED for s in seen):
            never.append(f"{job_id} did not succeed ({_summary(seen)})")
        elif condition.kind == "afternotok" and any(s == JobState.SUCCEEDED for s in seen):
            never.append(f"{job_id} succeeded")
    if never:
        return Verdict("never", f"{condition.text()}: {'; '.join(never)}")
    if waiting:
        return Verdict("waiting", f"{condition.text()}: {'; '.join(waiting)}")
    return Verdict("satisfied", condition.text())


def _summary(states: list[str]) -> str:
    counts: dict[str, int] = {}
    for s in states:
        counts[s] = counts.get(s, 0) + 1
    return ", ".join(f"{n} {s}" if len(states) > 1 else s for s, n in sorted(counts.items()))


def dependency_verdicts(session: Session, jobs: list[Job]) -> dict[str, Verdict]:
    """{job id: verdict} for every job of `jobs` with a dependency, in one query per kind.

    Singleton: no earlier job (submitted before it) with the same name and user is unfinished.
    """
    parsed = {j.id: parse_dependency(j.dependency) for j in jobs if j.dependency}
    if not parsed:
        return {}
    by_tenant: dict[int, set[str]] = {}
    for job in jobs:
        for c in parsed.get(job.id, []):
            by_tenant.setdefault(job.tenant_id, set()).update(c.job_ids)
    states: dict[int, dict[str, list[str]]] = {
        tenant: _targets(session, ids, tenant) for tenant, ids in by_tenant.items()
    }
    singles = _unfinished_by_name(session, [j for j in jobs if j.id in parsed])
    out = {}
    for job in jobs:
        if job.id not in parsed:
            continue
        verdicts = []
        for c in parsed[job.id]:
            if c.kind == "singleton":
                earlier = [s for s in singles.get((job.user_id, job.name), []) if s < job.seq]
                verdicts.append(
                    Verdict("waiting", f"singleton: an earlier {job.name!r} of yours is unfinished")
                    if earlier
                    else Verdict("satisfied", "singleton")
                )
            else:
                verdicts.append(judge(c, states.get(job.tenant_id, {})))
        out[job.id] = _combine(verdicts)
    return out


def _combine(verdicts: list[Verdict]) -> Verdict:
    for status in ("never", "waiting"):
        hit = [v.message for v in verdicts if v.status == status]
        if hit:
            return Verdict(status, "; ".join(hit))
    return Verdict("satisfied", ",".join(v.message for v in verdicts))


def _unfinished_by_name(session: Session, jobs: list[Job]) -> dict[tuple[int, str], list[int]]:
    """{(user id, name): seqs of that user's unfinished jobs of that name} for singletons."""
    names = {j.name for j in jobs if j.dependency and "singleton" in j.dependency}
    if not names:
        return {}
    rows = session.execute(
        select(Job.user_id, Job.name, Job.seq).where(Job.name.in_(names), Job.state.not_in(ENDED))
    )
    out: dict[tuple[int, str], list[int]] = {}
    for user_id, name, seq in rows:
        out.setdefault((user_id, name), []).append(seq)
    return out
