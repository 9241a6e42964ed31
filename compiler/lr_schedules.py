"""The learning-rate schedules of a captured train step.

A torch.optim.lr_scheduler is Python that runs between steps, so the captured graph cannot trace
it; but every schedule of the step count (StepLR, CosineAnnealingLR, LambdaLR with any Python
function, SequentialLR...) is fixed in advance. `lr_tables` steps the schedulers eagerly, as the
job will (per step, or per epoch), and tabulates each param group's learning rate of update
0, 1, ...; the graph picks its row by the `step` input. The schedulers and the optimizer's
learning rates are restored afterwards.

Schedulers are the one passed to the capture and those attached to the optimizer (found through
their reference to it): the seed's train.py steps a global StepLR inside its train_step, which
the runner never sees. ReduceLROnPlateau follows the loss value, which the wafer computes: it is
refused when the step calls it.
"""

from __future__ import annotations

import copy
import gc
import warnings
from dataclasses import dataclass
from typing import Any

import torch

from compiler.errors import ModelError

_LRScheduler = torch.optim.lr_scheduler.LRScheduler
_Plateau = torch.optim.lr_scheduler.ReduceLROnPlateau


@dataclass(eq=False)
class Schedule:
    """A scheduler and when it steps: "step", "epoch", or "auto" (per step when the train step
    calls its step(); a discovered one that it does not call is left out)."""

    scheduler: Any
    per: str
    discovered: bool = False


def schedules_for(
    optimizer: torch.optim.Optimizer,
    scheduler: _LRScheduler | _Plateau | None,
    per: str | None,
    steps_per_epoch: int | None,
) -> list[Schedule]:
    """The passed scheduler (with its period) and every other one attached to `optimizer`."""
    if per not in (None, "step", "epoch"):
        raise ValueError(f"scheduler_per must be 'step', 'epoch' or None, not {per!r}")
    if per == "epoch" and not steps_per_epoch:
        raise ValueError("scheduler_per='epoch' needs steps_per_epoch")
    out = []
    if scheduler is not None:
        if isinstance(scheduler, _Plateau):
            raise _plateau_error()
        out.append(Schedule(scheduler, per or "auto"))
    for found in _attached(optimizer):
        if found is not scheduler:
            out.append(Schedule(found, "auto", discovered=True))
    return out


def _attached(optimizer: torch.optim.Optimizer) -> list[Any]:
    """Schedulers of `optimizer`, outermost only (SequentialLR's parts step through it)."""
    # (no gc.collect(): it costs seconds in a big process; a dropped scheduler found here is
    # not stepped by the train step, so it is left out)
    found = [
        r
        for r in gc.get_referrers(optimizer)
        if isinstance(r, (_LRScheduler, _Plateau)) and getattr(r, "optimizer", None) is optimizer
    ]
    parts = {id(part) for f in found for part in getattr(f, "_schedulers", [])}
    return [f for f in found if id(f) not in parts]


def _plateau_error() -> ModelError:
    return ModelError(
        "ReduceLROnPlateau sets the learning rate from the loss value, which the wafer "
        "computes; use a schedule of the step count (StepLR, CosineAnnealingLR, LambdaLR...)"
    )


def lr_tables(
    optimizer: torch.optim.Optimizer,
    schedules: list[Schedule],
    steps_per_epoch: int | None,
    total_steps: int | None,
) -> list[torch.Tensor] | None:
    """Each param group's learning rate of update 0 .. total_steps-1 (float64), or None without
    a schedule to tabulate."""
    active = [s for s in schedules if not isinstance(s.scheduler, _Plateau)]
    if not active:
        return None
    if not total_steps or total_steps < 1:
        raise ModelError(
            "the optimizer has a learning-rate scheduler, so the compiler needs total_steps "
            "(how many steps the job runs) to tabulate its learning rates"
        )
    saved = [copy.deepcopy(s.scheduler.state_dict()) for s in active]
    saved_groups = [
        {k: copy.deepcopy(v) for k, v in g.items() if k != "params"} for g in optimizer.param_groups
    ]
    rows: list[list[float]] = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for k in range(int(total_steps)):
                rows.append([float(g["lr"]) for g in optimizer.param_groups])
                for s in active:
                    if s.per != "epoch":
                        s.scheduler.step()
                if steps_per_epoch and (k + 1) % steps_per_epoch == 0:
                    for s in active:
                        if s.per == "epoch":
                            s.scheduler.step()
    finally:
        for s, state in zip(reversed(active), reversed(saved), strict=True):
            s.scheduler.load_state_dict(state)
        for group, values in zip(optimizer.param_groups, saved_groups, strict=True):
            group.update(values)
    table = torch.tensor(rows, dtype=torch.float64)
    return [table[:, i].clone() for i in range(table.shape[1])]


def idle_schedules(schedules: list[Schedule], calls: dict[int, int]) -> list[Schedule]:
    """Discovered schedules the traced step never stepped (to leave out); raises for a call the
    declared period contradicts, a passed per-step-or-auto one never called, or a plateau one."""
    idle = []
    for s in schedules:
        called = calls.get(id(s.scheduler), 0)
        if called and isinstance(s.scheduler, _Plateau):
            raise _plateau_error()
        if called and s.per == "epoch":
            raise ModelError(
                "train_step_fn calls scheduler.step() but the scheduler was declared per epoch"
            )
        if not called and s.per == "auto":
            if not s.discovered:
                raise ModelError(
                    "the scheduler is not stepped in train_step_fn; say when it steps "
                    "(scheduler_per='step' or 'epoch')"
                )
            idle.append(s)
        if called > 1:
            raise ModelError(
                f"train_step_fn steps a scheduler {called} times; a compiled step takes one "
                "scheduler step per training step"
            )
    return idle
