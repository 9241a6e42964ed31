"""On the embedded cluster with real worker processes: a job that fails with compile_oom on its
region trains on that region once `activation_recomputation` is on, with PyTorch's losses, and
its report says what was recomputed."""

from __future__ import annotations

import httpx
import pytest

from sam_server.schemas.job_spec import JobSpec
from tests.compiler.test_recompute import MODEL, STEPS, TIGHT
from tests.e2e.test_cancel_preempt import _setup, _wait, small_cluster  # noqa: F401
from tests.zoo.harness import RTOL, ZooJob, batches, rel_error, torch_losses

pytestmark = pytest.mark.slow


def _raw(name: str, recompute: bool) -> dict:  # type: ignore[type-arg]
    return {
        "name": name,
        "model": {"file": "model.py", "class": "Net"},
        "data": {"input_shape": [32], "num_classes": 10, "batch_size": 64},
        "train": {"optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.9}},
        "compile_options": {"activation_recomputation": recompute},
        "run_options": {"steps_per_epoch": STEPS, "checkpoint_every": 50},
        "resources": {"region": {"rows": TIGHT[0], "cols": TIGHT[1]}, "time_limit": "10m"},
    }


def _submit(c, who, raw) -> str:  # type: ignore[no-untyped-def,type-arg]
    body = {"spec": raw, "files": {"model.py": MODEL}}
    r = httpx.post(f"{c.url}/api/v1/jobs", json=body, headers=who)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def test_activation_recomputation_turns_compile_oom_into_training(small_cluster):  # noqa: F811
    c = small_cluster
    pi = _setup(c)
    ended = ("failed", "succeeded")
    oom_id = _submit(c, pi, _raw("keeps-all", False))
    failed = _wait(c, pi, oom_id, lambda j: j["state"] in ended, timeout=900)
    assert failed["state"] == "failed" and failed["error"]["kind"] == "compile_oom"

    raw = _raw("recomputes", True)
    job_id = _submit(c, pi, raw)
    done = _wait(c, pi, job_id, lambda j: j["state"] in ended, timeout=900)
    assert done["state"] == "succeeded", done["error"]
    steps = httpx.get(f"{c.url}/api/v1/jobs/{job_id}/metrics", headers=pi).json()["steps"]
    spec = JobSpec.model_validate(raw).model_dump(mode="json", by_alias=True)
    job = ZooJob("recomputes", spec, {"model.py": MODEL})
    reference = torch_losses(job, batches(job, STEPS))[0]
    assert rel_error([s["loss"] for s in steps], reference) < RTOL
    report = httpx.get(f"{c.url}/api/v1/jobs/{job_id}/report", headers=pi).json()
    assert report["compile"]["activation_recomputation"]["stashed_bytes_freed"] > 0
