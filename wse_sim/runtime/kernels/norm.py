"""Batch normalization in training mode and its backward form.

A wafer kernel keeps each channel's pixels on one PE row of its rectangle: the per-channel sum and
sum of squares meet by a row reduction (charged by the timing plan), then every PE normalizes its
own pixels. Statistics are accumulated in float64 and rounded once, as torch's CPU kernel does
(its accumulator type for float32 is double), so the running statistics match torch's exactly
up to the final float32 rounding.

Running statistics follow torch's rule: new = (1 - momentum) * old + momentum * batch, with the
batch variance unbiased (n / (n - 1)) for the running value and biased for normalizing.
"""

from __future__ import annotations

import numpy as np

from wse_sim.runtime.kernels.registry import simple


def _channel_axes(x: np.ndarray) -> tuple[int, ...]:
    """Every axis but the channel axis (1): [N, C], [N, C, L], [N, C, H, W], ..."""
    return tuple(i for i in range(x.ndim) if i != 1)


def _per_channel(v: np.ndarray, ndim: int) -> np.ndarray:
    """A [C] vector shaped to broadcast against an [N, C, ...] tensor."""
    return v.reshape((1, -1) + (1,) * (ndim - 2))


def batch_stats(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """(mean, biased variance) per channel in float64, and the count each was taken over."""
    axes = _channel_axes(x)
    n = int(x.size // x.shape[1])
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes)
    centered = x64 - _per_channel(mean, x.ndim)
    var = (centered * centered).sum(axis=axes) / n
    return mean, var, n


@simple("aten._native_batch_norm_legit_functional.default")
def batch_norm_functional(
    x: np.ndarray,
    weight: np.ndarray | None,
    bias: np.ndarray | None,
    running_mean: np.ndarray | None,
    running_var: np.ndarray | None,
    training: bool,
    momentum: float,
    eps: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(y, save_mean, save_invstd, new_running_mean, new_running_var) of a batch norm step."""
    x = np.asarray(x)
    dtype = x.dtype
    if training:
        mean, var, n = batch_stats(x)
        invstd = 1.0 / np.sqrt(var + eps)
        unbiased = var * n / max(n - 1, 1)
        new_mean = momentum * mean + (1 - momentum) * np.asarray(running_mean, np.float64)
        new_var = momentum * unbiased + (1 - momentum) * np.asarray(running_var, np.float64)
    else:
        mean = np.asarray(running_mean, np.float64)
        invstd = 1.0 / np.sqrt(np.asarray(running_var, np.float64) + eps)
        new_mean, new_var = mean, np.asarray(running_var, np.float64)
    y = _normalize(x, mean, invstd, weight, bias)
    if not training:  # eval mode saves no statistics: empty tensors, as torch's CPU kernel
        mean = invstd = np.zeros((0,))
    return (
        y,
        mean.astype(dtype),
        invstd.astype(dtype),
        new_mean.astype(dtype),
        new_var.astype(dtype),
    )


def _normalize(
    x: np.ndarray,
    mean: np.ndarray,
    invstd: np.ndarray,
    weight: np.ndarray | None,
    bias: np.ndarray | None,
) -> np.ndarray:
    """y = x * alpha + beta per channel, alpha = invstd * weight, beta = bias - mean * alpha."""
    alpha = invstd if weight is None else invstd * np.asarray(weight, np.float64)
    beta = -mean * alpha if bias is None else np.asarray(bias, np.float64) - mean * alpha
    a = _per_channel(alpha.astype(x.dtype), x.ndim)
    b = _per_channel(beta.astype(x.dtype), x.ndim)
    y: np.ndarray = x * a + b
    return y


@simple("aten.native_batch_norm_backward.default")
def batch_norm_backward(
    grad: np.ndarray,
    x: np.ndarray,
    weight: np.ndarray | None,
    running_mean: np.ndarray | None,
    running_var: np.ndarray | None,
    save_mean: np.ndarray | None,
    save_invstd: np.ndarray | None,
    train: bool,
    eps: float,
    output_mask: list[bool],
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """(grad_input, grad_weight, grad_bias) of batch norm (None where output_mask is false)."""
    grad, x = np.asarray(grad), np.asarray(x)
    axes = _channel_axes(x)
    if train:
        mean = np.asarray(save_mean, np.float64)
        invstd = np.asarray(save_invstd, np.float64)
    else:
        mean = np.asarray(running_mean, np.float64)
        invstd = 1.0 / np.sqrt(np.asarray(running_var, np.float64) + eps)
    n = x.size // x.shape[1]
    g64 = grad.astype(np.float64)
    centered = x.astype(np.float64) - _per_channel(mean, x.ndim)
    sum_dy = g64.sum(axis=axes)
    dot = (g64 * centered).sum(axis=axes)
    w = np.ones_like(invstd) if weight is None else np.asarray(weight, np.float64)
    grad_x = None
    if output_mask[0]:
        scale = _per_channel(invstd * w, x.ndim)
        if train:
            proj = _per_channel(dot * invstd * invstd / n, x.ndim)
            grad_x = (g64 - centered * proj - _per_channel(sum_dy / n, x.ndim)) * scale
        else:
            grad_x = g64 * scale
        grad_x = grad_x.astype(grad.dtype)
    grad_w = (dot * invstd).astype(grad.dtype) if output_mask[1] else None
    grad_b = sum_dy.astype(grad.dtype) if output_mask[2] else None
    return grad_x, grad_w, grad_b
