"""`from sam import Runner` (docs/runner.md): torch-free to import, the config's batch_size, and
`local=True` / SAM_RUNNER=local training in eager PyTorch with the seed's console."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from sam import Runner, RunnerError, RunResult


class Pairs(Dataset):  # type: ignore[type-arg]
    def __init__(self, rows: int = 48) -> None:
        g = torch.Generator().manual_seed(3)
        self.x = torch.randn(rows, 6, generator=g)
        self.y = (self.x[:, 0] > 0).long() + (self.x[:, 1] > 0).long()

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[i], self.y[i]


def two_losses_step(model, inputs, labels, criterion, optimizer):  # type: ignore[no-untyped-def]
    optimizer.zero_grad()
    out = model(inputs)
    loss = 0.7 * criterion(out, labels) + 0.3 * out.pow(2).mean()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss


def _parts(seed: int = 0):  # type: ignore[no-untyped-def]
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    return model, nn.CrossEntropyLoss(), optimizer, scheduler


def _config(tmp_path: Path, text: str = "batch_size: 12\ntarget_device: wse2\n") -> Path:
    path = tmp_path / "cerebras_config.yaml"
    path.write_text(text)
    return path


def test_importing_sam_loads_no_torch() -> None:
    code = "import sys, sam; print(sam.Runner.__name__, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["Runner", "False"]


def test_batch_size_comes_from_the_config_and_bad_configs_are_refused(tmp_path: Path) -> None:
    model, criterion, optimizer, _ = _parts()
    runner = Runner(
        model=model, loss_fn=criterion, optimizer=optimizer, config_path=_config(tmp_path)
    )
    assert runner.batch_size == 12
    assert Runner(model=model, loss_fn=criterion, optimizer=optimizer).batch_size == 32
    bad = _config(tmp_path, "batch_sise: 12\n")
    with pytest.raises(RunnerError, match="unknown key 'batch_sise'"):
        Runner(model=model, loss_fn=criterion, optimizer=optimizer, config_path=bad)
    with pytest.raises(RunnerError, match="batch_size must be a positive integer"):
        Runner(
            model=model,
            loss_fn=criterion,
            optimizer=optimizer,
            config_path=_config(tmp_path, "batch_size: 0\n"),
        )
    with pytest.raises(RunnerError, match="no such config file"):
        Runner(model=model, loss_fn=criterion, optimizer=optimizer, config_path=tmp_path / "x")


def test_local_training_is_the_eager_loop_with_the_seed_console(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = Pairs()
    model, criterion, optimizer, scheduler = _parts()
    runner = Runner(
        model=model,
        loss_fn=criterion,
        optimizer=optimizer,
        config_path=_config(tmp_path),
        scheduler=scheduler,
        local=True,
    )
    result = runner.train(
        train_data_fn=lambda: DataLoader(data, batch_size=runner.batch_size),
        num_epochs=3,
        train_step_fn=two_losses_step,
    )
    assert isinstance(result, RunResult) and len(result.losses) == 3 * 4
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == ["epoch 1/3", "epoch 2/3", "epoch 3/3"]
    assert all("mean loss" in line and "accuracy" in line and "%" in line for line in lines)

    # The same training written out by hand: the same losses, weights and learning rate.
    ref_model, ref_criterion, ref_optimizer, ref_scheduler = _parts()
    expected = []
    for _ in range(3):
        for x, y in DataLoader(data, batch_size=12):
            expected.append(
                float(two_losses_step(ref_model, x, y, ref_criterion, ref_optimizer).detach())
            )
        ref_scheduler.step()
    assert result.losses == pytest.approx(expected, rel=1e-6)
    assert result.epoch_losses == pytest.approx(
        [sum(expected[i : i + 4]) / 4 for i in (0, 4, 8)], rel=1e-6
    )
    for name, tensor in ref_model.state_dict().items():
        torch.testing.assert_close(result.weights[name], tensor)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.01 * 0.5**3)
    accuracy = result.epoch_accuracies[-1]
    assert accuracy is not None and 0.0 <= accuracy <= 1.0


def test_sam_runner_local_and_steps_per_epoch(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SAM_RUNNER", "local")
    model, criterion, optimizer, _ = _parts()
    runner = Runner(model=model, loss_fn=criterion, optimizer=optimizer)
    assert runner.mode == "local"
    result = runner.train(
        train_data_fn=lambda: DataLoader(Pairs(), batch_size=8),
        num_epochs=2,
        train_step_fn=two_losses_step,
        steps_per_epoch=2,
    )
    assert len(result.losses) == 4 and len(capsys.readouterr().out.splitlines()) == 2
    monkeypatch.setenv("SAM_RUNNER", "wafer")
    with pytest.raises(RunnerError, match="SAM_RUNNER='wafer'"):
        runner.train(train_data_fn=lambda: [], num_epochs=1, train_step_fn=two_losses_step)


def test_bad_arguments_say_what_to_pass() -> None:
    model, criterion, optimizer, _ = _parts()
    with pytest.raises(RunnerError, match="torch.nn.Module"):
        Runner(model=None, loss_fn=criterion, optimizer=optimizer)
    runner = Runner(model=model, loss_fn=criterion, optimizer=optimizer, local=True)
    with pytest.raises(RunnerError, match="train_step_fn"):
        runner.train(train_data_fn=lambda: [], num_epochs=1)
    with pytest.raises(RunnerError, match="num_epochs must be a positive integer"):
        runner.train(train_data_fn=lambda: [], num_epochs=0, train_step_fn=two_losses_step)
    with pytest.raises(RunnerError, match=r"pair \(inputs, labels\)"):
        runner.train(
            train_data_fn=lambda: [torch.zeros(2, 6)], num_epochs=1, train_step_fn=two_losses_step
        )
    with pytest.raises(RunnerError, match="gave no batch in epoch 1"):
        runner.train(train_data_fn=lambda: [], num_epochs=1, train_step_fn=two_losses_step)


def test_a_script_with_no_reachable_server_says_how_to_train_here(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\nfrom sam import Runner\n"
        "model = torch.nn.Linear(2, 2)\n"
        "runner = Runner(model=model, loss_fn=torch.nn.MSELoss(),\n"
        "                optimizer=torch.optim.SGD(model.parameters(), lr=0.1))\n"
        "runner.train(train_data_fn=lambda: [(torch.zeros(32, 2), torch.zeros(32, 2))],\n"
        "             train_step_fn=lambda *a: 0.0)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAM_")}
    env.update(
        SAM_URL="http://127.0.0.1:9",
        SAM_TOKEN="x",
        SAM_TIMEOUT="2",
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        PYTHONPATH=os.pathsep.join(
            [str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")]
        ),
    )
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 1
    assert "RunnerError" in done.stderr and "SAM_RUNNER=local" in done.stderr, done.stderr


@pytest.fixture
def fresh_datasets(monkeypatch: pytest.MonkeyPatch) -> None:
    """The login node's data set copies and names asked for, empty for one test."""
    import sam.datasets

    monkeypatch.setattr(sam.datasets, "local_copies", {})
    monkeypatch.setattr(sam.datasets, "asked", set())
    monkeypatch.delenv("SAM_DATASETS", raising=False)


