"""A job's project folder in both sandboxes: read-only at /job/src, the working directory and on
sys.path, so helper packages import and paths relative to __file__ and to the working directory
both work (docs/projects.md)."""

from __future__ import annotations

from itertools import islice
from pathlib import Path

import numpy as np
import pytest

from compiler.data import iter_batches
from compiler.errors import ModelError
from compiler.sandbox import run_trace
from tests.compiler.conftest import file_spec, user_model_spec

DATA_PY = """import os

import numpy as np

from helpers.shift import shift

HERE = os.path.dirname(os.path.abspath(__file__))


def make_batch(step, batch_size):
    assert os.getcwd() == "/job/src", os.getcwd()
    x = np.load(os.path.join(HERE, "data", "x.npy"), mmap_mode="r")  # beside data.py
    y = np.load("data/y.npy")  # relative to the working directory
    rows = [(step * batch_size + i) % len(x) for i in range(batch_size)]
    return shift(np.asarray(x[rows])), y[rows]
"""

WRITE_PY = """import numpy as np


def make_batch(step, batch_size):
    open("/job/src/new.txt", "w").write("written")
    return np.zeros((batch_size, 4), np.float32), np.zeros(batch_size, np.int64)
"""

MODEL_PY = """import torch.nn as nn

from nets.layers import Block


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block(784, 10)

    def forward(self, x):
        return self.block(x.flatten(1))
"""

LAYERS_PY = """import torch.nn as nn


class Block(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.fc = nn.Linear(n_in, n_out)

    def forward(self, x):
        return self.fc(x).relu()
"""


def _project(root: Path, data_py: str) -> Path:
    (root / "helpers").mkdir(parents=True)
    (root / "data").mkdir()
    (root / "helpers" / "__init__.py").write_text("")
    (root / "helpers" / "shift.py").write_text("def shift(x):\n    return x + 100.0\n")
    (root / "data.py").write_text(data_py)
    np.save(root / "data" / "x.npy", np.arange(40, dtype=np.float32).reshape(10, 4))
    np.save(root / "data" / "y.npy", np.arange(10, dtype=np.int64) % 3)
    return root


def test_make_batch_imports_helpers_and_reads_files_of_its_project(tmp_path: Path) -> None:
    project = _project(tmp_path / "project", DATA_PY)
    spec = file_spec(batch_size=4, task="classification", input_shape=[4], num_classes=3)
    files = {"data.py": DATA_PY}
    batches = iter_batches(spec, files, start_step=1, workdir=tmp_path, project=project)
    try:
        (x1, y1), (x2, y2) = islice(batches, 2)
    finally:
        batches.close()  # type: ignore[attr-defined]
    assert x1[0, 0] == 116.0  # row 4, shifted by the helper package
    np.testing.assert_array_equal(y1, [1, 2, 0, 1])
    np.testing.assert_array_equal(y2, [2, 0, 0, 1])  # rows 8, 9, 0, 1


def test_the_project_is_read_only_in_the_sandbox(tmp_path: Path) -> None:
    project = _project(tmp_path / "project", WRITE_PY)
    spec = file_spec(batch_size=4, task="classification", input_shape=[4], num_classes=3)
    batches = iter_batches(spec, {"data.py": WRITE_PY}, workdir=tmp_path, project=project)
    with pytest.raises(ModelError, match="Read-only file system|Permission denied"):
        next(batches)
    assert not (project / "new.txt").exists()


@pytest.mark.parametrize("warm", [True, False])
def test_a_model_imports_a_package_of_its_project_at_compile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, warm: bool
) -> None:
    from compiler.sandbox import warm as warm_slots

    if not warm:
        monkeypatch.setattr(warm_slots, "take", lambda limits: None)
    project = tmp_path / "project"
    (project / "nets").mkdir(parents=True)
    (project / "nets" / "__init__.py").write_text("")
    (project / "nets" / "layers.py").write_text(LAYERS_PY)
    (project / "model.py").write_text(MODEL_PY)
    graph, tensors, _ = run_trace(user_model_spec(), {"model.py": MODEL_PY}, project=project)
    assert any(t.shape == (10, 784) for t in tensors.values())
    # without its project the same model cannot import its package
    with pytest.raises(ModelError, match="No module named 'nets'"):
        run_trace(user_model_spec(), {"model.py": MODEL_PY})
