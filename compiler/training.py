"""The training-step semantics shared by the tracer and the eager reference in tests.

`compute_loss` and `functional_update` define exactly what one step computes; both follow
torch.optim's single-tensor implementations (the CPU default) operation by operation so that the
traced graph reproduces `torch.optim.SGD/Adam/AdamW` to float32 rounding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

Rate = float | Tensor
"""A learning rate: a float, or a float64 scalar tensor under a schedule."""
Updated = tuple[Tensor, list[Tensor]]
"""An optimizer update's result: (new parameter, new state tensors)."""


def compute_loss(kind: str, output: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The scalar loss of `output` against `targets` for train.loss `kind`.

    cross_entropy: output [..., C] is flattened to [N, C] and targets [...] to [N].
    mse: targets are reshaped to output's shape. model: `output` is already the loss.
    """
    if kind == "model":
        return output if output.dim() == 0 else output.mean()
    if kind == "cross_entropy":
        return F.cross_entropy(output.reshape(-1, output.shape[-1]), targets.reshape(-1))
    if kind == "mse":
        return F.mse_loss(output, targets.reshape(output.shape).to(output.dtype))
    raise ValueError(f"unknown loss {kind!r}; use cross_entropy, mse or model")


@dataclass(frozen=True)
class OptimizerConfig:
    """An optimizer with torch.optim's field meanings (spec train.optimizer)."""

    name: str
    lr: float
    momentum: float = 0.0
    dampening: float = 0.0
    nesterov: bool = False
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    amsgrad: bool = False
    extra: dict[str, object] = field(default_factory=dict)

    @classmethod
    def from_spec(cls, opt: dict[str, Any]) -> OptimizerConfig:
        """Build from the spec's train.optimizer dict (defaults are torch.optim's)."""
        name = str(opt.get("name", "sgd")).lower()
        default_wd = 0.01 if name == "adamw" else 0.0
        return cls(
            name=name,
            lr=float(opt.get("lr", 0.01)),
            momentum=float(opt.get("momentum", 0.0)),
            dampening=float(opt.get("dampening", 0.0)),
            nesterov=bool(opt.get("nesterov", False)),
            weight_decay=float(opt.get("weight_decay", default_wd)),
            # two numbers, as the spec schema checks; tuple() cannot say so to mypy
            betas=tuple(float(b) for b in opt.get("betas", (0.9, 0.999))),  # type: ignore[arg-type]
            eps=float(opt.get("eps", 1e-8)),
            amsgrad=bool(opt.get("amsgrad", False)),
        )

    def state_names(self) -> list[str]:
        """Names of the per-parameter state tensors, in IR order."""
        if self.name == "sgd":
            return ["momentum_buffer"] if self.momentum != 0 else []
        return ["exp_avg", "exp_avg_sq"] + (["max_exp_avg_sq"] if self.amsgrad else [])

    def torch_optimizer(self, params: Any) -> torch.optim.Optimizer:
        """The equivalent eager torch.optim optimizer (for references and tests)."""
        if self.name == "sgd":
            return torch.optim.SGD(
                params,
                lr=self.lr,
                momentum=self.momentum,
                dampening=self.dampening,
                nesterov=self.nesterov,
                weight_decay=self.weight_decay,
            )
        cls = torch.optim.Adam if self.name == "adam" else torch.optim.AdamW
        return cls(
            params,
            lr=self.lr,
            betas=self.betas,
            eps=self.eps,
            weight_decay=self.weight_decay,
            amsgrad=self.amsgrad,
        )


def functional_update(
    cfg: OptimizerConfig,
    param: Tensor,
    grad: Tensor,
    state: list[Tensor],
    step: Tensor,
    lr: Rate | None = None,
) -> Updated:
    """One optimizer update of `param` (any shape) -> (new param, new state); step = updates done.

    lr: this update's learning rate (a float64 scalar tensor under a schedule); default cfg.lr.
    """
    lr = cfg.lr if lr is None else lr
    if cfg.name == "sgd":
        return _sgd(cfg, param, grad, state, step, lr)
    return _adam(cfg, param, grad, state, step, lr)


def _as(value: float | torch.Tensor, like: torch.Tensor) -> float | torch.Tensor:
    """A scheduled (tensor) learning-rate term in the parameter's dtype; a float stays a float."""
    return value.to(like.dtype) if isinstance(value, torch.Tensor) else value


def _sgd(
    cfg: OptimizerConfig, param: Tensor, grad: Tensor, state: list[Tensor], step: Tensor, lr: Rate
) -> Updated:
    d_p = grad if cfg.weight_decay == 0 else grad + cfg.weight_decay * param
    if cfg.momentum == 0:
        return param - _as(lr, param) * d_p, []
    (buf,) = state
    # torch.optim clones d_p into the buffer on the first update; later ones blend.
    blended = buf * cfg.momentum + (1 - cfg.dampening) * d_p
    buf = torch.where(step == 0, d_p, blended)
    d_p = d_p + cfg.momentum * buf if cfg.nesterov else buf
    return param - _as(lr, param) * d_p, [buf]


def _adam(
    cfg: OptimizerConfig, param: Tensor, grad: Tensor, state: list[Tensor], step: Tensor, lr: Rate
) -> Updated:
    beta1, beta2 = cfg.betas
    if cfg.weight_decay != 0:
        if cfg.name == "adamw":
            param = param * _as(1 - lr * cfg.weight_decay, param)
        else:
            grad = grad + cfg.weight_decay * param
    exp_avg, exp_avg_sq = state[0], state[1]
    exp_avg = torch.lerp(exp_avg, grad, 1 - beta1)
    exp_avg_sq = exp_avg_sq * beta2 + (1 - beta2) * grad * grad
    # torch.optim computes the bias corrections in Python doubles; do the same in float64 so
    # the float32 update rounds exactly like eager (1 - beta2**t cancels badly in float32).
    t = step.to(torch.float64) + 1
    bias_correction1 = 1 - torch.pow(beta1, t)
    bias_correction2_sqrt = torch.sqrt(1 - torch.pow(beta2, t)).to(param.dtype)
    step_size = (lr / bias_correction1).to(param.dtype)
    new_state = [exp_avg, exp_avg_sq]
    second = exp_avg_sq
    if cfg.amsgrad:
        second = torch.maximum(state[2], exp_avg_sq)
        new_state.append(second)
    denom = torch.sqrt(second) / bias_correction2_sqrt + cfg.eps
    return param - step_size * exp_avg / denom, new_state
