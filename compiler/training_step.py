"""The training step as one function of flat tensors, which the front end traces.

One call is one update (or, with micro-batching, one micro-batch of it): forward, loss, backward,
then — in torch's order — gradient accumulation over micro-batches, GradScaler's unscale and
inf/nan check, gradient clipping, the scheduled learning rate and the optimizer update. A step
that found inf/nan gradients keeps the old parameters and optimizer state, as GradScaler.step
skips optimizer.step().

Flat inputs, in order: params, buffers, optimizer state (per param), then with loss scaling the
scalars `_amp.scale`, `_amp.growth_tracker`, `_amp.updates` (role opt_state), then with
micro-batching one `grad_acc` per param and the `micro` index, then step, inputs, targets.
Outputs: loss, new params, new optimizer state, buffers, new loss-scaling scalars, new grad
accumulators, and `found_inf` (role metric) with loss scaling.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from compiler.batchnorm import BatchNormMode
from compiler.model_factory import ModelCall
from compiler.step_options import ClipConfig, LossScaleConfig, ScheduleConfig
from compiler.training import OptimizerConfig, compute_loss, functional_update

AMP_STATE = ("_amp.scale", "_amp.growth_tracker", "_amp.updates")


@dataclass
class StepLayout:
    """How the flat inputs and outputs of the step function map to model state."""

    param_names: list[str]
    buffer_names: list[str]
    state_names: list[str]
    loss_kind: str
    optimizer: OptimizerConfig
    clip: ClipConfig | None = None
    schedule: ScheduleConfig | None = None
    amp: LossScaleConfig | None = None
    micro_batches: int = 1
    call: ModelCall = ModelCall()

    @classmethod
    def for_spec(cls, spec: dict[str, Any], model: nn.Module) -> StepLayout:
        """The layout of spec's step for `model` (micro-batches from compile_options, see
        `compiler.micro_batching`)."""
        train = spec["train"]
        optimizer = OptimizerConfig.from_spec(train["optimizer"])
        return cls(
            param_names=[n for n, _ in model.named_parameters()],
            buffer_names=[n for n, _ in model.named_buffers()],
            state_names=optimizer.state_names(),
            loss_kind=train.get("loss", "cross_entropy"),
            optimizer=optimizer,
            clip=ClipConfig.from_spec(train.get("grad_clip")),
            schedule=ScheduleConfig.from_spec(train.get("lr_scheduler")),
            amp=LossScaleConfig.from_spec(spec),
            micro_batches=micro_batches_of(spec),
            call=ModelCall.for_spec(spec, model),
        )

    def output_labels(self) -> list[tuple[str, str]]:
        """(role, name) of every output of the step function, in order."""
        out = [("loss", "loss")] + [("param", p) for p in self.param_names]
        out += [("opt_state", f"{p}.{s}") for p in self.param_names for s in self.state_names]
        out += [("buffer", b) for b in self.buffer_names]
        if self.amp:
            out += [("opt_state", name) for name in AMP_STATE]
        if self.micro_batches > 1:
            out += [("grad_acc", f"{p}.grad_acc") for p in self.param_names]
        if self.amp:
            out.append(("metric", "found_inf"))
        return out


def micro_batches_of(spec: dict[str, Any]) -> int:
    """The micro-batch count the compiler chose (1 = the whole batch at once)."""
    return int((spec.get("compile_options") or {}).get("_micro_batches") or 1)


def make_step_function(model: nn.Module, layout: StepLayout) -> Callable[..., list[torch.Tensor]]:
    """The training step as a function of flat tensors (see the module docstring)."""
    n_p, n_b, n_s = len(layout.param_names), len(layout.buffer_names), len(layout.state_names)
    n_amp = 3 if layout.amp else 0
    n_acc = n_p if layout.micro_batches > 1 else 0

    def step_fn(*flat: torch.Tensor) -> list[torch.Tensor]:
        params = list(flat[:n_p])
        at = n_p + n_b
        states = list(flat[at : at + n_p * n_s])
        at += n_p * n_s
        amp_in = list(flat[at : at + n_amp])
        accs = list(flat[at + n_amp : at + n_amp + n_acc])
        step, inputs, targets = flat[-3:]
        micro = flat[-4] if n_acc else None
        batch = (inputs, targets)
        loss, buffers, grads = _gradients(
            model, layout, flat[n_p : n_p + n_b], params, amp_in, batch
        )
        summed = [a + g for a, g in zip(accs, grads, strict=True)] if n_acc else grads
        grads = [s / layout.micro_batches for s in summed] if n_acc else grads
        found = None
        if layout.amp:
            grads, found = layout.amp.unscale(grads, amp_in[0])
        if layout.clip:
            grads = layout.clip.apply(grads)
        new_params, new_states = _update(layout, params, grads, states, step, amp_in, found)
        outputs = [*new_params, *new_states]
        olds = [*params, *states]
        amp_out: list[torch.Tensor] = []
        if layout.amp and found is not None:
            scale, tracker = layout.amp.update(amp_in[0], amp_in[1], found)
            amp_out = [scale, tracker, amp_in[2] + (1 - found)]
        if micro is not None:
            # Only the last micro-batch applies the update; the others only accumulate.
            last = micro >= layout.micro_batches - 1
            outputs = [torch.where(last, new, old) for new, old in zip(outputs, olds, strict=True)]
            amp_out = [
                torch.where(last, new, old) for new, old in zip(amp_out, amp_in, strict=True)
            ]
            accs = [torch.where(last, torch.zeros_like(s), s) for s in summed]
        extra = [found] if found is not None else []
        return [loss, *outputs, *buffers, *amp_out, *accs, *extra]

    return step_fn


def _gradients(
    model: nn.Module,
    layout: StepLayout,
    buffer_in: Sequence[torch.Tensor],
    params: list[torch.Tensor],
    amp_in: list[torch.Tensor],
    batch: tuple[torch.Tensor, torch.Tensor],
) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
    """(loss, new buffers, gradients of the (scaled) loss) for this batch."""

    def loss_of(
        trainable: list[torch.Tensor],
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, list[torch.Tensor]]]:
        buffers = [b.clone() for b in buffer_in]
        state_dict = {
            **dict(zip(layout.param_names, trainable, strict=False)),
            **dict(zip(layout.buffer_names, buffers, strict=False)),
        }
        args, kwargs = layout.call.arguments(*batch)
        with BatchNormMode():  # running statistics update as declared mutations
            output = torch.func.functional_call(model, state_dict, args, kwargs)
        loss = compute_loss(layout.loss_kind, layout.call.output(output), batch[1])
        scaled = loss * amp_in[0] if layout.amp else loss
        return scaled, (loss, buffers)

    grads, (loss, buffers) = torch.func.grad(loss_of, has_aux=True)(params)
    return loss, buffers, grads


def _update(
    layout: StepLayout,
    params: list[torch.Tensor],
    grads: list[torch.Tensor],
    states: list[torch.Tensor],
    step: torch.Tensor,
    amp_in: list[torch.Tensor],
    found: torch.Tensor | None,
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """New params and optimizer state; a step with inf/nan gradients keeps the old ones."""
    n_s = len(layout.state_names)
    lr = layout.schedule.lr_at(layout.optimizer.lr, step) if layout.schedule else None
    # Optimizer-internal step counts (Adam's bias correction, SGD's first momentum) count the
    # updates applied, which a skipped step does not advance; the schedule counts every step.
    opt_step = amp_in[2] if layout.amp else step
    new_params: list[torch.Tensor] = []
    new_states: list[torch.Tensor] = []
    for i, (param, grad) in enumerate(zip(params, grads, strict=False)):
        old = states[i * n_s : (i + 1) * n_s]
        p, s = functional_update(layout.optimizer, param, grad, old, opt_step, lr)
        if found is not None:
            skip = found > 0
            p = torch.where(skip, param, p)
            s = [torch.where(skip, o, n) for o, n in zip(old, s, strict=True)]
        new_params.append(p)
        new_states.extend(s)
    return new_params, new_states


def initial_inputs(
    model: nn.Module, layout: StepLayout, batch: tuple[np.ndarray, np.ndarray]
) -> tuple[list[torch.Tensor], list[tuple[str, str]]]:
    """(flat input tensors, IR input descriptors (role, source name)) in the step's order.

    `batch` is one (micro-)batch: the graph is specialised to its shapes.
    """
    params = dict(model.named_parameters())
    buffers = dict(model.named_buffers())
    flat: list[torch.Tensor] = []
    described: list[tuple[str, str]] = []
    for name in layout.param_names:
        flat.append(params[name].detach().clone())
        described.append(("param", name))
    for name in layout.buffer_names:
        flat.append(buffers[name].detach().clone())
        described.append(("buffer", name))
    for name in layout.param_names:
        for state in layout.state_names:
            flat.append(torch.zeros_like(params[name]).detach())
            described.append(("opt_state", f"{name}.{state}"))
    if layout.amp:
        flat += [torch.tensor(layout.amp.init_scale), torch.tensor(0.0), torch.tensor(0.0)]
        described += [("opt_state", name) for name in AMP_STATE]
    if layout.micro_batches > 1:
        for name in layout.param_names:
            flat.append(torch.zeros_like(params[name]).detach())
            described.append(("grad_acc", f"{name}.grad_acc"))
        flat.append(torch.tensor(0.0))
        described.append(("micro", "micro"))
    flat += [torch.tensor(0.0), torch.from_numpy(batch[0]), torch.from_numpy(batch[1])]
    described += [("step", "step"), ("input", "inputs"), ("target", "targets")]
    return flat, described
