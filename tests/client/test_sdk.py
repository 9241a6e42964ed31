"""The SDK against the fake API: pagination, problems, retries, live logs."""

from __future__ import annotations

import httpx
import pytest

from client.errors import SamAPIError, SamConnectionError
from client.sdk import SamClient
from client.sse import parse_sse
from tests.client.fake_sam import USER_TOKEN, FakeSam


def sdk(fake: FakeSam, url: str = "http://sam.test", token: str = USER_TOKEN) -> SamClient:
    return SamClient(url, token, transport=fake.transport)


def test_list_jobs_follows_every_cursor(fake: FakeSam) -> None:
    for _ in range(7):
        fake.add_job()
    ids = [job["id"] for job in sdk(fake).list_jobs(page_size=3)]
    assert ids == [7, 6, 5, 4, 3, 2, 1]
    assert len([r for r in fake.requests if r.url.path == "/api/v1/jobs"]) == 3


def test_problem_json_becomes_sam_api_error(fake: FakeSam) -> None:
    with pytest.raises(SamAPIError) as caught:
        sdk(fake).submit_job({"model": {"file": "m.py"}}, {})
    err = caught.value
    assert (err.status, err.title, err.detail) == (
        422,
        "Invalid job spec",
        "the job spec has errors",
    )
    assert err.field_messages() == ["name: field required", "model.file: m.py was not uploaded"]


def test_non_json_error_keeps_status_and_text() -> None:
    transport = httpx.MockTransport(
        lambda request: httpx.Response(502, text="bad gateway from proxy")
    )
    with pytest.raises(SamAPIError) as caught:
        SamClient("http://sam.test", "t", transport=transport).whoami()
    assert (caught.value.status, caught.value.detail) == (502, "bad gateway from proxy")


def test_non_json_success_is_reported_not_crashed() -> None:
    transport = httpx.MockTransport(
        lambda request: httpx.Response(200, text="<html>login page</html>")
    )
    with pytest.raises(SamAPIError, match="is http://proxy.test a SAM server"):
        SamClient("http://proxy.test", "t", transport=transport).whoami()


def test_submit_retries_a_failed_connection_once_with_the_same_key(fake: FakeSam) -> None:
    fake.fail_next_connects = 1
    job = sdk(fake).submit_job({"name": "x"}, idempotency_key="key-1")
    keys = [r.headers["idempotency-key"] for r in fake.requests]
    assert keys == ["key-1", "key-1"] and job["id"] == 1 and len(fake.jobs) == 1


def test_second_connection_failure_is_reported_with_the_url(fake: FakeSam) -> None:
    fake.fail_next_connects = 2
    with pytest.raises(
        SamConnectionError, match=r"cannot reach SAM at http://sam\.test: is `sam up` running\?"
    ):
        sdk(fake).get_job("1")


def test_resubmitting_with_the_same_key_returns_the_first_job(fake: FakeSam) -> None:
    client = sdk(fake)
    first = client.submit_job({"name": "x"}, idempotency_key="k")
    again = client.submit_job({"name": "x"}, idempotency_key="k")
    assert first["id"] == again["id"] and len(fake.jobs) == 1


def test_url_with_api_prefix_is_accepted(fake: FakeSam) -> None:
    assert sdk(fake, url="http://sam.test/api/v1/").whoami()["name"] == "alice"
    assert fake.requests[-1].url.path == "/api/v1/whoami"


def test_follow_logs_yields_log_lines_then_end(fake: FakeSam) -> None:
    job = fake.add_job(state="running")
    fake.log_lines[job["id"]] = ["step 0 loss 2.3", "step 1 loss 2.1"]
    fake.final_state[job["id"]] = "succeeded"
    events = list(sdk(fake).follow_logs(str(job["id"])))
    assert [(e.event, e.data) for e in events] == [
        ("log", "step 0 loss 2.3"),
        ("log", "step 1 loss 2.1"),
        ("end", '{"state": "succeeded"}'),
    ]


def test_follow_logs_on_a_plain_text_server_yields_lines(fake: FakeSam) -> None:
    fake.sse_supported = False
    job = fake.add_job()
    fake.log_lines[job["id"]] = ["a", "b"]
    assert [(e.event, e.data) for e in sdk(fake).follow_logs(str(job["id"]))] == [
        ("log", "a"),
        ("log", "b"),
    ]


def test_sse_parser_joins_data_lines_and_skips_comments() -> None:
    lines = [": hello", "id: 7", "event: log", "data: one", "data:two", "", "data: tail"]
    events = list(parse_sse(lines))
    assert [(e.event, e.data, e.id) for e in events] == [
        ("log", "one\ntwo", "7"),
        ("message", "tail", "7"),
    ]
