"""A runner job's batches must all have runner.batch_size rows (docs/runner.md): which
DataLoaders are refused before the submit (and at compile), told from the loader alone."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    IterableDataset,
    SequentialSampler,
    SubsetRandomSampler,
    TensorDataset,
)

from sam.batches import short_batch_problem

DATA = TensorDataset(torch.zeros(100, 2), torch.zeros(100))  # 3 batches of 32, then 4 rows


class Stream(IterableDataset):  # type: ignore[type-arg]
    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter([(torch.zeros(2), 0)] * 100)


def test_a_short_last_batch_is_refused_with_its_size_and_the_fix() -> None:
    problem = short_batch_problem(DataLoader(DATA, batch_size=32), 32, None)
    assert problem is not None
    assert "100 rows" in problem and "last batch would have 4 rows" in problem
    assert "drop_last=True" in problem
    # the same when steps_per_epoch reaches the short batch
    assert short_batch_problem(DataLoader(DATA, batch_size=32), 32, 4) == problem


@pytest.mark.parametrize(
    "loader",
    [
        DataLoader(DATA, batch_size=32, drop_last=True),
        DataLoader(DATA, batch_size=32, shuffle=True, drop_last=True),
        DataLoader(TensorDataset(torch.zeros(96, 2)), batch_size=32),  # 32 divides 96
        DataLoader(Stream(), batch_size=32),  # iterable-style: met by the data sandbox
    ],
)
def test_whole_batches_pass(loader: DataLoader) -> None:  # type: ignore[type-arg]
    assert short_batch_problem(loader, 32, None) is None


def test_fewer_steps_than_batches_never_reach_the_short_one() -> None:
    assert short_batch_problem(DataLoader(DATA, batch_size=32), 32, 3) is None


def test_a_sampler_of_a_subset_counts_its_own_rows() -> None:
    subset = SubsetRandomSampler(list(range(64)))
    assert short_batch_problem(DataLoader(DATA, batch_size=32, sampler=subset), 32, None) is None
    uneven = SubsetRandomSampler(list(range(70)))
    problem = short_batch_problem(DataLoader(DATA, batch_size=32, sampler=uneven), 32, None)
    assert problem is not None and "70 rows" in problem


def test_other_batch_sizes_and_too_many_steps_say_what_to_pass() -> None:
    wrong = short_batch_problem(DataLoader(DATA, batch_size=16), 32, None)
    assert wrong is not None and "batch_size=runner.batch_size" in wrong
    sampler = BatchSampler(SequentialSampler(DATA), 16, drop_last=True)
    own = short_batch_problem(DataLoader(DATA, batch_sampler=sampler), 32, None)
    assert own is not None and "batches of 16 rows" in own
    many = short_batch_problem(DataLoader(DATA, batch_size=32, drop_last=True), 32, 5)
    assert many is not None and "steps_per_epoch=3" in many
