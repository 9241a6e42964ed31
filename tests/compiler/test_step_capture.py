"""`capture_train_step`: a user's own train_step (the seed's Runner model) captured as one graph
and run on the wafer runtime matches eager PyTorch; what cannot be compiled is refused naming the
user's line."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

import wse_sim.runtime as rt
from compiler.arch import get_arch_info
from compiler.artifact import load_artifact, write_artifact
from compiler.artifact_check import check_artifact, check_files
from compiler.errors import ModelError
from compiler.frontend import TracedStep
from compiler.manifest import build_manifest, build_summary
from compiler.planner import compile_options, plan_compile
from compiler.step_capture import DataDependentStep, capture_train_step
from sam_domain.compile import TraceInfo
from tests.compiler.conftest import make_spec
from tests.compiler.wafer_runner import wafer_steps
from wse_sim import Wafer

STEPS = 5
BATCH = 6
# The capture here runs in the test's own process, not in a sandbox.
TRACE: TraceInfo = {"sandboxed": False, "network_isolation": "none"}

TRAIN_PY = """\
import torch
import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    def __init__(self, norm=False):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.norm = nn.BatchNorm1d(16) if norm else nn.Identity()
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(self.norm(torch.tanh(self.fc1(x))))


def plain_step(model, inputs, labels, criterion, optimizer):
    optimizer.zero_grad()
    loss = criterion(model(inputs), labels)
    loss.backward()
    optimizer.step()
    return loss


def make_weighted_step(scheduler):
    def train_step(model, inputs, labels, criterion, optimizer):
        optimizer.zero_grad()
        outputs = model(inputs)
        soft = F.mse_loss(outputs.softmax(-1), F.one_hot(labels, 4).float())
        loss = 0.7 * criterion(outputs, labels) + 0.3 * soft
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.05)
        optimizer.step()
        scheduler.step()
        return loss

    return train_step


def clipped_by_value(model, inputs, labels, criterion, optimizer):
    optimizer.zero_grad()
    loss = criterion(model(inputs), labels)
    loss.backward()
    torch.nn.utils.clip_grad_value_(model.parameters(), 0.01)
    optimizer.step()
    return loss, None


def with_item(model, inputs, labels, criterion, optimizer):
    optimizer.zero_grad()
    loss = criterion(model(inputs), labels)
    print("loss", loss.item())
    loss.backward()
    optimizer.step()
    return loss


class TiedLM(nn.Module):
    # a language model whose output head shares the embedding's weight

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(12, 8)
        self.mix = nn.Linear(8, 8)
        self.head = nn.Linear(8, 12, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, x):
        return self.head(torch.tanh(self.mix(self.embed(x)))).reshape(-1, 12)


def token_step(model, inputs, labels, criterion, optimizer):
    optimizer.zero_grad()
    loss = criterion(model(inputs), labels.reshape(-1))
    loss.backward()
    optimizer.step()
    return loss


scaler = torch.amp.GradScaler("cpu")


def scaled_step(model, inputs, labels, criterion, optimizer):
    optimizer.zero_grad()
    loss = criterion(model(inputs), labels)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss


def no_zero_grad(model, inputs, labels, criterion, optimizer):
    loss = criterion(model(inputs), labels)
    loss.backward()
    optimizer.step()
    return loss


calls = 0


def every_other_step(model, inputs, labels, criterion, optimizer):
    global calls
    calls += 1
    loss = criterion(model(inputs), labels)
    loss.backward()
    if calls % 2 == 0:
        optimizer.step()
        optimizer.zero_grad()
    return loss


def wrong_shape(model, inputs, labels, criterion, optimizer):
    optimizer.zero_grad()
    loss = criterion(model(inputs.t()), labels)
    loss.backward()
    return loss


def hidden_schedule(model, inputs, labels, criterion, optimizer):
    loss = plain_step(model, inputs, labels, criterion, optimizer)
    for group in optimizer.param_groups:
        group["lr"] = group["lr"] * 0.5
    return loss


