"""A job array's task sees its index in the sandbox as Slurm's tasks do: make_batch reads
SAM_ARRAY_TASK_ID, SAM_ARRAY_JOB_ID and SAM_ARRAY_TASK_COUNT from its environment (a real
bubblewrap sandbox, as on a wafer worker)."""

from __future__ import annotations

from compiler.sandbox import stream_batches
from tests.compiler.conftest import file_spec
from tests.security.test_sandbox_unit import FAST

READS_ITS_INDEX = """
import os
import numpy as np

def make_batch(step, batch_size):
    index = float(os.environ.get("SAM_ARRAY_TASK_ID", "-1"))
    count = float(os.environ.get("SAM_ARRAY_TASK_COUNT", "-1"))
    same_array = float(os.environ.get("SAM_ARRAY_JOB_ID") == "jarray")
    inputs = np.zeros((batch_size, 784), dtype=np.float32)
    inputs[:, 0], inputs[:, 1], inputs[:, 2] = index, count, same_array
    return inputs, np.zeros(batch_size, dtype=np.int64)
"""


def _first_row(spec: dict) -> list[float]:  # type: ignore[type-arg]
    batches = stream_batches(spec, {"data.py": READS_ITS_INDEX}, 0, None, FAST)
    inputs, _ = next(batches)
    batches.close()
    return [float(v) for v in inputs[0, :3]]


def test_make_batch_sees_its_array_task_index() -> None:
    spec = file_spec()
    spec["array_task"] = {"array_job_id": "jarray", "task_id": 7, "task_count": 100}
    assert _first_row(spec) == [7.0, 100.0, 1.0]


def test_a_plain_job_has_no_array_variables() -> None:
    assert _first_row(file_spec()) == [-1.0, -1.0, 0.0]
