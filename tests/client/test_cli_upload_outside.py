"""`sam submit` uploads only files inside the job file's folder unless --allow-outside."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.client.fake_sam import FakeSam

SECRET = "victim_password = 'hunter2'\n"


@pytest.fixture
def layout(tmp_path: Path) -> Path:
    """tmp/victim_config.toml (outside) and tmp/job/ (the job folder with its own model.py)."""
    (tmp_path / "victim_config.toml").write_text(SECRET)
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    (job_dir / "model.py").write_text("class Net: ...\n")
    return job_dir


def _job(job_dir: Path, model_file: str) -> Path:
    path = job_dir / "job.yaml"
    path.write_text(f"name: x\nmodel: {{file: '{model_file}', class: Net}}\n")
    return path


@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink"])
def test_files_from_outside_the_job_folder_are_refused(
    run_sam, fake: FakeSam, layout: Path, how: str
) -> None:
    outside = layout.parent / "victim_config.toml"
    if how == "symlink":
        (layout / "innocent.py").symlink_to(outside)
        name = "innocent.py"
    else:
        name = "../victim_config.toml" if how == "dotdot" else str(outside)
    result = run_sam("submit", str(_job(layout, name)))
    assert result.exit_code == 1
    assert "outside the job file's folder" in result.stderr and "--allow-outside" in result.stderr
    assert fake.requests == []  # nothing was sent


def test_allow_outside_uploads_and_names_each_outside_file(
    run_sam, fake: FakeSam, layout: Path
) -> None:
    result = run_sam("submit", "--allow-outside", str(_job(layout, "../victim_config.toml")))
    assert result.exit_code == 0, result.stderr
    outside = (layout.parent / "victim_config.toml").resolve()
    assert f"uploading {outside}, from outside the job file's folder" in result.stderr
    assert json.loads(fake.job_posts()[0].content)["files"] == {"victim_config.toml": SECRET}


def test_files_inside_the_folder_and_symlinks_within_it_need_no_flag(
    run_sam, fake: FakeSam, layout: Path
) -> None:
    (layout / "src").mkdir()
    (layout / "src" / "link.py").symlink_to(layout / "model.py")
    result = run_sam("submit", str(_job(layout, "src/link.py")))
    assert result.exit_code == 0, result.stderr
    assert "outside" not in result.stderr
    assert json.loads(fake.job_posts()[0].content)["files"] == {"model.py": "class Net: ...\n"}