def with_branch(model, inputs, labels, criterion, optimizer):
    optimizer.zero_grad()
    loss = criterion(model(inputs), labels)
    if loss > 1.0:
        loss = loss / 2
    loss.backward()
    optimizer.step()
    return loss
"""


@pytest.fixture(scope="module")
def user(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """The user's train.py, imported from its own file (so errors can name its lines)."""
    path = tmp_path_factory.mktemp("project") / "train.py"
    path.write_text(TRAIN_PY)
    spec = importlib.util.spec_from_file_location("sam_capture_train", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["sam_capture_train"] = module
    spec.loader.exec_module(module)
    return module


def _line_of(text: str) -> int:
    return next(i for i, line in enumerate(TRAIN_PY.splitlines(), 1) if text in line)


def _batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(1)
    return [
        (torch.randn(BATCH, 8, generator=gen), torch.randint(0, 4, (BATCH,), generator=gen))
        for _ in range(STEPS)
    ]


def _setup(user: ModuleType, make_opt: Any, norm: bool, sched: Any = None) -> tuple[Any, ...]:
    torch.manual_seed(0)
    model = user.Net(norm=norm)
    optimizer = make_opt(model.parameters())
    scheduler = sched(optimizer) if sched else None
    return model, optimizer, scheduler


def compiled_steps(
    traced: TracedStep, batches: list[tuple[np.ndarray, np.ndarray]], out: Path
) -> tuple[list[float], dict[str, np.ndarray]]:
    """What compile_job does after its trace (plan with placement, manifest, artifact), what a
    wafer worker checks before it runs an artifact, then the steps on a simulated wafer."""
    region, arch = (8, 8), get_arch_info("wse2")
    spec = make_spec("mlp", data={"batch_size": BATCH})
    graph, tensors = traced.graph, traced.tensors
    plan = plan_compile(graph, compile_options(spec), arch, region)
    summary = build_summary(plan, graph, arch, region, "captured", 0.0, TRACE)
    kernel_of = {n: p.kernel.id for p in plan.kernels for n in p.kernel.nodes}
    for node in graph["nodes"]:
        node["kernel"] = kernel_of.get(node["name"])
    manifest = build_manifest(spec, plan, graph, arch, region, "captured", summary)
    artifact = load_artifact(write_artifact(out / "artifact", manifest, graph, tensors))
    check_files(artifact.path, 1 << 30)
    check_artifact(artifact, rows=region[0], cols=region[1], arch="wse2", max_host_bytes=1 << 30)
    job = rt.load(artifact, Wafer("wse2", rows=8, cols=8), (0, 0, *region), "captured")
    try:
        return [float(job.step(x, y).loss) for x, y in batches], job.state_dict()
    finally:
        job.release()


def _optimizer_tensors(optimizer: torch.optim.Optimizer) -> dict[tuple[int, str], torch.Tensor]:
    return {
        (i, key): value.clone()
        for i, state in enumerate(optimizer.state.values())
        for key, value in state.items()
    }


def _compare(
    user: ModuleType,
    make_opt: Any,
    step_of: Any,
    *,
    norm: bool = False,
    sched: Any = None,
    artifact_dir: Path | None = None,
    discover: bool = False,
    **capture: Any,
) -> dict[str, np.ndarray]:
    """Capture on one copy, run eagerly on another: the wafer's losses and final weights match."""
    batches = _batches()
    model, optimizer, scheduler = _setup(user, make_opt, norm, sched)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    opt_before = _optimizer_tensors(optimizer)
    traced = capture_train_step(
        model,
        optimizer,
        step_of(scheduler),
        torch.nn.CrossEntropyLoss(),
        *batches[0],
        scheduler=None if discover else scheduler,
        total_steps=STEPS if scheduler else None,
        **capture,
    )
    # capture leaves the user's objects as they were
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert _optimizer_tensors(optimizer).keys() == opt_before.keys()
    assert all(torch.equal(opt_before[k], v) for k, v in _optimizer_tensors(optimizer).items())
    # zero_grad() clears the gradients: none are carried from step to step
    assert not [i for i in traced.graph["inputs"] if i["role"] == "grad_acc"]
    batches_np = [(x.numpy(), y.numpy()) for x, y in batches]
    if artifact_dir is not None:
        losses, state = compiled_steps(traced, batches_np, artifact_dir)
    else:
        spec = {"data": {"batch_size": BATCH}, "train": {"seed": 0}}
        losses, state = wafer_steps(traced, spec, batches_np)

    model, optimizer, scheduler = _setup(user, make_opt, norm, sched)
    step = step_of(scheduler)
    eager = []
    for k, (x, y) in enumerate(batches):
        result = step(model, x, y, torch.nn.CrossEntropyLoss(), optimizer)
        loss = result[0] if isinstance(result, tuple) else result
        eager.append(float(loss.detach()))
        if capture.get("scheduler_per") == "epoch" and (k + 1) % capture["steps_per_epoch"] == 0:
            scheduler.step()  # the runner's epoch loop
    np.testing.assert_allclose(losses, eager, rtol=1e-3, atol=1e-6)
    for name, value in model.state_dict().items():
        np.testing.assert_allclose(state[name], value.numpy(), rtol=1e-3, atol=1e-5, err_msg=name)
    assert int(state["_steps_done"]) == STEPS
    return state


def test_two_weighted_losses_clip_norm_adam_steplr(user: ModuleType, tmp_path: Path) -> None:
    """The issue's step: two weighted losses, clip_grad_norm_, Adam and a StepLR stepped inside
    the step (with batch norm buffers updating too), through the planner, an artifact and the
    wafer worker's checks."""
    state = _compare(
        user,
        lambda p: torch.optim.Adam(p, lr=0.05),
        user.make_weighted_step,
        norm=True,
        sched=lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5),
        artifact_dir=tmp_path,
    )
    # Adam's own state tensors travel with names; StepLR's learning rates are a graph constant
    assert {"fc1.weight.exp_avg", "fc1.weight.exp_avg_sq", "fc1.weight.step"} <= set(state)
    assert float(state["fc1.weight.step"]) == STEPS


