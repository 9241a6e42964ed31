"""`sam submit`, `status`, `cancel`, `logs`, `explain` as a user sees them (fake API)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.client.fake_sam import FakeSam


@pytest.fixture
def job_file(tmp_path: Path) -> Path:
    (tmp_path / "model.py").write_text("class Net: ...\n")
    path = tmp_path / "job.yaml"
    path.write_text("name: mnist\nmodel:\n  file: model.py\n  class: Net\n")
    return path


def test_submit_uploads_named_files_and_prints_the_id(
    run_sam, fake: FakeSam, job_file: Path
) -> None:
    result = run_sam("submit", str(job_file))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "Submitted job 1 to tenant acme\n"
    sent = json.loads(fake.job_posts()[0].content)
    assert sent["files"] == {"model.py": "class Net: ...\n"} and sent["spec"]["name"] == "mnist"
    assert len(fake.job_posts()[0].headers["idempotency-key"]) >= 16


def test_submit_parsable_prints_only_the_id(run_sam, job_file: Path) -> None:
    assert run_sam("submit", "--parsable", str(job_file)).stdout == "1\n"


def test_each_submit_sends_a_fresh_idempotency_key(run_sam, fake: FakeSam, job_file: Path) -> None:
    run_sam("submit", str(job_file))
    run_sam("submit", str(job_file))
    keys = {r.headers["idempotency-key"] for r in fake.job_posts()}
    assert len(keys) == 2 and len(fake.jobs) == 2


def test_submit_with_missing_file_fails_before_sending(
    run_sam, fake: FakeSam, tmp_path: Path
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("name: x\nmodel: {file: gone.py, class: Net}\n")
    result = run_sam("submit", str(job))
    assert result.exit_code == 1
    assert "error: model.file: file not found" in result.stderr and "gone.py" in result.stderr
    assert fake.requests == []


def test_submit_refuses_alias_bomb(run_sam, fake: FakeSam, tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text('name: x\nlol: &l ["lol", "lol"]\nmore: [*l, *l]\n')
    result = run_sam("submit", str(job))
    assert result.exit_code == 1 and "line 2" in result.stderr and "not allowed" in result.stderr
    assert fake.requests == []


def test_submit_of_a_missing_job_file_is_a_usage_error(run_sam, tmp_path: Path) -> None:
    assert run_sam("submit", str(tmp_path / "nope.yaml")).exit_code == 2


def test_submit_invalid_spec_prints_problem_and_field_errors(run_sam, tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("model: {builtin: mlp}\n")
    result = run_sam("submit", str(job))
    assert result.exit_code == 1 and result.stdout == ""
    assert "error: Invalid job spec: the job spec has errors" in result.stderr
    assert "name: field required" in result.stderr


def test_dry_run_prints_normalized_spec_and_creates_nothing(
    run_sam, fake: FakeSam, job_file: Path
) -> None:
    result = run_sam("submit", "--dry-run", str(job_file))
    assert result.exit_code == 0, result.stderr
    assert yaml.safe_load(result.stdout)["priority"] == "normal"
    assert "valid" in result.stderr and "64x64" in result.stderr
    assert fake.jobs == {} and fake.job_posts()[0].url.params["dry_run"] == "true"
    assert fake.chunks == {}  # a dry run lists the project's files and sends none
    assert "# project: 2 files" in result.stdout and "model.py" in result.stdout


@pytest.mark.parametrize(("final", "code"), [("succeeded", 0), ("failed", 1)])
def test_submit_wait_exits_with_the_jobs_outcome(
    run_sam, fake: FakeSam, job_file: Path, final: str, code: int
) -> None:
    fake.log_lines[1] = ["compiling", "step 0 loss 2.30"]
    fake.final_state[1] = final
    result = run_sam("submit", "--wait", "--parsable", str(job_file))
    assert result.exit_code == code
    assert result.stdout == "1\n"
    assert "step 0 loss 2.30" in result.stderr and f"job 1 {final}" in result.stderr


def test_submit_wait_polls_when_the_server_has_no_stream(
    run_sam, fake: FakeSam, job_file: Path
) -> None:
    fake.sse_supported = False
    states = iter(["compiling", "running", "succeeded"])
    original = fake._job_resource

    def advancing(request, me, rest):
        if len(rest) == 1 and 1 in fake.jobs:
            fake.jobs[1]["state"] = next(states, "succeeded")
        return original(request, me, rest)

    fake._job_resource = advancing  # type: ignore[method-assign]
    result = run_sam("submit", "--wait", "--poll-interval", "0", str(job_file))
    assert result.exit_code == 0, result.stderr
    assert "job 1: running" in result.stderr and "job 1 succeeded" in result.stderr


def test_status_shows_the_job_and_raw_yaml(run_sam, fake: FakeSam) -> None:
    fake.add_job(
        state="running",
        region={"wafer": "wse-0", "row": 0, "col": 64, "rows": 32, "cols": 32},
        progress={"step": 5, "total_steps": 100, "loss": 1.25},
    )
    table = run_sam("status", "1")
    assert "State:" in table.stdout and "running (R)" in table.stdout
    assert "wse-0:0,64+32x32" in table.stdout and "step 5/100, loss 1.25" in table.stdout
    raw = yaml.safe_load(run_sam("status", "1", "-o", "yaml").stdout)
    assert raw == fake.jobs[1]


def test_status_of_another_tenants_job_is_not_found(run_sam, fake: FakeSam) -> None:
    fake.add_job(tenant="other")
    result = run_sam("status", "1")
    assert result.exit_code == 1 and result.stderr.startswith("error: Not Found: job 1 not found")


def test_cancel_reports_each_job_and_fails_if_any_failed(run_sam, fake: FakeSam) -> None:
    fake.add_job(state="queued")
    fake.add_job(state="running")
    fake.add_job(state="succeeded")
    result = run_sam("cancel", "1", "2", "3", "99")
    assert result.exit_code == 1
    assert (
        "job 1 cancelled" in result.stdout
        and "job 2: cancellation requested (cancelling)" in result.stdout
    )
    assert "error: job 3: Conflict" in result.stderr and "error: job 99: Not Found" in result.stderr
    assert run_sam("cancel", "2").exit_code == 0


def test_logs_prints_the_log_and_follows(run_sam, fake: FakeSam) -> None:
    fake.add_job(state="running")
    fake.log_lines[1] = ["line one", "line two"]
    assert run_sam("logs", "1").stdout == "line one\nline two\n"
    fake.final_state[1] = "succeeded"
    followed = run_sam("logs", "-f", "1")
    assert followed.exit_code == 0 and followed.stdout == "line one\nline two\n"
    assert "job 1 ended: succeeded" in followed.stderr


def test_explain_lists_every_reason_position_eta_and_priority(run_sam, fake: FakeSam) -> None:
    fake.add_job(state="pending")
    result = run_sam("explain", "1")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "Job 1 is pending, position 2 in the queue" in out
    assert "ETA: 2099-01-01 01:00:00 UTC" in out
    assert "Resources: no wafer has a free 64x64 region" in out and "QuotaPEs:" in out
    assert "Priority: 1.5" in out and "age" in out
    raw = json.loads(run_sam("explain", "1", "-o", "json").stdout)
    assert raw["priority"]["factors"] == {"age": 0.5, "class": 1.0}


def test_explain_of_an_ended_job_says_so_without_an_eta(run_sam, fake: FakeSam) -> None:
    fake.add_job(state="succeeded")
    out = run_sam("explain", "1").stdout
    assert out.startswith("Job 1 has ended: succeeded") and "ETA" not in out


def test_explain_uses_the_breakdown_the_server_gives_without_asking_the_queue(
    run_sam, fake: FakeSam
) -> None:
    fake.add_job(state="pending")
    fake.explain_priority = {"total": 0.75, "factors": {"fairshare": 0.25}}
    result = run_sam("explain", "1")
    assert "Priority: 0.75" in result.stdout and "fairshare" in result.stdout
    assert not any(r.url.path.endswith("/queue") for r in fake.requests)


def test_metrics_table_has_one_row_per_step(run_sam, fake: FakeSam) -> None:
    fake.add_job(state="succeeded")
    lines = run_sam("metrics", "1").stdout.splitlines()
    assert lines[0].split() == ["STEP", "LOSS", "SIM_CYCLES", "SAMPLES/S", "ACCURACY"]
    assert [line.split()[:2] for line in lines[1:4]] == [["0", "2"], ["1", "1.5"], ["2", "1"]]
    assert "final_loss: 1" in " ".join(" ".join(lines).split())
    assert len(run_sam("metrics", "1", "--last", "1").stdout.split("\n\n")[0].splitlines()) == 2


def test_report_summarizes_heatmaps_and_json_keeps_them(run_sam, fake: FakeSam) -> None:
    fake.add_job(state="succeeded")
    out = " ".join(run_sam("report", "1").stdout.split())
    assert "run.utilization: [2x2] min 0, mean 0.5, max 1" in out
    assert "compile.seconds:" in out and "run.sram_bytes: [2] min 100, mean 200, max 300" in out
    assert json.loads(run_sam("report", "1", "-o", "json").stdout)["run"]["utilization"] == [
        [0.5, 1.0],
        [0.0, 0.5],
    ]


def test_status_names_a_runner_jobs_script_and_args(run_sam, fake: FakeSam) -> None:
    fake.add_job(name="train.py", entry={"script": "src/train.py", "args": ["--lr", "0.1 x"]})
    fake.add_job(entry=None)
    shown = run_sam("status", "1").stdout
    assert "Script:" in shown and "src/train.py --lr '0.1 x'" in shown
    assert "Script:" not in run_sam("status", "2").stdout  # a model job has none
