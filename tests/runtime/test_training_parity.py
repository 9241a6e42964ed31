"""The runtime trains like plain PyTorch eager: same losses and final weights (float32), and
fp16 stays close and still learns."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import artifact_for, make_spec, rel_error, run_steps, small_spec, torch_reference
from torch import nn

import wse_sim.runtime as rt

STEPS = 50
OPTIMIZERS = {
    "sgd": {"name": "sgd", "lr": 0.05, "momentum": 0.9},
    "adam": {"name": "adam", "lr": 0.003},
}

USER_MODEL = """
import torch
from torch import nn
import torch.nn.functional as F

class Net(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.fc1 = nn.Linear(12, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.fc2 = nn.Linear(hidden, 4)

    def forward(self, x):
        return self.fc2(torch.tanh(self.norm(self.fc1(x))))
"""


class UserNet(nn.Module):
    """The same model as USER_MODEL, for the eager reference."""

    def __init__(self, hidden: int = 16) -> None:
        super().__init__()
        self.fc1 = nn.Linear(12, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.fc2 = nn.Linear(hidden, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.tanh(self.norm(self.fc1(x))))


def _final_params(job: rt.LoadedJob) -> dict[str, np.ndarray]:
    state = job.state_dict()
    roles = {i.get("source_name"): i["role"] for i in job.graph["inputs"]}
    return {k: v for k, v in state.items() if roles.get(k) == "param"}


def _assert_matches(job: rt.LoadedJob, spec: dict, net: type | None = None) -> None:
    ours = run_steps(job, spec, STEPS)
    ref_losses, ref_params = torch_reference(spec, STEPS, net)
    assert rel_error(ours, ref_losses) < 1e-3, (ours[:5], ref_losses[:5])
    params = _final_params(job)
    assert set(params) <= set(ref_params) and params
    for name, value in params.items():
        scale = max(float(np.max(np.abs(ref_params[name]))), 1e-3)
        assert float(np.max(np.abs(value - ref_params[name]))) / scale < 1e-3, name


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
@pytest.mark.parametrize("family", ["mlp", "cnn", "gpt"])
def test_builtin_losses_and_weights_match_pytorch(family: str, optimizer: str, wafer) -> None:
    spec = small_spec(family, optimizer=OPTIMIZERS[optimizer])
    job = rt.load(artifact_for(spec), wafer, (0, 0, 8, 8), "job-a")
    _assert_matches(job, spec)


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_user_model_matches_pytorch(optimizer: str, wafer) -> None:
    spec = make_spec(
        model_file="model.py",
        kwargs={"hidden": 16},
        optimizer=OPTIMIZERS[optimizer],
        data={"task": "classification", "input_shape": [12], "num_classes": 4},
    )
    job = rt.load(artifact_for(spec, {"model.py": USER_MODEL}), wafer, (0, 0, 8, 8), "job-a")
    _assert_matches(job, spec, UserNet)


def test_adamw_with_weight_decay_matches_pytorch(wafer) -> None:
    spec = small_spec("mlp", optimizer={"name": "adamw", "lr": 0.01, "weight_decay": 0.1})
    job = rt.load(artifact_for(spec), wafer, (0, 0, 8, 8), "job-a")
    ours = run_steps(job, spec, 20)
    assert rel_error(ours, torch_reference(spec, 20)[0]) < 1e-3


def test_fp16_losses_stay_close_and_fall(wafer) -> None:
    opt = {"name": "adam", "lr": 0.01}
    fp32 = rt.load(artifact_for(small_spec("mlp", optimizer=opt)), wafer, (0, 0, 8, 8), "fp32")
    spec16 = small_spec("mlp", optimizer=opt, fp16=True)
    fp16 = rt.load(artifact_for(spec16), wafer, (8, 8, 8, 8), "fp16")
    losses32, losses16 = run_steps(fp32, spec16, STEPS), run_steps(fp16, spec16, STEPS)
    assert not np.array_equal(losses32, losses16), "fp16 must really round"
    assert rel_error(losses16, losses32) < 0.05
    assert losses16[-10:].mean() < 0.8 * losses16[:5].mean()


def test_mse_regression_with_gelu_matches_pytorch(wafer) -> None:
    spec = make_spec(
        "mlp",
        kwargs={"hidden": 16, "activation": "gelu"},
        loss="mse",
        optimizer={"name": "sgd", "lr": 0.05, "momentum": 0.9, "nesterov": True},
        data={"task": "regression", "input_shape": [10], "num_classes": 3},
    )
    job = rt.load(artifact_for(spec), wafer, (0, 0, 8, 8), "job-a")
    ours = run_steps(job, spec, 20)
    reference = torch_reference(spec, 20)[0]
    assert rel_error(ours, reference) < 1e-3 and ours[-1] < ours[0]