def test_sgd_with_momentum(user: ModuleType) -> None:
    state = _compare(
        user,
        lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3),
        lambda _: user.plain_step,
    )
    assert "fc2.bias.momentum_buffer" in state


def test_adamw_with_clip_grad_value(user: ModuleType) -> None:
    _compare(user, lambda p: torch.optim.AdamW(p, lr=0.02), lambda _: user.clipped_by_value)


def _two_groups(params: Any) -> torch.optim.Optimizer:
    first, *rest = list(params)
    return torch.optim.Adam([{"params": [first], "lr": 0.01}, {"params": rest, "lr": 0.05}])


@pytest.mark.parametrize(
    "make_opt",
    [
        lambda p: torch.optim.RMSprop(p, lr=0.01, momentum=0.5, centered=True),
        lambda p: torch.optim.Adagrad(p, lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1),
        # the first update clones the gradient into the buffer: computed apart, picked at step 0
        lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.3),
        # its rectification branches on the step count: compiled as the capturable torch.where
        lambda p: torch.optim.RAdam(p, lr=0.01),
        lambda p: torch.optim.NAdam(p, lr=0.01),
        _two_groups,
    ],
    ids=["rmsprop", "adagrad", "sgd-dampening", "radam", "nadam", "param-groups"],
)
# RAdam's torch.where also evaluates the square root of the branch it does not take
@pytest.mark.filterwarnings("ignore:invalid value encountered in sqrt")
def test_other_optimizers(user: ModuleType, make_opt: Any) -> None:
    _compare(user, make_opt, lambda _: user.plain_step)


def test_scheduler_per_epoch(user: ModuleType) -> None:
    """A schedule the runner steps per epoch: the graph picks the epoch's learning rate."""
    _compare(
        user,
        lambda p: torch.optim.SGD(p, lr=0.2, momentum=0.5),
        lambda _: user.plain_step,
        sched=lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=3),
        scheduler_per="epoch",
        steps_per_epoch=2,
    )