def test_a_data_set_is_found_on_the_login_node_and_named_in_the_job(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fresh_datasets: None,
) -> None:
    from sam import dataset_path
    from sam.remote import job_spec

    with pytest.raises(RunnerError, match="SAM_DATASETS to a folder holding a folder digits/"):
        dataset_path("digits")
    monkeypatch.setenv("SAM_DATASETS", str(tmp_path))
    assert dataset_path("digits") == tmp_path / "digits"
    model = nn.Linear(6, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    kept = Runner(model, nn.CrossEntropyLoss(), optimizer, datasets={"digits": "/srv/d"})
    assert dataset_path("digits") == Path("/srv/d")  # Runner(datasets={name: folder}) wins
    script = tmp_path / "train.py"
    assert job_spec(kept, script, tmp_path, 1, 2)["data"]["datasets"] == ["digits"]
    # a name the script read but the job would not name is refused before the submit
    unnamed = Runner(model, nn.CrossEntropyLoss(), optimizer)
    with pytest.raises(RunnerError, match=r"datasets=\['digits'\]"):
        job_spec(unnamed, script, tmp_path, 1, 2)
    with pytest.raises(RunnerError, match="not valid"):
        Runner(model, nn.CrossEntropyLoss(), optimizer, datasets=["../etc"])


def test_sam_run_says_in_one_line_that_its_python_has_no_torch(
    run_sam,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    """The script runs on the login node up to runner.train (it imports torch): a Python
    without torch is named before the script starts."""
    bare = tmp_path / "bare-python"  # this Python without site-packages: no torch, no sam
    bare.write_text(f'#!/bin/sh\nexec "{sys.executable}" -I -S "$@"\n')
    bare.chmod(0o755)
    script = tmp_path / "train.py"
    script.write_text(f"open({str(tmp_path / 'ran')!r}, 'w')\nimport torch\n")
    result = run_sam("run", "--python", str(bare), str(script))
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "has no torch" in lines[0] and "--python" in lines[0]
    assert not (tmp_path / "ran").exists()
