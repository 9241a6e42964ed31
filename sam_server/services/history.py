"""A job's history at scale: log windows (`tail`, `since`), metrics kept compactly (recent steps
as rows, older ones packed into compressed chunks) and read back server-side (`last`)."""

from __future__ import annotations

import math
import sys
import zlib
from array import array
from datetime import datetime, timedelta
from typing import Any, NotRequired, TypedDict

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from sam_server.db.models import Job, JobLog, JobMetric, JobMetricChunk
from sam_server.db.types import as_utc, utcnow
from sam_server.services.observe import epoch_summaries
from sam_server.services.transitions import TERMINAL

# Column layout of a packed chunk: (name, array typecode). Columns, not rows: each column is
# smooth (steps count up, cycles repeat), so zlib shrinks them far better.
_COLUMNS: tuple[tuple[str, str], ...] = (("step", "i"), ("loss", "d"), ("nonfinite", "b"))
_COLUMNS += (("sim_cycles", "q"), ("samples_per_sec", "d"), ("attempt", "h"))
_COLUMNS += (("accuracy", "d"),)  # NaN: none (the loss is not a classification)
_NONFINITE = {None: 0, "nan": 1, "inf": 2, "-inf": 3}


class StepRecord(TypedDict):
    """One training step as the history keeps it (a JobMetric row, or a packed chunk's entry):
    loss None with loss_nonfinite "nan"/"inf"/"-inf" when it was not finite; accuracy only for
    a classification loss; attempt dropped from what the API shows."""

    step: int
    loss: float | None
    sim_cycles: int
    samples_per_sec: float
    attempt: NotRequired[int]
    accuracy: NotRequired[float]
    loss_nonfinite: NotRequired[str]


_NONFINITE_NAMES = {code: name for name, code in _NONFINITE.items()}


def log_lines(
    session: Session, *, job: Job, tail: int | None = None, since: datetime | None = None
) -> list[JobLog]:
    """The job's log lines in order: at or after `since`, and only the last `tail` of them."""
    query = select(JobLog).where(JobLog.job_id == job.id)
    if since is not None:
        query = query.where(JobLog.at >= as_utc(since))
    if tail is None:
        return list(session.execute(query.order_by(JobLog.id)).scalars())
    newest = session.execute(query.order_by(JobLog.id.desc()).limit(tail)).scalars()
    return list(reversed(list(newest)))


def last_log_id(session: Session, *, job: Job) -> int:
    """The id of the job's newest log line (0 if none)."""
    value = session.execute(select(func.max(JobLog.id)).where(JobLog.job_id == job.id)).scalar()
    return int(value or 0)


def pack(steps: list[StepRecord]) -> bytes:
    """Consecutive step records (as `unpack` returns them) as one compressed blob."""
    parts = []
    for name, code in _COLUMNS:
        column = array(code, (_field(s, name) for s in steps))
        if sys.byteorder == "big":  # stored little-endian whatever the host
            column.byteswap()
        parts.append(column.tobytes())
    header = array("I", [len(steps)]).tobytes()
    return zlib.compress(header + b"".join(parts), 6)


def _field(step: StepRecord, name: str) -> int | float:
    if name == "nonfinite":
        return _NONFINITE[step.get("loss_nonfinite")]
    if name == "loss":
        return step["loss"] if step["loss"] is not None else 0.0
    if name == "accuracy":
        accuracy = step.get("accuracy")
        return accuracy if accuracy is not None else math.nan
    plain = {
        "step": step["step"],
        "sim_cycles": step["sim_cycles"],
        "samples_per_sec": step["samples_per_sec"],
        "attempt": step.get("attempt", 0),
    }
    return plain[name] or 0


def unpack(blob: bytes) -> list[StepRecord]:
    """The step records of a packed chunk, in step order."""
    raw = zlib.decompress(blob)
    count = array("I", raw[:4])[0]
    offset, columns = 4, {}
    for name, code in _COLUMNS:
        column = array(code)
        size = column.itemsize * count
        column.frombytes(raw[offset : offset + size])
        if sys.byteorder == "big":
            column.byteswap()
        columns[name], offset = column, offset + size
    out = []
    for i in range(count):
        view: StepRecord = {
            "step": int(columns["step"][i]),
            "loss": columns["loss"][i],
            "sim_cycles": int(columns["sim_cycles"][i]),
            "samples_per_sec": columns["samples_per_sec"][i],
            "attempt": int(columns["attempt"][i]),
        }
        if not math.isnan(columns["accuracy"][i]):
            view["accuracy"] = columns["accuracy"][i]
        kind = _NONFINITE_NAMES[columns["nonfinite"][i]]
        if kind:
            view["loss"], view["loss_nonfinite"] = None, kind
        out.append(view)
    return out


