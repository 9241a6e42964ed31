"""The transition table, over every pair of states: allowed moves succeed and stamp the job,
every other move is refused and changes nothing."""

from __future__ import annotations

from itertools import product

from sqlalchemy import update

from sam_server.db.models import Job, JobEvent
from sam_server.db.session import session_scope
from sam_server.errors import InvalidTransition
from sam_server.services.transitions import ALLOWED, TERMINAL, JobState, can_transition, transition
from tests.api.helpers import alice_job


def test_every_pair_of_states_follows_the_table(client, settings):
    alice, job_id = alice_job(client)
    url = settings.resolved_database_url
    for src, dst in product(JobState, JobState):
        with session_scope(url) as s:
            s.execute(update(Job).where(Job.id == job_id).values(state=src.value, finished_at=None))
        with session_scope(url) as s:
            job = s.get(Job, job_id)
            events = s.query(JobEvent).filter_by(job_id=job_id).count()
            try:
                transition(s, job, dst, reason="table test")
                moved = True
            except InvalidTransition:
                moved = False
        assert moved == can_transition(src, dst) == (dst in ALLOWED[src]), (src, dst)
        with session_scope(url) as s:
            job = s.get(Job, job_id)
            assert job.state == (dst if moved else src).value
            assert s.query(JobEvent).filter_by(job_id=job_id).count() == events + int(moved)
            if moved and dst in TERMINAL:
                assert job.finished_at is not None and job.wafer_id is None


def test_terminal_states_have_no_way_out_and_every_live_state_can_end():
    for state in TERMINAL:
        assert ALLOWED[state] == frozenset()
    for state in set(JobState) - TERMINAL:
        assert ALLOWED[state] & {JobState.CANCELLED, JobState.FAILED}, state
