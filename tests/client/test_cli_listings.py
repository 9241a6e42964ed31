"""`sam queue`, `cluster`, `whoami`, `admin` and error reporting as a user sees them (fake API)."""

from __future__ import annotations

import json
import socket

import pytest
import yaml

from client.cli import build_cli
from tests.client.fake_sam import ADMIN_TOKEN, FakeSam


def column(stdout: str, header: str) -> list[str]:
    lines = stdout.splitlines()
    start = lines[0].index(header)
    return [line[start:].split()[0] if len(line) > start else "" for line in lines[1:]]


@pytest.fixture
def busy(fake: FakeSam) -> FakeSam:
    fake.add_job(
        state="running",
        started_at="2026-01-01T00:00:00Z",
        finished_at=None,
        region={"wafer": "wse-0", "row": 0, "col": 64, "rows": 32, "cols": 16},
    )
    fake.add_job(state="pending", reason={"code": "Resources", "message": "no free 64x64 region"})
    fake.add_job(
        state="succeeded", started_at="2026-01-01T00:00:00Z", finished_at="2026-01-01T01:02:03Z"
    )
    fake.add_job(state="queued", tenant="other")
    return fake


def test_queue_shows_unfinished_jobs_squeue_style(run_sam, busy: FakeSam) -> None:
    result = run_sam("queue")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.split("\n")[0].split() == [
        "JOBID",
        "TENANT",
        "NAME",
        "USER",
        "ST",
        "TIME",
        "REGION",
        "REASON",
    ]
    assert column(result.stdout, "JOBID") == [
        "1",
        "2",
    ]  # running first; ended and other tenant hidden
    assert column(result.stdout, "ST") == ["R", "PD"]
    assert column(result.stdout, "REGION") == ["wse-0:0,64+32x16", "-"]
    assert column(result.stdout, "REASON") == ["-", "(Resources)"]
    assert set(busy.requests[0].url.params.get_list("state")) == {
        "queued",
        "compiling",
        "pending",
        "running",
        "cancelling",
    }


def test_queue_all_includes_ended_jobs_with_their_run_time(run_sam, busy: FakeSam) -> None:
    result = run_sam("queue", "--all")
    assert "state" not in busy.requests[0].url.params
    rows = {line.split()[0]: line for line in result.stdout.splitlines()[1:]}
    assert " CD " in rows["3"] and "1:02:03" in rows["3"]


def test_queue_state_filter_takes_names_and_codes(run_sam, busy: FakeSam) -> None:
    result = run_sam("queue", "--state", "PD,running", "-t", "cd")
    assert sorted(busy.requests[0].url.params.get_list("state")) == [
        "pending",
        "running",
        "succeeded",
    ]
    assert sorted(column(result.stdout, "JOBID")) == ["1", "2", "3"]


def test_queue_me_filters_by_the_tokens_user(run_sam, busy: FakeSam) -> None:
    busy.add_job(user="bob")
    result = run_sam("queue", "--me")
    listing = next(r for r in busy.requests if r.url.path == "/api/v1/jobs")
    assert listing.url.params["user"] == "alice"
    assert column(result.stdout, "USER") == ["alice", "alice"]


def test_queue_unknown_state_is_a_usage_error(run_sam) -> None:
    result = run_sam("queue", "--state", "bogus")
    assert result.exit_code == 2 and "unknown state 'bogus'" in result.stderr


def test_queue_follows_pages(run_sam, fake: FakeSam) -> None:
    fake.page_size_cap = 2
    for _ in range(5):
        fake.add_job()
    assert sorted(column(run_sam("queue").stdout, "JOBID")) == ["1", "2", "3", "4", "5"]


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_queue_machine_formats_are_the_raw_api_objects(run_sam, busy: FakeSam, fmt: str) -> None:
    out = run_sam("queue", "--all", "-o", fmt).stdout
    items = json.loads(out) if fmt == "json" else yaml.safe_load(out)
    assert sorted(items, key=lambda j: j["id"]) == [busy.jobs[i] for i in (1, 2, 3)]


