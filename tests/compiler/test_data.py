"""Batch producers: synthetic data is a pure function of (seed, step); make_batch runs sandboxed."""

from __future__ import annotations

from itertools import islice
from pathlib import Path

import numpy as np
import pytest

from compiler.data import iter_batches, synthetic_batch
from compiler.errors import ModelError
from tests.compiler.conftest import file_spec, make_spec

MAKE_BATCH = """import numpy as np


def make_batch(step, batch_size):
    rng = np.random.default_rng(step)
    if step == 3:
        raise RuntimeError("corrupt shard at step 3")
    x = rng.standard_normal((batch_size, 4))
    return x, np.full(batch_size, step)
"""


@pytest.mark.parametrize("builtin", ["mlp", "cnn", "gpt"])
def test_synthetic_batches_are_deterministic_per_seed_and_step(builtin: str) -> None:
    spec = make_spec(builtin)
    first, again = synthetic_batch(spec, 7), synthetic_batch(spec, 7)
    other_step = synthetic_batch(spec, 8)
    other_seed = synthetic_batch(make_spec(builtin, train={"seed": 1}), 7)
    np.testing.assert_array_equal(first[0], again[0])
    np.testing.assert_array_equal(first[1], again[1])
    assert not np.array_equal(first[0], other_step[0])
    assert not np.array_equal(first[0], other_seed[0])
    assert first[0].shape[0] == spec["data"]["batch_size"]


def test_language_model_targets_are_the_next_tokens() -> None:
    spec = make_spec("gpt")
    inputs, targets = synthetic_batch(spec, 0)
    assert inputs.dtype == np.int64 and inputs.shape == (8, 8)
    np.testing.assert_array_equal(inputs[:, 1:], targets[:, :-1])
    assert inputs.max() < spec["data"]["num_classes"]


def test_iter_batches_resumes_at_a_step() -> None:
    spec = make_spec("mlp")
    resumed = next(iter_batches(spec, {}, start_step=5))
    np.testing.assert_array_equal(resumed[0], synthetic_batch(spec, 5)[0])


def test_file_source_streams_make_batch_and_reports_its_failure(tmp_path: Path) -> None:
    batches = iter_batches(
        file_spec(batch_size=5), {"data.py": MAKE_BATCH}, start_step=1, workdir=tmp_path
    )
    got = list(islice(batches, 2))
    assert [int(y[0]) for _, y in got] == [1, 2]
    assert got[0][0].dtype == np.float32 and got[0][0].shape == (5, 4)
    assert got[0][1].dtype == np.int64
    with pytest.raises(ModelError, match="corrupt shard at step 3"):
        next(batches)
    assert not list(tmp_path.iterdir())  # the scratch directory is cleaned up
