"""A submit: one job (built from `jobs.py`'s pieces) or an array of them (`array_submit.py`),
decided by the spec's `array` directive; and the answer a submit (or its idempotent replay)
gets. It sits above both: `array_submit.py` builds on `jobs.py`, and `jobs.py` no longer has to
reach up to `array_submit.py` (the import circle the two formed)."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from sam_server.config import Settings
from sam_server.db.models import Job
from sam_server.schemas.job_spec import JobSpec
from sam_server.schemas.jobs import job_view, view_of
from sam_server.services.array_submit import array_view, submit_array
from sam_server.services.auth import Principal, tenant_of
from sam_server.services.datasets import dataset_mounts
from sam_server.services.directives import check_directives, split_directives
from sam_server.services.jobs import (
    Submitted,
    _idempotent_replay,
    _insert_job,
    check_queued_quota,
    check_submittable,
    load_raw_spec,
    new_job_values,
    request_hash,
)
from sam_server.services.requirements import REQUIREMENTS_FILE, check_requirements
from sam_server.services.spec_check import check_factory, check_files, parse_spec
from sam_server.services.uploads import check_project_files, project_files


def submit_job(
    session: Session,
    *,
    principal: Principal,
    spec: Mapping[str, object] | None,
    files: dict[str, str],
    spec_yaml: str | None = None,
    idempotency_key: str | None = None,
    settings: Settings | None = None,
) -> Submitted:
    """Validate and store a job in state `queued`; nothing is written on rejection.

    The hot path of the API: plain INSERTs (no ORM unit of work) and the view built from the
    values written, so a submit costs two statements after authentication.
    """
    # (an admin without a tenant gets tenant_of's error)
    tenant = principal.tenant or tenant_of(session, principal).name
    digest = request_hash(spec, spec_yaml, files)
    if idempotency_key:
        previous = _idempotent_replay(session, principal, idempotency_key, digest)
        if previous is not None:
            return Submitted(submitted_view(session, previous), created=False)
    if REQUIREMENTS_FILE in files:
        check_requirements(files[REQUIREMENTS_FILE])
    raw, directives = split_directives(load_raw_spec(spec, spec_yaml))
    check_directives(session, principal, directives)
    if directives.array is not None:
        return submit_array(
            session,
            principal=principal,
            raw=raw,
            directives=directives,
            files=files,
            idempotency_key=idempotency_key,
            digest=digest,
            check_first=lambda first: _check_uploads(settings, tenant, first, files),
            settings=settings,
        )
    parsed = parse_spec(raw)
    check_files(parsed, files)
    check_submittable(session, principal, parsed)
    _check_uploads(settings, tenant, parsed, files)
    check_queued_quota(
        session, principal, default_limit=settings.api.max_queued_jobs if settings else None
    )
    values = new_job_values(principal, parsed, files, idempotency_key, digest)
    values.update(directives.columns())
    if idempotency_key:
        # Retries of one submit may race each other: the first INSERT wins the unique key and
        # the others answer with its job (in a savepoint, so the transaction stays usable).
        try:
            with session.begin_nested():
                _insert_job(session, values, principal)
        except IntegrityError:
            previous = _idempotent_replay(session, principal, idempotency_key, digest)
            if previous is None:
                raise
            return Submitted(submitted_view(session, previous), created=False)
    else:
        _insert_job(session, values, principal)
    # The row as stored: the values written, NULL for the columns left out.
    view = view_of(values.get, tenant, principal.name)
    return Submitted(view, created=True)


def _check_uploads(
    settings: Settings | None, tenant: str, parsed: JobSpec, files: dict[str, str]
) -> None:
    """Every data set the job names exists for its tenant (the worker checks again), and so
    does its project, holding the files sent with the job."""
    if settings is not None:
        dataset_mounts(settings, tenant, parsed.data.dataset_names())
        own = list(files)
        if parsed.project is not None:
            check_project_files(settings, tenant, parsed.project, files)
            if parsed.model is not None and parsed.model.factory:
                own += [f.path for f in project_files(settings, tenant, parsed.project)]
        check_factory(parsed, settings.model_factory_packages, own)


def submitted_view(session: Session, job: Job) -> dict[str, object]:
    """The answer to a submit: the job, or for an array's first task the array."""
    if job.array_job_id is None:
        return job_view(job)
    return array_view(session, job.array_job_id)