def test_queue_reason_is_the_schedulers_first_reason_code(run_sam, busy: FakeSam) -> None:
    busy.queue_reasons[2] = [
        {"code": "Priority", "message": "2 jobs of higher priority come first"},
        {"code": "Resources", "message": "no wafer has a free 64x64 region"},
    ]
    busy.jobs[2]["reason"] = "Priority"  # the scheduler stores its first reason's code
    assert column(run_sam("queue").stdout, "REASON") == ["-", "(Priority)"]
    # the table is one request: the job's own reason, not the scheduler's whole queue
    assert [r.url.path for r in busy.requests] == ["/api/v1/jobs"]
    wide = run_sam("queue", "-o", "wide").stdout
    assert "(2 jobs of higher priority come first; no wafer has a free 64x64 region)" in wide


def test_long_reasons_are_cut_in_the_table_but_not_in_wide(run_sam, fake: FakeSam) -> None:
    long = "preempted by a job of higher priority; resumes from its checkpoint at step 50"
    fake.add_job(state="pending", reason=long)
    cell = run_sam("queue").stdout.splitlines()[1].split("  ")[-1].strip()
    assert cell.startswith("(preempted by") and cell.endswith("~)") and len(cell) < len(long)
    assert f"({long})" in run_sam("queue", "-o", "wide").stdout


def test_queue_wide_adds_columns_and_full_reason(run_sam, busy: FakeSam) -> None:
    out = run_sam("queue", "-o", "wide").stdout
    assert "PRIORITY" in out.splitlines()[0] and "(no free 64x64 region)" in out


def test_cluster_shows_table_and_occupancy_map(run_sam) -> None:
    result = run_sam("cluster")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert (
        lines[1].split()[:5] == ["small-0", "wse2", "64x64", "up", "2048"] and "50.0%" in lines[1]
    )
    map_rows = [line for line in lines if line.startswith("|")]
    assert all(len(row) <= 66 for row in map_rows)
    used = sum(row.count("A") for row in map_rows)
    free = sum(row.count(".") for row in map_rows)
    assert used == free > 0  # job 1 holds the top half of the wafer
    assert map_rows[0].strip("|") == "A" * (len(map_rows[0]) - 2)
    assert any("A  job 1  tenant acme  32x64 at (0,0)" in line for line in lines)


def test_whoami(run_sam) -> None:
    assert run_sam("whoami").stdout.split() == [
        "Name:",
        "alice",
        "Tenant:",
        "acme",
        "Role:",
        "user",
    ]


def test_admin_creates_tenant_with_only_given_quota_fields(run_sam, fake: FakeSam) -> None:
    result = run_sam(
        "admin", "tenant", "create", "acme2", "--max-pes", "4096", "--share", "2", token=ADMIN_TOKEN
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(fake.requests[0].content) == {
        "name": "acme2",
        "quota": {"max_pes": 4096, "share": 2.0},
    }


def test_admin_user_create_prints_only_the_token(run_sam, fake: FakeSam) -> None:
    result = run_sam("admin", "user", "create", "acme", "bob", "--role", "admin", token=ADMIN_TOKEN)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "tok-bob\n" and "shown only once" in result.stderr
    assert fake.principals["tok-bob"] == {"name": "bob", "tenant": "acme", "role": "admin"}


def test_user_calling_admin_endpoint_gets_forbidden(run_sam) -> None:
    result = run_sam("admin", "tenant", "create", "x")
    assert result.exit_code == 1 and result.stderr.startswith("error: Forbidden: admin only")


def test_bad_token_fails_with_a_hint(run_sam) -> None:
    result = run_sam("whoami", token="wrong")
    assert result.exit_code == 1
    assert (
        "error: Unauthorized" in result.stderr
        and "token from SAM_TOKEN was refused" in result.stderr
    )
    missing = run_sam("whoami", token=None)
    assert "no token configured" in missing.stderr


def test_unreachable_server_says_so_and_exits_1() -> None:
    import click.testing

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound but not listening: connections are refused
        result = click.testing.CliRunner().invoke(
            build_cli(find_plugins=dict), ["--url", f"http://127.0.0.1:{port}", "queue"]
        )
    assert result.exit_code == 1
    assert f"cannot reach SAM at http://127.0.0.1:{port}: is `sam up` running?" in result.stderr
