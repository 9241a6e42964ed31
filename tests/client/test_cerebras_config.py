"""`sam submit --config cerebras_config.yaml` and a `cerebras_config:` key map the seed's keys
onto the spec's sections; conflicts and unknown keys are errors, never silently dropped."""

from __future__ import annotations

from pathlib import Path

import pytest

from client.errors import JobSpecError
from client.jobspec import load_job_file
from sam_server.schemas.job_spec import JobSpec

JOB = """
name: seeded
model: {builtin: mlp}
run_options: {checkpoint_every: 5}
"""
CONFIG = """
target_device: wse3
fp16_enabled: true
optimizer_state_offload: true
num_epochs: 3
steps_per_epoch: 7
checkpoint_enabled: true
checkpoint_dir: ./ckpts/
log_level: debug
prefetch_depth: 4
use_parallel_loader: false
"""


def _write(tmp_path: Path, job: str, config: str | None = None) -> Path:
    (tmp_path / "job.yaml").write_text(job)
    if config is not None:
        (tmp_path / "cerebras_config.yaml").write_text(config)
    return tmp_path / "job.yaml"


def test_config_flag_maps_every_seed_key_to_its_section(tmp_path: Path) -> None:
    job = _write(tmp_path, JOB, CONFIG)
    spec, _ = load_job_file(job, tmp_path / "cerebras_config.yaml")
    parsed = JobSpec.model_validate(spec)
    assert parsed.compile_options.target_device == "WSE-3"
    assert parsed.compile_options.fp16_enabled and parsed.compile_options.optimizer_state_offload
    run = parsed.run_options
    assert (run.num_epochs, run.steps_per_epoch, run.total_steps) == (3, 7, 21)
    assert run.checkpoint_every == 5  # the job file's own key stays
    assert run.checkpoint_dir == "ckpts" and run.log_level == "DEBUG"
    assert parsed.data_loading.prefetch_depth == 4 and not parsed.data_loading.use_parallel_loader


def test_a_cerebras_config_key_in_the_job_file_names_the_file_or_holds_the_keys(
    tmp_path: Path,
) -> None:
    job = _write(tmp_path, JOB + "cerebras_config: cerebras_config.yaml\n", CONFIG)
    by_name, _ = load_job_file(job)
    inline, _ = load_job_file(
        _write(tmp_path, JOB + "cerebras_config: {num_epochs: 3, target_device: WSE-3}\n")
    )
    assert "cerebras_config" not in by_name and "cerebras_config" not in inline
    assert by_name["run_options"]["num_epochs"] == inline["run_options"]["num_epochs"] == 3
    assert inline["compile_options"]["target_device"] == "WSE-3"


def test_a_key_set_differently_in_both_places_is_an_error(tmp_path: Path) -> None:
    job = _write(tmp_path, JOB.replace("checkpoint_every: 5", "num_epochs: 1"), CONFIG)
    with pytest.raises(JobSpecError, match="run_options.num_epochs is 1 in the job file but 3"):
        load_job_file(job, tmp_path / "cerebras_config.yaml")


def test_an_unknown_config_key_is_named_with_the_known_ones(tmp_path: Path) -> None:
    job = _write(tmp_path, JOB, "num_epoch: 3\n")
    with pytest.raises(JobSpecError, match="unknown key 'num_epoch'.*num_epochs"):
        load_job_file(job, tmp_path / "cerebras_config.yaml")


@pytest.mark.parametrize("bad", ["/scratch/ckpt", "../elsewhere", "runs/../../x", "~/ckpt"])
def test_checkpoint_dir_outside_the_tenant_space_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="checkpoint_dir"):
        JobSpec.model_validate(
            {"name": "x", "model": {"builtin": "mlp"}, "run_options": {"checkpoint_dir": bad}}
        )
