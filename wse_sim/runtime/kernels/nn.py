"""Neural-network kernels: softmax family, layer norm, embedding, losses, dropout.

Row-wise ops (softmax, layer norm) keep a row's elements on one PE row of the kernel's
rectangle; the row max/sum meet by a row reduction that the timing plan charges.
Dropout uses the runtime's own counter-based RNG (`counter_uniform`): torch's generator cannot
be reproduced, so dropout > 0 does not match PyTorch bit for bit (built-ins use dropout 0).
"""

from __future__ import annotations

import numpy as np

from wse_sim.runtime.kernels.registry import IrDtype, KernelImpl, NodeContext, factory, simple


def _stable_exp(x: np.ndarray, dim: int) -> np.ndarray:
    e: np.ndarray = np.exp(x - np.max(x, axis=dim, keepdims=True))
    return e


@simple("aten._softmax.default", "aten.softmax.int")
def softmax(x: np.ndarray, dim: int, half_to_float: bool = False) -> np.ndarray:
    """exp(x) / sum(exp(x)) along `dim`."""
    if np.size(x) == 0:
        return np.asarray(x).copy()
    if np.ndim(x) == 0:  # dim 0 / -1 of a 0-d tensor
        return np.ones_like(np.asarray(x))
    e = _stable_exp(np.asarray(x), dim)
    y: np.ndarray = e / np.sum(e, axis=dim, keepdims=True)
    return y


@simple("aten._log_softmax.default", "aten.log_softmax.int")
def log_softmax(x: np.ndarray, dim: int, half_to_float: bool = False) -> np.ndarray:
    """x - logsumexp(x) along `dim`."""
    x = np.asarray(x)
    if x.size == 0:
        return np.array(x, copy=True)
    if x.ndim == 0:
        return np.zeros_like(x)
    shifted = x - np.max(x, axis=dim, keepdims=True)
    y: np.ndarray = shifted - np.log(np.sum(np.exp(shifted), axis=dim, keepdims=True))
    return y


@simple("aten._softmax_backward_data.default")
def softmax_backward(
    grad: np.ndarray, out: np.ndarray, dim: int, input_dtype: IrDtype = None
) -> np.ndarray:
    """y * (g - sum(g * y)) with y = softmax(x)."""
    gy = grad * out
    gx: np.ndarray = gy - out * np.sum(gy, axis=dim, keepdims=True)
    return gx


@simple("aten._log_softmax_backward_data.default")
def log_softmax_backward(
    grad: np.ndarray, out: np.ndarray, dim: int, input_dtype: IrDtype = None
) -> np.ndarray:
    """g - exp(y) * sum(g) with y = log_softmax(x)."""
    gx: np.ndarray = grad - np.exp(out) * np.sum(grad, axis=dim, keepdims=True)
    return gx


def _norm_axes(x: np.ndarray, normalized_shape: list[int]) -> tuple[int, ...]:
    return tuple(range(x.ndim - len(normalized_shape), x.ndim))


