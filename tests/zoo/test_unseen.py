"""Architectures SAM's zoo does not have (tests/zoo/unseen.yaml), built by their libraries'
constructors through model.factory with no wrapper class, train on the wse_sim runtime with
eager's losses: a fast subset end to end through the real compiler (the sandboxed trace builds
the factory) and the simulator; `benchmarks/model_zoo.py --unseen` runs them all."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch

from compiler.model_source import ModelCall, build_model
from tests.zoo.harness import (
    RTOL,
    batches,
    load_unseen_job,
    run_zoo_model,
    unseen_names,
    zoo_names,
)

torch.set_num_threads(1)
# a torchvision class (Swin's torch.roll), a transformers causal LM given input_ids and labels
# (train.loss: model), a timm class, and nn.LSTM (timm's Sequencer2D)
FAST = ("tv_swin", "gemma", "timm_convmixer", "timm_sequencer")
_CACHE = Path(tempfile.mkdtemp(prefix="sam-unseen-tests-"))


def test_the_unseen_set_is_new_to_the_zoo_and_built_by_factories() -> None:
    names = unseen_names()
    assert len(names) >= 20, names
    assert not set(names) & set(zoo_names())
    for name in names:
        job = load_unseen_job(name)
        assert job.files == {}  # nothing but the library's constructor
        assert job.spec["model"]["factory"].split(".")[0] in ("torchvision", "timm", "transformers")


def test_no_unseen_model_draws_dropout_masks() -> None:
    """The wafer draws its own dropout masks, never eager's (docs/training.md), so an entry
    whose library default keeps dropout on (torchvision's GoogLeNet and timm's GhostNet: 0.2)
    cannot train with eager's losses: two forward passes under different torch seeds agree."""
    for name in unseen_names():
        job = load_unseen_job(name)
        model = build_model(job.spec, {})
        inputs, targets = (torch.from_numpy(a) for a in batches(job, 1)[0])
        call = ModelCall.for_spec(job.spec, model)
        outputs = []
        for seed in (1, 2):
            torch.manual_seed(seed)
            with torch.no_grad():
                outputs.append(call(model, inputs, targets))
        assert torch.equal(*outputs), f"{name}: dropout is on (set its rate to 0 in unseen.yaml)"


@pytest.mark.parametrize("name", FAST)
def test_an_unseen_model_trains_like_eager(name: str) -> None:
    result = run_zoo_model(name, _CACHE / name, unseen=True)
    assert result.verdict == "train_match", (result.verdict, result.blocking_op, result.message)
    assert result.max_rel_error is not None and result.max_rel_error < RTOL
