"""A runner job's script in the sandboxes' two modes (compiler.script_entry), in process: the
compile captures its train_step and refuses a `.item()` naming the script's line; the feed
writes the batches of steps start_step, ... in order; bad scripts fail with what to change."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from compiler.errors import CompileError, ModelError
from compiler.script_entry import capture_script, feed_script
from sam_server.schemas.job_spec import JobSpec

SCRIPT = """import sys

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from sam import Runner

torch.manual_seed(0)
model = nn.Linear(4, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
criterion = nn.CrossEntropyLoss()
data = TensorDataset(torch.arange(64.0).reshape(16, 4) / 64, torch.arange(16) % 3)


def train_step(model, inputs, labels, criterion, optimizer):
    optimizer.zero_grad()
    loss = criterion(model(inputs), labels)
    {extra}
    loss.backward()
    optimizer.step()
    return loss


runner = Runner(model=model, loss_fn=criterion, optimizer=optimizer)
assert sys.argv[1:] == ["--flag"], sys.argv
runner.train(
    train_data_fn=lambda: DataLoader(data, batch_size=runner.batch_size{loader}),
    num_epochs=2,
    train_step_fn=train_step,
)
raise SystemExit("the script goes on after train(): never in a sandbox")
"""


def _job(tmp_path: Path, extra: str = "pass", loader: str = "", batch: int = 4) -> dict:  # type: ignore[type-arg]
    (tmp_path / "train.py").write_text(SCRIPT.format(extra=extra, loader=loader))
    raw = {
        "name": "t",
        "entry": {"script": "train.py", "args": ["--flag"]},
        "data": {"batch_size": batch},
        "run_options": {"num_epochs": 2, "steps_per_epoch": 16 // batch},
    }
    return JobSpec.model_validate(raw).model_dump(mode="json", by_alias=True)


def test_the_compile_captures_the_step_and_the_feed_writes_the_batches(tmp_path: Path) -> None:
    spec = _job(tmp_path)
    traced = capture_script(spec, tmp_path)
    roles = [i["role"] for i in traced.graph["inputs"]]
    assert roles.count("param") == 2 and "input" in roles and "target" in roles
    written: list[tuple[np.ndarray, np.ndarray]] = []
    feed_script(spec, tmp_path, 3, lambda x, y: written.append((x, y)))
    assert len(written) == 2 * 4 - 3  # steps 3..7 of two epochs of four
    np.testing.assert_array_equal(written[0][1], [0, 1, 2, 0])  # step 3: rows 12-15
    np.testing.assert_array_equal(written[1][1], [0, 1, 2, 0])  # epoch 2's first batch
    assert written[0][0].dtype == np.float32 and written[0][1].dtype == np.int64


def test_an_item_in_the_step_is_refused_at_compile_naming_the_line(tmp_path: Path) -> None:
    spec = _job(tmp_path, extra="if loss.item() > 100: loss = loss * 0")
    with pytest.raises(CompileError) as refused:
        capture_script(spec, tmp_path)
    assert "train.py:19" in str(refused.value.message), refused.value.message


def test_short_batches_and_scripts_without_train_say_what_to_change(tmp_path: Path) -> None:
    spec = _job(tmp_path, batch=5)  # 16 rows in batches of 5: the fourth has 1 row
    spec["run_options"]["steps_per_epoch"] = 4
    with pytest.raises(ModelError, match="batch 3 has 1 rows.*drop_last=True"):
        feed_script(spec, tmp_path, 0, lambda x, y: None)
    # the compile refuses it first, before any wafer time, with the reason and the fix
    with pytest.raises(ModelError, match="last batch would have 1 rows.*drop_last=True"):
        capture_script(spec, tmp_path)
    spec["run_options"]["steps_per_epoch"] = 3  # the short batch is never reached
    assert capture_script(spec, tmp_path).graph["inputs"]
    spec = _job(tmp_path)
    (tmp_path / "train.py").write_text("print('no runner here')\n")
    with pytest.raises(ModelError, match="ended without calling runner.train"):
        capture_script(spec, tmp_path)


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ({"entry": {"script": "../train.py"}}, "inside the project"),
        ({"entry": {"script": "/etc/train.py"}}, "inside the project"),
        ({"entry": {"script": "train.sh"}}, "pattern"),
        ({"entry": {"script": "t.py"}, "model": {"builtin": "mlp"}}, "not both"),
        ({}, "needs model"),
        ({"entry": {"script": "t.py"}, "train": {"seed": 1}}, "remove the train section"),
        ({"entry": {"script": "t.py"}, "data": {"source": "synthetic"}}, "data.source 'script'"),
        ({"model": {"builtin": "mlp"}, "data": {"source": "script"}}, "give entry.script"),
    ],
)
def test_a_runner_spec_is_checked(raw: dict, why: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValueError, match=why):
        JobSpec.model_validate({"name": "t", **raw})


def test_a_runner_job_may_name_data_sets_and_a_model_job_reads_them_in_make_batch() -> None:
    raw = {"name": "t", "entry": {"script": "t.py"}, "data": {"datasets": ["digits"]}}
    assert JobSpec.model_validate(raw).data.dataset_names() == ["digits"]
    with pytest.raises(ValueError, match="read by a make_batch"):
        JobSpec.model_validate(
            {"name": "t", "model": {"builtin": "mlp"}, "data": {"dataset": "digits"}}
        )