@simple("aten.native_layer_norm.default")
def layer_norm(
    x: np.ndarray,
    normalized_shape: list[int],
    weight: np.ndarray | None,
    bias: np.ndarray | None,
    eps: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(y, mean, rstd): y = (x - mean) * rstd * weight + bias over the trailing axes."""
    x = np.asarray(x)
    axes = _norm_axes(x, normalized_shape)
    mu = np.mean(x, axis=axes, keepdims=True)
    centered = x - mu
    rstd = 1 / np.sqrt(np.mean(centered * centered, axis=axes, keepdims=True) + np.float32(eps))
    y = centered * rstd
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y, mu, rstd


@simple("aten.native_layer_norm_backward.default")
def layer_norm_backward(
    grad: np.ndarray,
    x: np.ndarray,
    normalized_shape: list[int],
    mu: np.ndarray,
    rstd: np.ndarray,
    weight: np.ndarray | None,
    bias: np.ndarray | None,
    output_mask: list[bool],
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """(grad_x, grad_weight, grad_bias) of native_layer_norm (None where output_mask is false)."""
    x = np.asarray(x)
    axes = _norm_axes(x, normalized_shape)
    lead = tuple(range(x.ndim - len(normalized_shape)))
    xhat = (x - mu) * rstd
    gxhat = grad * weight if weight is not None else grad
    grad_x = rstd * (
        gxhat
        - np.mean(gxhat, axis=axes, keepdims=True)
        - xhat * np.mean(gxhat * xhat, axis=axes, keepdims=True)
    )
    grad_w = np.sum(grad * xhat, axis=lead) if output_mask[1] and weight is not None else None
    grad_b = np.sum(grad, axis=lead) if output_mask[2] and bias is not None else None
    return (grad_x if output_mask[0] else None), grad_w, grad_b


@simple("aten.embedding.default")
def embedding(
    weight: np.ndarray,
    indices: np.ndarray,
    padding_idx: int = -1,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> np.ndarray:
    """weight's rows at `indices`: [*indices.shape, dim]."""
    rows: np.ndarray = np.take(weight, indices, axis=0)
    return rows


@simple("aten.embedding_dense_backward.default")
def embedding_backward(
    grad: np.ndarray,
    indices: np.ndarray,
    num_weights: int,
    padding_idx: int,
    scale_grad_by_freq: bool,
) -> np.ndarray:
    """[num_weights, dim]: grad rows summed into the rows their indices name."""
    grad = np.asarray(grad)
    flat_idx = np.asarray(indices).reshape(-1)
    rows = grad.reshape(flat_idx.size, -1)
    if scale_grad_by_freq:
        counts = np.bincount(flat_idx, minlength=num_weights)
        rows = rows / counts[flat_idx][:, None]
    out = np.zeros((num_weights, rows.shape[1]), dtype=grad.dtype)
    np.add.at(out, flat_idx, rows)
    if padding_idx >= 0:
        out[padding_idx] = 0
    return out


def _nll_weights(
    target: np.ndarray, weight: np.ndarray | None, ignore_index: int, dtype: np.dtype
) -> np.ndarray:
    safe = np.where(target == ignore_index, 0, target)
    w = np.ones_like(safe, dtype=dtype) if weight is None else np.asarray(weight)[safe]
    return np.where(target == ignore_index, np.zeros((), dtype), w).astype(dtype, copy=False)


@simple("aten.nll_loss_forward.default")
def nll_loss_forward(
    x: np.ndarray, target: np.ndarray, weight: np.ndarray | None, reduction: int, ignore_index: int
) -> tuple[np.ndarray, np.ndarray]:
    """(loss, total_weight) of the negative log-likelihood; reduction 0 none, 1 mean, 2 sum."""
    x, target = np.asarray(x), np.asarray(target)
    w = _nll_weights(target, weight, ignore_index, x.dtype)
    safe = np.where(target == ignore_index, 0, target)
    picked = np.take_along_axis(x, safe[..., None], axis=-1)[..., 0] if x.ndim > 1 else x[safe]
    losses = -picked * w
    total = np.sum(w, dtype=x.dtype)
    if reduction == 0:  # torch reports no total weight without a reduction
        return losses, np.zeros((), dtype=x.dtype)
    if reduction == 2:
        return np.sum(losses, dtype=x.dtype), total
    return np.sum(losses, dtype=x.dtype) / total, total


@simple("aten.nll_loss_backward.default")
def nll_loss_backward(
    grad: np.ndarray,
    x: np.ndarray,
    target: np.ndarray,
    weight: np.ndarray | None,
    reduction: int,
    ignore_index: int,
    total_weight: np.ndarray,
) -> np.ndarray:
    """d nll_loss / d x, shaped like x."""
    x, target = np.asarray(x), np.asarray(target)
    w = _nll_weights(target, weight, ignore_index, x.dtype)
    scale = -w * grad if reduction == 0 else -w * (grad / total_weight if reduction == 1 else grad)
    out: np.ndarray = np.zeros_like(x)
    safe = np.where(target == ignore_index, 0, target)
    if x.ndim == 1:
        out[safe] = scale
    else:
        np.put_along_axis(
            out, safe[..., None], np.asarray(scale, dtype=x.dtype)[..., None], axis=-1
        )
    return out


@simple("aten.mse_loss.default")
def mse_loss(x: np.ndarray, y: np.ndarray, reduction: int = 1) -> np.ndarray:
    """Mean (1), sum (2) or elementwise (0) squared error."""
    d = np.asarray(x) - y
    sq = d * d
    return sq if reduction == 0 else (np.mean(sq) if reduction == 1 else np.sum(sq))


@simple("aten.mse_loss_backward.default")
def mse_loss_backward(
    grad: np.ndarray, x: np.ndarray, y: np.ndarray, reduction: int = 1
) -> np.ndarray:
    """d mse_loss / d x."""
    d = np.asarray(x) - y
    scale = 2 / d.size if reduction == 1 else 2
    return grad * scale * d


def counter_uniform(seed: int, stream: int, step: int, shape: tuple[int, ...]) -> np.ndarray:
    """Uniform [0, 1) float32 values from a stateless counter hash of (seed, stream, step, index).

    A splitmix64-style mix of the element counter: the same (seed, stream, step) always gives the
    same values, so resuming from a checkpoint at step k repeats the uninterrupted run's masks.
    """
    n = int(np.prod(shape, dtype=np.int64))
    key = np.uint64(
        (seed * 0x9E3779B97F4A7C15 + stream * 0xBF58476D1CE4E5B9 + step * 0x94D049BB133111EB)
        % 2**64
    )
    z = np.arange(n, dtype=np.uint64) + key
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return ((z >> np.uint64(40)).astype(np.float32) * np.float32(2.0**-24)).reshape(shape)


@factory("aten.native_dropout.default")
def native_dropout(ctx: NodeContext) -> KernelImpl:
    """(x * mask / (1 - p), mask) with the runtime's counter RNG, keyed by this node and the step."""

    def impl(x: np.ndarray, p: float, train: bool | None = True) -> tuple[np.ndarray, np.ndarray]:
        x = np.asarray(x)
        if not train or p == 0:
            return x, np.ones(x.shape, dtype=np.bool_)
        keep = counter_uniform(ctx.seed, ctx.node_index, ctx.step_of(), x.shape) >= p
        return x * keep * np.float32(1 / (1 - p)), keep

    return impl


@factory("aten.bernoulli.p", "aten.bernoulli.default")
def bernoulli(ctx: NodeContext) -> KernelImpl:
    """Ones with probability p (of x's shape and dtype), from the runtime's counter RNG."""

    def impl(x: np.ndarray, p: float | None = None, generator: object = None) -> np.ndarray:
        x = np.asarray(x)
        u = counter_uniform(ctx.seed, ctx.node_index, ctx.step_of(), x.shape)
        prob = x if p is None else p  # bernoulli.default draws with per-element probabilities x
        return (u < prob).astype(x.dtype)

    return impl


@simple("aten.native_dropout_backward.default")
def native_dropout_backward(grad: np.ndarray, mask: np.ndarray, scale: float) -> np.ndarray:
    """grad * mask * scale."""
    return grad * mask * np.float32(scale)
