"""Bounds on tenant-controlled text: a 30 MB error is stored once, capped, and never listed in
full (SQLite and PostgreSQL)."""

from __future__ import annotations

from sqlalchemy import func, select

from sam_domain.compile import CompiledArtifact
from sam_server.db.models import Job, JobLog
from sam_server.db.session import session_scope
from sam_server.services import lifecycle
from sam_server.services.bounds import MAX_TEXT_BYTES, SUMMARY_BYTES, cap_text
from sam_server.services.transitions import JobState, transition
from tests.api.helpers import ADMIN, alice_job

HUGE = "E" * (30 * 1024 * 1024)


def _fail_compile(url: str, job_id: str, message: str) -> None:
    with session_scope(url) as session:
        transition(session, session.get(Job, job_id), JobState.COMPILING, reason="test")
    with session_scope(url) as session:
        assert lifecycle.claim_compile(session, job_id=job_id, owner="c1", lease_s=30)
    with session_scope(url) as session:
        lifecycle.finish_compile(
            session, job_id=job_id, owner="c1", result=None, error=("model_error", message)
        )


def test_a_30mb_error_is_capped_stored_once_and_summarised_in_lists(client, settings):
    alice, job_id = alice_job(client)
    url = settings.resolved_database_url
    _fail_compile(url, job_id, "ValueError: " + HUGE)

    one = client.get(f"/api/v1/jobs/{job_id}", headers=alice).json()
    message = one["error"]["message"]
    assert one["error"]["kind"] == "model_error"
    assert message.startswith("ValueError: EEE")
    assert len(message.encode()) <= MAX_TEXT_BYTES
    head, _, marker = message.partition("… [cut: ")
    assert marker == f"{len('ValueError: ') + len(HUGE) - len(head)} bytes]"
    for who in (alice, ADMIN):
        page = client.get("/api/v1/jobs", headers=who)
        assert len(page.content) < 4 * SUMMARY_BYTES + 2048
        listed = page.json()["items"][0]["error"]["message"]
        assert len(listed.encode()) <= SUMMARY_BYTES and "[cut: " in listed
    logs = client.get(f"/api/v1/jobs/{job_id}/logs", headers=alice).text
    assert "compile failed (model_error)" in logs and len(logs) < 8 * 1024
    with session_scope(url) as session:
        stored = session.execute(
            select(func.sum(func.length(JobLog.line))).where(JobLog.job_id == job_id)
        ).scalar_one()
        assert stored < 8 * 1024  # the error is not stored a second time at full size


def test_every_log_line_a_worker_records_is_capped(client, settings):
    alice, job_id = alice_job(client)
    url = settings.resolved_database_url
    with session_scope(url) as session:
        session.get(Job, job_id).lease_owner = "w1"
    with session_scope(url) as session:
        ok = lifecycle.record_steps(
            session,
            job_id=job_id,
            owner="w1",
            attempt=0,
            steps=[],
            lines=[("WARN", "batch said: " + "x" * 200_000), ("INFO", "short")],
        )
        assert ok
    logs = client.get(f"/api/v1/jobs/{job_id}/logs", headers=alice).text.splitlines()
    long_line = next(line for line in logs if "batch said" in line)
    assert len(long_line.encode()) < MAX_TEXT_BYTES + 100
    assert long_line.endswith("bytes]") and "[cut: " in long_line
    assert logs[-1].endswith("short")


def test_cap_text_keeps_short_text_and_cuts_on_character_boundaries():
    assert cap_text("hello") == "hello"
    cut = cap_text("é" * 100, limit=64)
    assert len(cut.encode()) <= 64 and cut.startswith("é") and "[cut: " in cut
    head, _, rest = cut.partition("…")
    assert int(rest.split("cut: ")[1].split()[0]) == 200 - len(head.encode())


def test_an_inflated_compile_summary_is_not_stored(client, settings):
    alice, job_id = alice_job(client)
    url = settings.resolved_database_url
    with session_scope(url) as session:
        transition(session, session.get(Job, job_id), JobState.COMPILING, reason="test")
    with session_scope(url) as session:
        assert lifecycle.claim_compile(session, job_id=job_id, owner="c1", lease_s=30)
    summary = {"artifact_sha256": "ab" * 32, "network_isolation": "x" * (5 << 20)}
    result = CompiledArtifact("artifacts/k", False, 1.0, summary)
    with session_scope(url) as session:
        lifecycle.finish_compile(session, job_id=job_id, owner="c1", result=result)
    with session_scope(url) as session:
        stored = session.get(Job, job_id).compile_summary
    assert stored["artifact_sha256"] == "ab" * 32 and "network_isolation" not in stored
    assert "dropped" in stored["cut"]
