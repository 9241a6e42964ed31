"""`GET /jobs/{id}/logs` as text, and as a live SSE stream that ends when the job ends."""

from __future__ import annotations

import threading
import time

import httpx

from sam_server.db.models import Job
from sam_server.db.session import session_scope
from sam_server.services import lifecycle
from sam_server.services.transitions import transition
from tests.api.helpers import make_tenant, make_user, submit


def test_logs_follow_live_until_the_job_ends(live_server, settings):
    import fastapi.testclient  # noqa: F401 - the helpers take any httpx-like client

    with httpx.Client(base_url=live_server.url, timeout=30) as client:
        make_tenant(client, "acme")
        alice = make_user(client, "acme", "alice")
        r = submit(client, alice)
        assert r.status_code == 201, r.text
        job_id = r.json()["id"]
        url = settings.resolved_database_url

        def run_the_job() -> None:
            time.sleep(0.5)
            with session_scope(url) as s:
                job = s.get(Job, job_id)
                for state in ("compiling", "pending", "running"):
                    transition(s, job, state)
                lifecycle.log(s, job_id, "step 0: loss 2.3")
            time.sleep(0.5)
            with session_scope(url) as s:
                lifecycle.log(s, job_id, "step 1: loss 2.1")
                transition(s, s.get(Job, job_id), "succeeded")

        worker = threading.Thread(target=run_the_job)
        worker.start()
        events = []
        with client.stream(
            "GET", f"/api/v1/jobs/{job_id}/logs", headers=alice | {"Accept": "text/event-stream"}
        ) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            for line in stream.iter_lines():
                if line.startswith(("event:", "data:")):
                    events.append(line)
        worker.join()
        text = "\n".join(events)
        assert "step 0: loss 2.3" in text and "step 1: loss 2.1" in text
        assert events[-2:] == ["event: end", 'data: {"state": "succeeded"}']
        plain = client.get(f"/api/v1/jobs/{job_id}/logs", headers=alice).text
        assert plain.index("step 0") < plain.index("step 1")
