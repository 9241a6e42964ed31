"""The example jobs a user copies are valid specs whose files exist, and they compile."""

from __future__ import annotations

from pathlib import Path

import pytest

from client.jobspec import load_job_file
from compiler import compile_job
from sam_server.schemas.job_spec import JobSpec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
JOBS = sorted(EXAMPLES.glob("*/job.yaml"))


def _load(job: Path) -> tuple[dict, dict[str, str]]:
    # as `sam submit` reads it: a cerebras_config the job names is merged in
    raw, files = load_job_file(job)
    parsed = JobSpec.model_validate(raw)
    assert set(parsed.referenced_files()) <= set(files)
    return parsed.model_dump(mode="json", by_alias=True), files


@pytest.mark.parametrize("job", JOBS, ids=[j.parent.name for j in JOBS])
def test_example_is_a_valid_spec_with_its_files(job: Path) -> None:
    spec, files = _load(job)
    assert spec["name"] and all(text.strip() for text in files.values())


def test_examples_cover_builtins_user_model_and_file_data() -> None:
    names = {job.parent.name for job in JOBS}
    assert {"mlp", "cnn", "gpt", "user_model", "file_data"} <= names


def test_file_data_example_validates_in_its_region(tmp_path: Path) -> None:
    spec, files = _load(EXAMPLES / "file_data" / "job.yaml")
    region = (spec["resources"]["region"]["rows"], spec["resources"]["region"]["cols"])
    result = compile_job(spec, files, region=region, cache_dir=tmp_path, mode="validate_only")
    assert result.summary["memory"]["peak_bytes_per_pe"] <= 48 * 1024