def _row_view(m: JobMetric) -> StepRecord:
    view: StepRecord = {
        "step": m.step,
        "loss": m.loss,
        "sim_cycles": m.sim_cycles,
        "samples_per_sec": m.samples_per_sec,
        "attempt": m.attempt,
    }
    if m.accuracy is not None:  # only classification losses have one; absent keeps rows small
        view["accuracy"] = m.accuracy
    if m.loss_nonfinite:
        view["loss_nonfinite"] = m.loss_nonfinite
    return view


def compact_metrics(session: Session, *, job_id: str, recent: int, chunk: int) -> int:
    """Pack the oldest plain rows into chunks of `chunk` steps while more than `recent + chunk`
    rows remain, so a job keeps at most about `recent + chunk` rows; returns chunks written."""
    count = session.execute(
        select(func.count()).select_from(JobMetric).where(JobMetric.job_id == job_id)
    ).scalar_one()
    written = 0
    while count - written * chunk > recent + chunk:
        rows = list(
            session.execute(
                select(JobMetric)
                .where(JobMetric.job_id == job_id)
                .order_by(JobMetric.step)
                .limit(chunk)
            ).scalars()
        )
        _write_chunk(session, job_id, [_row_view(m) for m in rows])
        session.execute(
            delete(JobMetric).where(JobMetric.job_id == job_id, JobMetric.step <= rows[-1].step)
        )
        written += 1
    return written


def _write_chunk(session: Session, job_id: str, steps: list[StepRecord]) -> None:
    session.add(
        JobMetricChunk(
            job_id=job_id,
            first_step=steps[0]["step"],
            last_step=steps[-1]["step"],
            sim_cycles=sum(int(s["sim_cycles"]) for s in steps),
            data=pack(steps),
        )
    )
    session.flush()


def drop_metrics_from(session: Session, *, job_id: str, first: int) -> None:
    """Forget every stored step >= `first` (a resumed attempt rewrites them), packed or not."""
    session.execute(delete(JobMetric).where(JobMetric.job_id == job_id, JobMetric.step >= first))
    chunks = session.execute(
        select(JobMetricChunk).where(
            JobMetricChunk.job_id == job_id, JobMetricChunk.last_step >= first
        )
    ).scalars()
    for chunk in list(chunks):
        keep = [s for s in unpack(chunk.data) if s["step"] < first]
        session.delete(chunk)
        session.flush()
        if keep:
            _write_chunk(session, job_id, keep)


def metrics(
    session: Session, *, job: Job, last: int | None = None, every: int | None = None
) -> dict[str, Any]:
    """`{steps: [...], total_steps, total_sim_cycles, final_loss}`, step 0 first; `last` keeps
    only the newest N steps (read server-side: the packed history is not unpacked for it);
    `every` then keeps the steps whose number is a multiple of it, and the newest (epochs and
    `final_loss` still cover every step kept by `last`)."""
    rows_query = select(JobMetric).where(JobMetric.job_id == job.id)
    if last is None:
        recent = list(session.execute(rows_query.order_by(JobMetric.step)).scalars())
    else:
        newest = session.execute(rows_query.order_by(JobMetric.step.desc()).limit(last))
        recent = list(reversed(list(newest.scalars())))
    steps = [_public(_row_view(m)) for m in recent]
    chunk_query = select(JobMetricChunk).where(JobMetricChunk.job_id == job.id)
    older: list[StepRecord] = []
    for chunk in session.execute(chunk_query.order_by(JobMetricChunk.first_step.desc())):
        if last is not None and len(older) + len(steps) >= last:
            break
        older = [_public(s) for s in unpack(chunk[0].data)] + older
    steps = older + steps
    if last is not None:
        steps = steps[-last:] if steps else steps
    per_epoch = int((job.spec.get("run_options") or {}).get("steps_per_epoch") or 0)
    purged_at = as_utc(job.history_purged_at)
    purged = job.history_summary if purged_at is not None else None
    return {
        "job_id": job.id,
        "steps": _sampled(steps, every) if every else steps,
        # over the steps `last` kept: with `last`, only the epochs those steps belong to
        "epochs": epoch_summaries(steps, per_epoch),
        "total_steps": job.total_steps,
        "total_sim_cycles": (purged or {}).get("total_sim_cycles")
        or _total_cycles(session, job.id),
        "final_loss": steps[-1]["loss"] if steps else (purged or {}).get("final_loss"),
        # set when retention deleted the steps (then `steps` is empty): when, and what it held
        "purged_at": purged_at.isoformat() if purged_at is not None else None,
        "purged": purged,
    }


