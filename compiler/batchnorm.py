"""Batch norm in training mode, traced so that its running statistics really update.

`aten.native_batch_norm` updates `running_mean`/`running_var` in place without declaring it in its
schema, so functionalization (which only sees declared mutations) drops the update: the traced
step would return the old statistics. While tracing, `BatchNormMode` reroutes every training-mode
`F.batch_norm` with running statistics to `aten._native_batch_norm_legit_functional` (one wafer
kernel that returns the new statistics) and writes them back with `copy_`, a declared mutation
that functionalization turns into the buffer outputs of the step.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

BATCH_NORM_FORWARD = "aten._native_batch_norm_legit_functional.default"
BATCH_NORM_BACKWARD = "aten.native_batch_norm_backward.default"


class BatchNormMode(TorchFunctionMode):
    """A torch-function mode that replaces training-mode F.batch_norm (see the module docstring)."""

    def __torch_function__(
        self, func: Any, types: Any, args: Any = (), kwargs: Any = None
    ) -> object:
        kwargs = kwargs or {}
        if func is F.batch_norm:
            bound = _bind(*args, **kwargs)
            if bound["training"] and bound["running_mean"] is not None:
                return _functional_batch_norm(**bound)
        return func(*args, **kwargs)


def _bind(
    input: torch.Tensor,
    running_mean: torch.Tensor | None,
    running_var: torch.Tensor | None,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> dict[str, Any]:
    """F.batch_norm's arguments by name (its own signature and defaults)."""
    return dict(
        input=input,
        running_mean=running_mean,
        running_var=running_var,
        weight=weight,
        bias=bias,
        training=training,
        momentum=momentum,
        eps=eps,
    )


def _functional_batch_norm(
    input: torch.Tensor,
    running_mean: torch.Tensor,
    running_var: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    training: bool,
    momentum: float,
    eps: float,
) -> torch.Tensor:
    # Autograd saves the statistics it was given; hand it copies, since the originals change below.
    out: torch.Tensor
    out, _mean, _rstd, new_mean, new_var = torch.ops.aten._native_batch_norm_legit_functional(
        input, weight, bias, running_mean.clone(), running_var.clone(), True, momentum, eps
    )
    with torch.no_grad():
        running_mean.copy_(new_mean)
        running_var.copy_(new_var)
    return out
