"""Shared helpers: job specs shaped like `JobSpec.model_dump(mode="json", by_alias=True)`."""

from __future__ import annotations

import copy
from typing import Any

import pytest

_BASE: dict[str, Any] = {
    "name": "t",
    "priority": "normal",
    "mode": "train",
    "model": {"file": None, "class": None, "builtin": "mlp", "kwargs": {}},
    "data": {
        "source": "synthetic",
        "task": "classification",
        "input_shape": [784],
        "num_classes": 10,
        "file": None,
        "function": None,
        "batch_size": 8,
    },
    "train": {"loss": "cross_entropy", "optimizer": {"name": "sgd", "lr": 0.1}, "seed": 0},
    "compile_options": {
        "target_device": "WSE-2",
        "fp16_enabled": False,
        "optimizer_state_offload": False,
        "max_activation_memory": None,
        "execution_mode": "pipelined",
    },
    "run_options": {
        "num_epochs": 1,
        "steps_per_epoch": 4,
        "checkpoint_enabled": True,
        "checkpoint_every": 50,
        "log_level": "INFO",
        "stop_on_nan": True,
    },
    "data_loading": {"prefetch_depth": 2, "use_parallel_loader": True},
    "resources": {"region": {"rows": 8, "cols": 8}, "pes": None, "time_limit": 1800},
}

_DATA = {
    "mlp": {"task": "classification", "input_shape": [784], "num_classes": 10},
    "cnn": {"task": "classification", "input_shape": [1, 28, 28], "num_classes": 10},
    "gpt": {"task": "language_model", "input_shape": [8], "num_classes": 32},
}
# Small model sizes keep each trace to a second or two on a loaded machine.
_KWARGS = {
    "mlp": {"hidden": 32},
    "cnn": {"channels": 4, "hidden": 16},
    "gpt": {"d_model": 16, "n_heads": 2, "n_layers": 1},
}


def make_spec(builtin: str | None = "mlp", **overrides: Any) -> dict[str, Any]:
    """A full spec dict; overrides are section dicts merged into the base (e.g. train={...})."""
    spec = copy.deepcopy(_BASE)
    if builtin:
        spec["model"]["builtin"] = builtin
        spec["data"].update(_DATA[builtin])
        spec["model"]["kwargs"] = dict(_KWARGS[builtin])
    for section, value in overrides.items():
        if isinstance(value, dict) and isinstance(spec.get(section), dict):
            spec[section].update(value)
        else:
            spec[section] = value
    return spec


def user_model_spec(class_name: str = "Net", **overrides: Any) -> dict[str, Any]:
    """A spec for model.py / class_name (a user file)."""
    model = overrides.pop("model", {})
    spec = make_spec("mlp", **overrides)
    spec["model"].update({"builtin": None, "file": "model.py", "class": class_name, "kwargs": {}})
    spec["model"].update(model)
    return spec


def file_spec(batch_size: int = 4, **data: Any) -> dict[str, Any]:
    """An mlp spec whose batches come from the user file data.py's make_batch (data: more of
    the data section, e.g. task and shapes)."""
    spec = make_spec("mlp")
    spec["data"] = {
        "source": "file",
        "file": "data.py",
        "function": "make_batch",
        "task": None,
        "input_shape": None,
        "num_classes": None,
        "batch_size": batch_size,
        **data,
    }
    return spec


def linear_net(forward: str, in_features: int = 784) -> str:
    """model.py source of `Net`: one nn.Linear(in_features, 10) as `self.fc`, and `forward`
    (the body of forward(self, x), indented 8 spaces) starting at line 11."""
    return f"""import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear({in_features}, 10)

    def forward(self, x):
{forward}"""


@pytest.fixture(scope="session", autouse=True)
def _warm_sandbox() -> None:
    """Pre-start a sandbox (torch imported) while the first tests run."""
    from compiler.sandbox import warm_sandbox

    warm_sandbox()
