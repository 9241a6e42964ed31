"""Batch producers: synthetic data sets and the user's `make_batch` file source.

One interface for the runtime and for the eager reference in tests:

    iter_batches(spec, files, start_step=0, workdir=None, limits=None)
        -> Iterator[tuple[np.ndarray, np.ndarray]]     # (inputs, targets) of steps start_step, +1, ...

Synthetic batches are pure functions of (train.seed, step): `synthetic_batch(spec, step)`.
- classification: inputs float32 [B, *input_shape], targets int64 [B] in [0, num_classes),
  labelled by a fixed random linear teacher so that a model can learn them.
- regression: inputs float32 [B, *input_shape], targets float32 [B, num_classes or 1].
- language_model: inputs int64 [B, T] (T = input_shape[0]) tokens in [0, num_classes), targets
  int64 [B, T] = the next tokens of a noisy affine recurrence.
File batches run the user's make_batch(step, batch_size) in a sandbox
(`compiler.sandbox.stream_batches`, which validates every frame); torch tensors and numpy arrays are both accepted and become numpy arrays.
Floating inputs/targets are float32; integer ones int64.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

TYPE_CHECKING = False
if TYPE_CHECKING:
    from compiler.sandbox.limits import SandboxLimits

_TEACHER_STREAM = 0x5EED
_BATCH_STREAM = 0xBA7C


def synthetic_batch(spec: dict[str, Any], step: int) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, targets) of training step `step` for a synthetic data spec; pure in (seed, step)."""
    data = spec["data"]
    seed = int(spec.get("train", {}).get("seed", 0))
    batch = int(data.get("batch_size", 64))
    shape = [int(d) for d in (data.get("input_shape") or [784])]
    task = data.get("task") or "classification"
    rng = np.random.default_rng([_BATCH_STREAM, seed, step])
    teacher_rng = np.random.default_rng([_TEACHER_STREAM, seed])
    if task == "language_model":
        return _language_batch(
            rng, teacher_rng, batch, shape[0], int(data.get("num_classes") or 64)
        )
    inputs = rng.standard_normal((batch, *shape), dtype=np.float32)
    flat = inputs.reshape(batch, -1).astype(np.float64)
    features = flat.shape[1]
    if task == "regression":
        width = int(data.get("num_classes") or 1)
        teacher = teacher_rng.standard_normal((features, width)) / math.sqrt(features)
        return inputs, np.tanh(flat @ teacher).astype(np.float32)
    classes = int(data.get("num_classes") or 10)
    teacher = teacher_rng.standard_normal((features, classes))
    return inputs, np.argmax(flat @ teacher, axis=1).astype(np.int64)


def _language_batch(
    rng: np.random.Generator, teacher_rng: np.random.Generator, batch: int, length: int, vocab: int
) -> tuple[np.ndarray, np.ndarray]:
    """Sequences x[t+1] = (a*x[t] + b + noise) mod vocab; noise is 0 with probability 0.9."""
    a = int(teacher_rng.integers(1, max(2, vocab))) | 1
    b = int(teacher_rng.integers(0, vocab))
    tokens = np.empty((batch, length + 1), dtype=np.int64)
    tokens[:, 0] = rng.integers(0, vocab, size=batch)
    noise = (rng.random((batch, length)) < 0.1) * rng.integers(1, vocab, size=(batch, length))
    for t in range(length):
        tokens[:, t + 1] = (a * tokens[:, t] + b + noise[:, t]) % vocab
    return tokens[:, :-1].copy(), tokens[:, 1:].copy()


def normalize_batch(batch: object) -> tuple[np.ndarray, np.ndarray]:
    """A make_batch result (a pair of tensors/arrays) -> (inputs, targets) as float32/int64 numpy."""
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise TypeError("make_batch must return a pair (inputs, targets)")
    return _as_numpy(batch[0]), _as_numpy(batch[1])


def _as_numpy(value: object) -> np.ndarray:
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    array = np.asarray(value)
    if array.dtype.kind == "f":
        return np.ascontiguousarray(array, dtype=np.float32)
    if array.dtype.kind in "iub":
        return np.ascontiguousarray(array, dtype=np.int64)
    raise TypeError(
        f"make_batch returned an array of dtype {array.dtype}; use float or int tensors"
    )


def iter_batches(
    spec: dict[str, Any],
    files: dict[str, str] | None = None,
    start_step: int = 0,
    workdir: Path | None = None,
    limits: SandboxLimits | None = None,
    should_stop: Callable[[], bool] | None = None,
    datasets: dict[str, Path] | None = None,
    project: Path | None = None,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Batches of steps start_step, start_step+1, ... (endless; close() stops a file source's
    sandbox). A file source ends early, even mid-wait, once `should_stop()` is true.
    `datasets` ({name: host path}) are bound read-only at /datasets/NAME in its sandbox, the
    job's `project` folder at /job/src."""
    if spec["data"].get("source", "synthetic") == "synthetic":
        return _synthetic_stream(spec, start_step)
    from compiler.sandbox import stream_batches

    batches: Iterator[tuple[np.ndarray, np.ndarray]] = stream_batches(
        spec, files or {}, start_step, workdir, limits, should_stop, datasets, project
    )
    return batches


def _synthetic_stream(
    spec: dict[str, Any], start_step: int
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    step = start_step
    while True:
        yield synthetic_batch(spec, step)
        step += 1
