"""The workers' typed view of a stored spec (sam_domain.run.RunSpec) agrees with the job spec
schema: its defaults are the schema's, and every field the schema fills in reads back."""

from __future__ import annotations

from typing import Any

from sam_domain.run import DataLoading, InitFrom, RunOptions, RunSpec
from sam_server.schemas.job_spec import JobSpec

MINIMAL: dict[str, Any] = {"name": "a", "model": {"file": "m.py", "class": "Net"}}


def _stored(raw: dict[str, Any]) -> dict[str, Any]:
    return JobSpec.model_validate(raw).model_dump(mode="json", by_alias=True)


def test_the_defaults_are_the_schemas() -> None:
    assert RunSpec.of(_stored(MINIMAL)) == RunSpec.of({}) == RunSpec()


def test_every_field_reads_back_typed() -> None:
    raw = {
        **MINIMAL,
        "mode": "compile_only",
        "compile_options": {"target_device": "WSE-3"},
        "data": {
            "source": "file",
            "file": "data.py",
            "function": "make_batch",
            "task": "regression",
            "input_shape": [4],
            "dataset": "imgs",
            "datasets": ["imgs", "b"],
        },
        "data_loading": {"prefetch_depth": 5, "use_parallel_loader": False},
        "run_options": {
            "num_epochs": 3,
            "steps_per_epoch": 7,
            "checkpoint_enabled": False,
            "checkpoint_dir": "runs/x",
            "log_level": "DEBUG",
            "stop_on_nan": False,
            "init_from": {"job": "jabc", "step": 4},
        },
    }
    found = RunSpec.of(_stored(raw))
    assert (found.mode, found.target_device, found.data_source) == ("compile_only", "WSE-3", "file")
    assert found.datasets == ("imgs", "b")
    assert found.loading == DataLoading(prefetch_depth=5, use_parallel_loader=False)
    assert found.run == RunOptions(
        num_epochs=3,
        steps_per_epoch=7,
        checkpoint_enabled=False,
        checkpoint_dir="runs/x",
        log_level="DEBUG",
        stop_on_nan=False,
        init_from=InitFrom("jabc", 4),
    )
    assert found.run.checkpoint_interval is None
    assert RunSpec.of(_stored(MINIMAL)).run.checkpoint_interval == 50
