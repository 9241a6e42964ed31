"""Whether a DataLoader's batches all have the job's batch size, told without reading any data.

A wafer step is compiled for one batch shape, so a runner job refuses a DataLoader whose last
batch would be short (docs/runner.md, "Rules a runner job keeps"): on the login node before the
submit, and in the compile sandbox before any wafer time. Torch-free: it reads the loader's
batch sampler (its sampler's length, batch size and drop_last), never iterates it.
"""

from __future__ import annotations

from typing import Any


def short_batch_problem(loader: Any, batch_size: int, steps: int | None) -> str | None:
    """Why the first `steps` batches (every batch, when None) of `loader` would not all have
    `batch_size` rows; None when they would, or when it cannot be told without iterating (an
    iterable-style data set, a batch sampler of the user's own)."""
    size = getattr(loader, "batch_size", None)
    if size is not None and size != batch_size:
        return (
            f"train_data_fn()'s DataLoader has batch_size {size}, but the job is compiled for "
            f"runner.batch_size {batch_size}; pass batch_size=runner.batch_size"
        )
    sampler = getattr(loader, "batch_sampler", None)
    inner = getattr(sampler, "sampler", None)
    each = getattr(sampler, "batch_size", None)
    drop_last = getattr(sampler, "drop_last", None)
    if inner is None or not isinstance(each, int) or not isinstance(drop_last, bool):
        return None
    try:
        rows = len(inner)
    except TypeError:
        return None
    if each != batch_size:
        return (
            f"train_data_fn()'s batch sampler gives batches of {each} rows, but the job is "
            f"compiled for runner.batch_size {batch_size}"
        )
    whole, rest = divmod(rows, each)
    if rest and not drop_last and (steps is None or steps > whole):
        return (
            f"the data set has {rows} rows, so each epoch's last batch would have {rest} rows, "
            f"not {each}: a wafer step is compiled for one batch shape. Pass drop_last=True to "
            "the DataLoader (or a batch_size that divides the data set)"
        )
    if steps is not None and steps > whole:
        return (
            f"train_data_fn() gives {whole} batches an epoch ({rows} rows in batches of "
            f"{each}), but the job has {steps} steps per epoch; pass steps_per_epoch={whole} "
            "or fewer"
        )
    return None