def test_a_scheduler_the_runner_never_saw(user: ModuleType) -> None:
    """The seed's train.py steps a global scheduler inside train_step, and its Runner is given
    only the model, loss and optimizer: the scheduler is found through the optimizer."""
    _compare(
        user,
        lambda p: torch.optim.Adam(p, lr=0.05),
        user.make_weighted_step,
        sched=lambda o: torch.optim.lr_scheduler.SequentialLR(
            o,
            [
                torch.optim.lr_scheduler.LinearLR(o, start_factor=0.5, total_iters=2),
                torch.optim.lr_scheduler.ExponentialLR(o, gamma=0.7),
            ],
            milestones=[2],
        ),
        discover=True,
    )


def test_a_scheduler_the_step_does_not_step_is_left_out(user: ModuleType) -> None:
    _compare(
        user,
        lambda p: torch.optim.SGD(p, lr=0.1),
        lambda _: user.plain_step,
        sched=lambda o: torch.optim.lr_scheduler.StepLR(o, 1, gamma=0.1),
        discover=True,
    )


def test_lambda_scheduler_in_the_step(user: ModuleType) -> None:
    """Any schedule of the step count, even a Python lambda, is tabulated eagerly."""
    _compare(
        user,
        lambda p: torch.optim.AdamW(p, lr=0.05),
        user.make_weighted_step,
        sched=lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda k: 1.0 / (1 + k) ** 2),
    )


@pytest.mark.parametrize(
    ("step", "text", "why"),
    [
        ("with_item", "loss.item()", ".item()"),
        ("with_branch", "if loss > 1.0:", "data-dependent control flow"),
    ],
)
def test_refusals_name_the_line(user: ModuleType, step: str, text: str, why: str) -> None:
    model, optimizer, _ = _setup(user, lambda p: torch.optim.SGD(p, lr=0.1), False)
    x, y = _batches()[0]
    with pytest.raises(DataDependentStep) as caught:
        capture_train_step(model, optimizer, getattr(user, step), torch.nn.CrossEntropyLoss(), x, y)
    message = caught.value.message
    assert f"train.py:{_line_of(text)} in {step}" in message
    assert text in message and why in message
    assert caught.value.kind == "model_error"  # the contract's kinds; details name the line
    assert caught.value.details["line"] == _line_of(text)


def _run_both(
    make: Any, step: Any, criterion: Any, batches: list[tuple[torch.Tensor, torch.Tensor]]
) -> TracedStep:
    """Capture and run on the wafer vs eager, for a model and optimizer from `make()`."""
    model, optimizer = make()
    traced = capture_train_step(model, optimizer, step, criterion, *batches[0])
    spec = {"data": {"batch_size": len(batches[0][0])}, "train": {"seed": 0}}
    losses, state = wafer_steps(traced, spec, [(x.numpy(), y.numpy()) for x, y in batches])
    model, optimizer = make()
    eager = [float(step(model, x, y, criterion, optimizer).detach()) for x, y in batches]
    np.testing.assert_allclose(losses, eager, rtol=1e-3)
    for name, value in model.named_parameters():  # a tied weight is named once, as torch does
        np.testing.assert_allclose(state[name], value.detach().numpy(), rtol=1e-3, atol=1e-5)
    return traced


def test_tied_weights(user: ModuleType) -> None:
    def make() -> tuple[nn.Module, torch.optim.Optimizer]:
        torch.manual_seed(0)
        model = user.TiedLM()
        return model, torch.optim.Adam(model.parameters(), lr=0.02)

    gen = torch.Generator().manual_seed(2)
    batches = [
        (torch.randint(0, 12, (3, 5), generator=gen), torch.randint(0, 12, (3, 5), generator=gen))
        for _ in range(STEPS)
    ]
    _run_both(make, user.token_step, torch.nn.CrossEntropyLoss(), batches)


def test_a_loss_holding_tensors(user: ModuleType) -> None:
    """A class-weighted loss's weights (a real tensor the step holds) become graph constants."""

    def make() -> tuple[nn.Module, torch.optim.Optimizer]:
        torch.manual_seed(0)
        model = user.Net()
        return model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    weights = torch.tensor([1.0, 2.0, 0.5, 1.5])
    _run_both(make, user.plain_step, torch.nn.CrossEntropyLoss(weight=weights), _batches())


