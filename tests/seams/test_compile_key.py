"""One compile identity: the server's compile hash (which queued jobs share an artifact) and the
compiler's request key read the same spec sections (sam_domain.compile)."""

from __future__ import annotations

import copy
from typing import Any

from compiler.cache import request_key
from sam_domain.compile import COMPILE_SECTIONS, CompileKey
from sam_server.schemas.job_spec import JobSpec
from sam_server.services.arrays import placeholders_reach_compile
from sam_server.services.jobs import compile_hash

FILES = {"model.py": "import torch\n"}
SPEC: dict[str, Any] = {
    "name": "a",
    "model": {"file": "model.py", "class": "Net"},
    "resources": {"pes": 64},
}


def _hash(raw: dict[str, Any], tenant: int = 1) -> str:
    return compile_hash(JobSpec.model_validate(raw), FILES, tenant)


def test_what_does_not_change_the_program_does_not_change_the_hash() -> None:
    base = _hash(SPEC)
    renamed = {**SPEC, "name": "b", "priority": "high"}
    longer = copy.deepcopy(SPEC)
    longer["run_options"] = {"num_epochs": 9}
    assert _hash(renamed) == _hash(longer) == base


def test_compile_inputs_the_shape_and_the_tenant_change_it() -> None:
    base = _hash(SPEC)
    fp16 = {**SPEC, "compile_options": {"fp16_enabled": True}}
    bigger = {**SPEC, "resources": {"pes": 256}}
    assert len({base, _hash(fp16), _hash(bigger), _hash(SPEC, tenant=2)}) == 4
    assert _hash({**SPEC, "mode": "validate_only"}) != base


def test_the_compiler_keys_its_cache_on_the_same_sections() -> None:
    spec = JobSpec.model_validate(SPEC).model_dump(mode="json", by_alias=True)
    key = request_key(spec, FILES, (8, 8), "wse2", "compile", "1")
    assert (
        request_key(
            {**spec, "run_options": {"total_steps": 5}}, FILES, (8, 8), "wse2", "compile", "1"
        )
        == key
    )
    for section in COMPILE_SECTIONS:
        changed = {**spec, section: {**(spec.get(section) or {}), "x": 1}}
        assert request_key(changed, FILES, (8, 8), "wse2", "compile", "1") != key, section


def test_a_placeholder_reaches_the_compile_only_through_its_inputs_or_shape() -> None:
    assert not placeholders_reach_compile({**SPEC, "run_options": {"seed": "${SAM_ARRAY_TASK_ID}"}})
    assert not placeholders_reach_compile({**SPEC, "name": "t${SAM_ARRAY_TASK_ID}"})
    assert placeholders_reach_compile({**SPEC, "train": {"lr": "${SAM_ARRAY_TASK_ID}"}})
    assert placeholders_reach_compile({**SPEC, "resources": {"pes": "${SAM_ARRAY_TASK_ID}"}})


def test_the_key_is_a_frozen_value() -> None:
    key = CompileKey.of({"model": {"file": "m.py"}}, (4, 4), FILES, 3)
    assert key == CompileKey.of({"model": {"file": "m.py"}}, (4, 4), FILES, 3)
    assert key.digest() == CompileKey.of({"model": {"file": "m.py"}}, (4, 4), FILES, 3).digest()
    assert len(key.digest()) == 64


def test_a_runner_job_keys_on_its_entry_and_epochs() -> None:
    """A runner job's script builds its model, and its schedule spans its epochs (runner.md)."""
    raw = {"name": "r", "entry": {"script": "train.py"}}
    spec = JobSpec.model_validate(
        {**raw, "run_options": {"num_epochs": 2, "steps_per_epoch": 16}}
    ).model_dump(mode="json", by_alias=True)
    files = {"train.py": "from sam import Runner\n"}
    key = request_key(spec, files, (8, 8), "wse2", "compile", "1")
    assert request_key({**spec, "name": "other"}, files, (8, 8), "wse2", "compile", "1") == key
    for changed in (
        {**spec, "entry": {"script": "train.py", "args": ["--lr", "0.1"]}},
        {**spec, "run_options": {**spec["run_options"], "num_epochs": 3}},
        {**spec, "run_options": {**spec["run_options"], "steps_per_epoch": 8}},
    ):
        assert request_key(changed, files, (8, 8), "wse2", "compile", "1") != key


def test_the_project_and_a_runner_jobs_data_sets_change_the_compilers_keys() -> None:
    """A runner job's model.py lives in its project, not in the files sent with the job."""
    from compiler.cache import trace_key

    raw = {"name": "r", "entry": {"script": "train.py"}, "project": "a" * 64}
    spec = JobSpec.model_validate(raw).model_dump(mode="json", by_alias=True)
    files = {"train.py": "from sam import Runner\n"}
    other = {**spec, "project": "b" * 64}
    key = request_key(spec, files, (8, 8), "wse2", "compile", "1")
    assert request_key(other, files, (8, 8), "wse2", "compile", "1") != key
    moved = request_key(spec, files, (8, 8), "wse2", "compile", "1", {"d": "/data/v2"})
    assert moved != key
    assert trace_key(other, files, "1") != trace_key(spec, files, "1")
    longer = {**spec, "run_options": {**spec["run_options"], "num_epochs": 5}}
    assert trace_key(longer, files, "1") != trace_key(spec, files, "1")


def test_a_data_set_put_again_is_another_fingerprint(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`sam data put` swaps a fresh folder in at the same path (services/dataset_store.py)."""
    import os

    from compiler.cache import dataset_fingerprint

    folder = tmp_path / "digits" / "files"
    folder.mkdir(parents=True)
    first = dataset_fingerprint({"digits": folder})
    assert dataset_fingerprint({"digits": folder}) == first
    fresh = tmp_path / ".digits.new" / "files"
    fresh.mkdir(parents=True)
    os.rename(tmp_path / "digits", tmp_path / "digits.old")
    os.rename(tmp_path / ".digits.new", tmp_path / "digits")
    assert dataset_fingerprint({"digits": folder}) != first
