"""`sam queue` and arrays (fake API): an array's waiting tasks are one Slurm-style line with its
tasks counted by state, `--array` and `-j ID` list each task, and a server from before the slim
listing still gets a table."""

from __future__ import annotations

from tests.client.fake_sam import FakeSam
from tests.client.test_cli_listings import column


def _array(fake: FakeSam, array_id: str, indices: list[int], **fields: str) -> None:
    for index in indices:
        fake.add_job(
            id=f"{array_id}_{index}", array_job_id=array_id, array_task_id=index, name="sweep"
        ).update(fields)


def test_an_arrays_waiting_tasks_are_one_line_counted_by_state(run_sam, fake: FakeSam) -> None:
    fake.add_job(state="running", started_at="2026-01-01T00:00:00Z")
    _array(fake, "jarr", [0, 1, 2, 3, 5], state="queued")
    _array(fake, "jarr", [6, 7], state="pending", reason="Resources")
    _array(fake, "jarr", [4], state="running", started_at="2026-01-01T00:00:00Z")
    out = run_sam("queue")
    assert out.exit_code == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == [
        "JOBID",
        "TENANT",
        "NAME",
        "USER",
        "ST",
        "TIME",
        "REGION",
        "REASON",
        "TASKS",
    ]
    # running first (squeue's order), then the array's one waiting line
    ids = column(out.stdout, "JOBID")
    assert sorted(ids[:2]) == ["1", "jarr_4"] and ids[2:] == ["jarr_[0-3,5-7]"]
    assert lines[-1].endswith("  5 Q,2 PD") and column(out.stdout, "ST")[-1] == "Q"
    assert column(out.stdout, "TASKS") == ["-", "-", "5"]  # `5 Q,2 PD` up to its first space
    assert len(fake.requests) == 1 and fake.requests[0].url.params["view"] == "slim"


def test_array_flag_and_jobs_option_list_each_task(run_sam, fake: FakeSam) -> None:
    fake.add_job()
    _array(fake, "jarr", [0, 1, 2])
    _array(fake, "jbee", [0, 1])
    expanded = run_sam("queue", "--array").stdout
    assert sorted(column(expanded, "JOBID")) == ["1", "jarr_0", "jarr_1", "jarr_2"] + [
        "jbee_0",
        "jbee_1",
    ]
    assert "TASKS" not in expanded.splitlines()[0]
    one = run_sam("queue", "-j", "jbee")
    assert sorted(column(one.stdout, "JOBID")) == ["jbee_0", "jbee_1"]
    assert fake.requests[-1].url.params.get_list("job") == ["jbee"]
    both = run_sam("queue", "--jobs", "jbee,1")
    assert sorted(column(both.stdout, "JOBID")) == ["1", "jbee_0", "jbee_1"]


def test_machine_output_keeps_the_api_objects_and_their_summary(run_sam, fake: FakeSam) -> None:
    import json

    _array(fake, "jarr", [0, 1])
    [row] = json.loads(run_sam("queue", "-o", "json").stdout)
    assert row["id"] == "jarr_[0-1]" and row["summary"]["states"] == {"queued": 2}
    tasks = json.loads(run_sam("queue", "--array", "-o", "json").stdout)
    assert sorted(t["array_task_id"] for t in tasks) == [0, 1]
    assert all("view" not in r.url.params for r in fake.requests)  # whole job objects


def test_format_tasks_column_and_held_reason(run_sam, fake: FakeSam) -> None:
    _array(fake, "jarr", [0, 1, 2], hold="user", reason="CompilePending")
    out = run_sam("queue", "--format", "jobid,st,reason,tasks").stdout.splitlines()
    assert out[1].split() == ["jarr_[0-2]", "Q", "(JobHeldUser)", "3", "Q"]


def test_a_server_without_the_slim_view_still_gets_a_table(run_sam, fake: FakeSam) -> None:
    fake.slim_supported = False
    fake.page_size_cap = 2
    for _ in range(5):
        fake.add_job()
    out = run_sam("queue")
    assert out.exit_code == 0, out.stderr
    assert sorted(column(out.stdout, "JOBID")) == ["1", "2", "3", "4", "5"]