def _sampled(steps: list[StepRecord], every: int) -> list[StepRecord]:
    """Every `every`-th step by step number, and always the newest."""
    kept = [s for s in steps[:-1] if s["step"] % every == 0]
    return kept + steps[-1:]


def _public(step: StepRecord) -> StepRecord:
    step.pop("attempt", None)
    return step


def _total_cycles(session: Session, job_id: str) -> int:
    rows = session.execute(
        select(func.coalesce(func.sum(JobMetric.sim_cycles), 0)).where(JobMetric.job_id == job_id)
    ).scalar_one()
    chunks = session.execute(
        select(func.coalesce(func.sum(JobMetricChunk.sim_cycles), 0)).where(
            JobMetricChunk.job_id == job_id
        )
    ).scalar_one()
    return int(rows) + int(chunks)


def purge_ended(session: Session, *, older_than_s: float, limit: int = 200) -> list[str]:
    """Retention: delete the log lines and step metrics of up to `limit` jobs that ended more
    than `older_than_s` seconds ago; returns their ids. The job row stays (state, times, error,
    progress, report, attempts: what accounting needs), with `history_purged_at` and a
    `history_summary` of what was removed, so a user is told the history was purged instead of
    being shown an empty log."""
    cutoff = utcnow() - timedelta(seconds=older_than_s)
    jobs = list(
        session.execute(
            select(Job)
            .where(
                Job.state.in_([s.value for s in TERMINAL]),
                Job.finished_at < cutoff,
                Job.history_purged_at.is_(None),
            )
            .order_by(Job.finished_at)
            .limit(limit)
        ).scalars()
    )
    ids = [j.id for j in jobs]
    if not ids:
        return []
    count_of = {
        model: dict(
            session.execute(
                select(model.job_id, func.count())
                .where(model.job_id.in_(ids))
                .group_by(model.job_id)
            ).all()
        )
        for model in (JobLog, JobMetric)
    }
    packed_steps: dict[str, int] = {}
    for job_id, first, last in session.execute(
        select(JobMetricChunk.job_id, JobMetricChunk.first_step, JobMetricChunk.last_step).where(
            JobMetricChunk.job_id.in_(ids)
        )
    ):
        packed_steps[job_id] = packed_steps.get(job_id, 0) + last - first + 1
    now = utcnow()
    for job in jobs:
        job.history_summary = {
            "log_lines": int(count_of[JobLog].get(job.id, 0)),
            "steps": int(count_of[JobMetric].get(job.id, 0)) + packed_steps.get(job.id, 0),
            "total_sim_cycles": _total_cycles(session, job.id),
            "final_loss": job.progress_loss,
            "retention_days": round(older_than_s / 86400, 3),
        }
        job.history_purged_at = now
    for model in (JobLog, JobMetric, JobMetricChunk):
        session.execute(delete(model).where(model.job_id.in_(ids)))
    return ids


def purged_notice(job: Job) -> str | None:
    """The line shown in place of a purged job's log, or None when it was not purged."""
    when = as_utc(job.history_purged_at)
    if when is None:
        return None
    summary = job.history_summary or {}
    return (
        f"[the log ({summary.get('log_lines', '?')} lines) and step metrics "
        f"({summary.get('steps', '?')} steps) of job {job.id} were deleted on "
        f"{when.isoformat(timespec='seconds')} by the retention policy "
        f"(ended jobs keep them {summary.get('retention_days', '?')} days); "
        "the job's state, times, progress and report remain]"
    )
