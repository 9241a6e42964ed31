"""A model may keep a bfloat16 buffer (RecurrentGemma's `normalizer`, cast to the activations'
dtype where it is used): numpy has no bfloat16, so its initial value leaves the trace as its
exact float32 values, the form the runtime holds bfloat16 in, and the step trains as eager's."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import wse_sim.runtime as rt
from compiler import compile_job, load_artifact
from tests.compiler.conftest import user_model_spec
from tests.zoo.harness import ZooJob, batches, torch_losses
from wse_sim import Wafer

MODEL = """import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 10)
        # sqrt(32) rounds to 5.65625 in bfloat16: the buffer's value, not 5.6568...
        self.register_buffer("scale", torch.tensor(32**0.5, dtype=torch.bfloat16), persistent=False)

    def forward(self, x):
        return self.fc(x * self.scale.type(x.dtype))
"""


def test_a_bfloat16_buffer_compiles_and_trains_like_eager(tmp_path: Path) -> None:
    spec = user_model_spec(
        data={
            "source": "synthetic",
            "task": "classification",
            "input_shape": [16],
            "num_classes": 10,
            "batch_size": 4,
        },
        train={"loss": "cross_entropy", "optimizer": {"name": "sgd", "lr": 0.1}, "seed": 0},
    )
    files = {"model.py": MODEL}
    result = compile_job(spec, files, region=(6, 5), cache_dir=tmp_path)
    artifact = load_artifact(result.artifact_dir)
    job = rt.load(artifact, Wafer("wse2", rows=6, cols=5), (0, 0, 6, 5), "bf16")
    data = batches(ZooJob("bf16", spec, files), 3)
    losses = [job.step(x, y).loss for x, y in data]
    want, _, _ = torch_losses(ZooJob("bf16", spec, files), data)
    np.testing.assert_allclose(losses, want, rtol=1e-5)