def test_gradients_accumulate_without_zero_grad(user: ModuleType) -> None:
    """Without zero_grad eager PyTorch adds each step's gradients to the last ones: the
    compiled step carries them as state and does the same."""

    def make() -> tuple[nn.Module, torch.optim.Optimizer]:
        torch.manual_seed(0)
        model = user.Net()
        return model, torch.optim.SGD(model.parameters(), lr=0.05)

    traced = _run_both(make, user.no_zero_grad, torch.nn.CrossEntropyLoss(), _batches())
    carried = {i["source_name"] for i in traced.graph["inputs"] if i["role"] == "grad_acc"}
    assert carried == {f"{n}.grad_acc" for n, _ in user.Net().named_parameters()}


def test_a_library_call_that_reads_values_is_named(user: ModuleType) -> None:
    """GradScaler.step checks for inf in Python: refused at the user's line, naming torch's."""
    model, optimizer, _ = _setup(user, lambda p: torch.optim.SGD(p, lr=0.1), False)
    x, y = _batches()[0]
    with pytest.raises(DataDependentStep) as caught:
        capture_train_step(model, optimizer, user.scaled_step, torch.nn.CrossEntropyLoss(), x, y)
    line = _line_of("scaler.step(optimizer)")
    assert f"train.py:{line} in scaled_step" in caught.value.message
    assert "torch/amp/grad_scaler.py" in caught.value.message


def test_an_update_behind_a_python_condition_is_refused(user: ModuleType) -> None:
    """A Python counter in the step is fixed when it is compiled: the traced call skipped
    optimizer.step(), so the compiled step would never update."""
    model, optimizer, _ = _setup(user, lambda p: torch.optim.SGD(p, lr=0.1), False)
    x, y = _batches()[0]
    setattr(user, "calls", 0)  # noqa: B010 (the user file's own counter)
    with pytest.raises(ModelError, match=r"did not call optimizer.step\(\)"):
        capture_train_step(
            model, optimizer, user.every_other_step, torch.nn.CrossEntropyLoss(), x, y
        )
    with pytest.raises(ModelError, match="a batch must be"):
        not_a_tensor: Any = [x]
        capture_train_step(
            model, optimizer, user.plain_step, torch.nn.CrossEntropyLoss(), not_a_tensor, y
        )


def test_a_step_that_raises_names_its_line(user: ModuleType) -> None:
    model, optimizer, _ = _setup(user, lambda p: torch.optim.SGD(p, lr=0.1), False)
    x, y = _batches()[0]
    with pytest.raises(ModelError, match="RuntimeError") as caught:
        capture_train_step(model, optimizer, user.wrong_shape, torch.nn.CrossEntropyLoss(), x, y)
    forward = _line_of("return self.fc2")
    assert f"(at train.py:{forward} in forward)" in caught.value.message
    assert f"train.py:{_line_of('inputs.t()')} in wrong_shape" in caught.value.details["traceback"]


def test_a_learning_rate_changed_in_the_step_needs_the_scheduler(user: ModuleType) -> None:
    """A schedule the capture was not told about would be frozen into the graph: refused."""
    model, optimizer, _ = _setup(user, lambda p: torch.optim.SGD(p, lr=0.1), False)
    x, y = _batches()[0]
    with pytest.raises(ModelError, match="learning rate"):
        capture_train_step(
            model, optimizer, user.hidden_schedule, torch.nn.CrossEntropyLoss(), x, y
        )
    assert optimizer.param_groups[0]["lr"] == 0.1


def test_scheduler_stepped_outside_needs_a_period(user: ModuleType) -> None:
    model, optimizer, scheduler = _setup(
        user,
        lambda p: torch.optim.SGD(p, lr=0.1),
        False,
        lambda o: torch.optim.lr_scheduler.StepLR(o, 1),
    )
    x, y = _batches()[0]
    with pytest.raises(ModelError, match="scheduler_per"):
        capture_train_step(
            model,
            optimizer,
            user.plain_step,
            torch.nn.CrossEntropyLoss(),
            x,
            y,
            scheduler=scheduler,
            total_steps=4,
        )
