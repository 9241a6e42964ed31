"""Training-step options that change the compiled step: gradient clipping, learning-rate
schedules and dynamic loss scaling, each with torch's exact meaning.

Each option is a small frozen config built from the spec's `train:` section, with the functional
form the tracer compiles into the step (over the step counter as a tensor) and the eager torch
object it reproduces (`torch.nn.utils.clip_grad_*_`, `torch.optim.lr_scheduler.*`,
`torch.amp.GradScaler`), which tests run side by side.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class ClipConfig:
    """clip_grad_norm_(max_norm, norm_type) when max_norm is set, else clip_grad_value_."""

    max_norm: float | None = None
    norm_type: float = 2.0
    clip_value: float | None = None

    @classmethod
    def from_spec(cls, raw: dict[str, Any] | None) -> ClipConfig | None:
        """None when the spec has no train.grad_clip."""
        if not raw:
            return None
        norm = raw.get("norm_type", 2.0)
        return cls(
            max_norm=None if raw.get("max_norm") is None else float(raw["max_norm"]),
            norm_type=math.inf if str(norm) == "inf" else float(norm),
            clip_value=None if raw.get("clip_value") is None else float(raw["clip_value"]),
        )

    def apply(self, grads: list[torch.Tensor]) -> list[torch.Tensor]:
        """The clipped gradients, computed as torch.nn.utils does (per-tensor norms, then the
        norm of the norms; coefficient max_norm / (total + 1e-6) clamped to 1)."""
        if self.max_norm is None:
            limit = float(self.clip_value or 0.0)
            return [torch.clamp(g, -limit, limit) for g in grads]
        if self.norm_type == math.inf:
            total = torch.stack([g.abs().amax() for g in grads]).amax()
        else:
            p = self.norm_type
            total = _p_norm(torch.stack([_p_norm(g.reshape(-1), p) for g in grads]), p)
        coef = torch.clamp(self.max_norm / (total + 1e-6), max=1.0)
        return [g * coef for g in grads]

    def eager(self, parameters: Any) -> None:
        """Clip `.grad` of `parameters` in place with torch.nn.utils (the eager reference)."""
        if self.max_norm is None:
            torch.nn.utils.clip_grad_value_(parameters, float(self.clip_value or 0.0))
        else:
            torch.nn.utils.clip_grad_norm_(parameters, self.max_norm, norm_type=self.norm_type)


def _p_norm(x: torch.Tensor, p: float) -> torch.Tensor:
    if p == 2.0:
        return torch.sqrt(torch.sum(x * x))
    if p == 1.0:
        return torch.sum(torch.abs(x))
    return torch.pow(torch.sum(torch.pow(torch.abs(x), p)), 1.0 / p)


@dataclass(frozen=True)
class ScheduleConfig:
    """A torch.optim.lr_scheduler stepped once per training step: update k uses the learning
    rate after k scheduler steps (the eager loop `opt.step(); sched.step()`)."""

    name: str
    step_size: int = 1
    gamma: float = 0.1
    t_max: int = 1
    eta_min: float = 0.0
    start_factor: float = 1.0 / 3
    end_factor: float = 1.0
    total_iters: int = 5
    warmup_iters: int = 0

    @classmethod
    def from_spec(cls, raw: dict[str, Any] | None) -> ScheduleConfig | None:
        """None when the spec has no train.lr_scheduler."""
        if not raw:
            return None
        return cls(
            name=str(raw["name"]),
            step_size=int(raw.get("step_size") or 1),
            gamma=float(raw.get("gamma", 0.1)),
            t_max=int(raw.get("T_max") or 1),
            eta_min=float(raw.get("eta_min", 0.0)),
            start_factor=float(raw.get("start_factor", 1.0 / 3)),
            end_factor=float(raw.get("end_factor", 1.0)),
            total_iters=int(raw.get("total_iters", 5)),
            warmup_iters=int(raw.get("warmup_iters") or 0),
        )

    def lr_at(self, base_lr: float, step: torch.Tensor) -> torch.Tensor:
        """The learning rate of update `step` (0-d tensor) as a float64 0-d tensor.

        The closed forms of StepLR, CosineAnnealingLR and LinearLR; torch's recursive forms equal
        them to double rounding. warmup_cosine is SequentialLR([LinearLR(start_factor, 1.0,
        warmup_iters), CosineAnnealingLR(T_max, eta_min)], milestones=[warmup_iters]).
        """
        t = step.to(torch.float64)
        if self.name == "step":
            return base_lr * torch.pow(self.gamma, torch.floor(t / self.step_size))
        if self.name == "cosine":
            return self._cosine(base_lr, t)
        if self.name == "linear":
            return base_lr * self._linear(t, self.start_factor, self.end_factor, self.total_iters)
        warm = base_lr * self._linear(t, self.start_factor, 1.0, self.warmup_iters)
        after = self._cosine(base_lr, torch.clamp(t - self.warmup_iters, min=0.0))
        return torch.where(t < self.warmup_iters, warm, after)

    def _cosine(self, base_lr: float, t: torch.Tensor) -> torch.Tensor:
        cos = torch.cos(t * (math.pi / self.t_max))
        return self.eta_min + (base_lr - self.eta_min) * (1 + cos) / 2

    @staticmethod
    def _linear(t: torch.Tensor, start: float, end: float, iters: int) -> torch.Tensor:
        return start + (end - start) * torch.clamp(t, max=float(iters)) / iters

    def torch_scheduler(
        self, optimizer: torch.optim.Optimizer
    ) -> torch.optim.lr_scheduler.LRScheduler:
        """The eager torch.optim.lr_scheduler this config compiles (for references and tests)."""
        sched = torch.optim.lr_scheduler
        if self.name == "step":
            return sched.StepLR(optimizer, self.step_size, gamma=self.gamma)
        if self.name == "cosine":
            return sched.CosineAnnealingLR(optimizer, self.t_max, eta_min=self.eta_min)
        if self.name == "linear":
            return sched.LinearLR(optimizer, self.start_factor, self.end_factor, self.total_iters)
        warm = sched.LinearLR(optimizer, self.start_factor, 1.0, self.warmup_iters)
        cosine = sched.CosineAnnealingLR(optimizer, self.t_max, eta_min=self.eta_min)
        return sched.SequentialLR(optimizer, [warm, cosine], milestones=[self.warmup_iters])


@dataclass(frozen=True)
class LossScaleConfig:
    """torch.amp.GradScaler's dynamic loss scaling (same fields, same defaults)."""

    init_scale: float = 65536.0
    growth_factor: float = 2.0
    backoff_factor: float = 0.5
    growth_interval: int = 2000

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> LossScaleConfig | None:
        """On when train.loss_scaling.enabled, or when unset and fp16_enabled; else None."""
        raw = (spec.get("train") or {}).get("loss_scaling") or {}
        fp16 = bool((spec.get("compile_options") or {}).get("fp16_enabled"))
        enabled = raw.get("enabled")
        if not (fp16 if enabled is None else enabled):
            return None
        return cls(
            init_scale=float(raw.get("init_scale", 65536.0)),
            growth_factor=float(raw.get("growth_factor", 2.0)),
            backoff_factor=float(raw.get("backoff_factor", 0.5)),
            growth_interval=int(raw.get("growth_interval", 2000)),
        )

    def unscale(
        self, grads: list[torch.Tensor], scale: torch.Tensor
    ) -> tuple[list[torch.Tensor], torch.Tensor]:
        """(grads / scale, found_inf as float 0/1): GradScaler.unscale_, which multiplies by the
        float32 reciprocal of the scale (computed in double) and flags any inf/nan."""
        inv = torch.reciprocal(scale.to(torch.float64)).to(torch.float32)
        unscaled = [g * inv for g in grads]
        # amax propagates nan and never overflows, so it flags exactly the non-finite gradients.
        peaks = torch.stack([g.abs().amax() for g in unscaled]).amax()
        found = torch.logical_or(torch.isnan(peaks), torch.isinf(peaks)).to(torch.float32)
        return unscaled, found

    def update(
        self, scale: torch.Tensor, tracker: torch.Tensor, found: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(new scale, new growth tracker): torch._amp_update_scale_'s rules. An overflow backs the
        scale off and resets the tracker; growth_interval clean steps in a row grow it."""
        grown = tracker + 1
        grow_now = grown >= self.growth_interval
        bigger = scale * self.growth_factor
        # torch keeps the old scale when growing it would overflow float32
        bigger = torch.where(torch.isinf(bigger), scale, bigger)
        clean_scale = torch.where(grow_now, bigger, scale)
        clean_tracker = torch.where(grow_now, torch.zeros_like(grown), grown)
        bad = found > 0
        return (
            torch.where(bad, scale * self.backoff_factor, clean_scale),
            torch.where(bad, torch.zeros_like(tracker), clean_tracker),
        )
