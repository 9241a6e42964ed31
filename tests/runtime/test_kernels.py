"""Kernel library: every supported op has a kernel, and kernels agree with torch's ATen ops."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from conftest import kernel
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.ops import SUPPORTED_OPS
from wse_sim.runtime.kernels import KERNELS, UnsupportedKernelError, kernel_factory
from wse_sim.runtime.kernels.matmul import panel_matmul
from wse_sim.runtime.kernels.nn import counter_uniform


def test_every_supported_op_has_a_kernel() -> None:
    assert sorted(set(SUPPORTED_OPS) - set(KERNELS)) == []


def test_an_unknown_op_is_a_clear_error() -> None:
    with pytest.raises(UnsupportedKernelError, match="aten.nonzero.default"):
        kernel_factory("aten.nonzero.default")


def _np(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().numpy().copy()
    if isinstance(value, (list, tuple)):
        return type(value)(_np(v) for v in value)
    return value


def _check(target: str, *args: Any, atol: float = 1e-5, **kwargs: Any) -> None:
    """Run `target`'s kernel and torch's ATen op on the same inputs and compare every output."""
    ours = kernel(target)(*_np(args), **kwargs)
    packet, overload = target.removeprefix("aten.").rsplit(".", 1)
    theirs = getattr(getattr(torch.ops.aten, packet), overload)(*args, **kwargs)
    ours_t = ours if isinstance(ours, (tuple, list)) else (ours,)
    theirs_t = theirs if isinstance(theirs, (tuple, list)) else (theirs,)
    assert len(ours_t) == len(theirs_t)
    for a, b in zip(ours_t, theirs_t, strict=False):
        if b is None:
            assert a is None
            continue
        np.testing.assert_allclose(
            np.asarray(a, dtype=np.float64), b.double().numpy(), rtol=1e-4, atol=atol
        )


def _r(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


@pytest.mark.parametrize(
    "stride,padding,dilation,groups", [(1, 1, 1, 1), (2, 0, 1, 1), (1, 2, 2, 2), (2, 1, 1, 4)]
)
def test_convolution_and_its_backward(
    stride: int, padding: int, dilation: int, groups: int
) -> None:
    x, w, b = _r(2, 4, 9, 9), _r(8, 4 // groups, 3, 3, seed=1), _r(8, seed=2)
    args = ([stride, stride], [padding, padding], [dilation, dilation], False, [0, 0], groups)
    _check("aten.convolution.default", x, w, b, *args)
    out = torch.ops.aten.convolution.default(x, w, b, *args)
    _check(
        "aten.convolution_backward.default",
        _r(*out.shape, seed=3),
        x,
        w,
        [8],
        *args,
        [True, True, True],
    )


@pytest.mark.parametrize(
    "kernel,stride,padding,ceil", [([2, 2], [2, 2], [0, 0], False), ([3, 3], [2, 2], [1, 1], True)]
)
def test_pooling_and_backward(kernel: list, stride: list, padding: list, ceil: bool) -> None:
    x = _r(2, 3, 7, 7)
    _check("aten.max_pool2d_with_indices.default", x, kernel, stride, padding, [1, 1], ceil)
    out, idx = torch.ops.aten.max_pool2d_with_indices.default(
        x, kernel, stride, padding, [1, 1], ceil
    )
    g = _r(*out.shape, seed=4)
    _check(
        "aten.max_pool2d_with_indices_backward.default",
        g,
        x,
        kernel,
        stride,
        padding,
        [1, 1],
        ceil,
        idx,
    )
    for include_pad in (True, False):
        _check("aten.avg_pool2d.default", x, kernel, stride, padding, ceil, include_pad, None)
        avg = torch.ops.aten.avg_pool2d.default(x, kernel, stride, padding, ceil, include_pad, None)
        _check(
            "aten.avg_pool2d_backward.default",
            _r(*avg.shape, seed=5),
            x,
            kernel,
            stride,
            padding,
            ceil,
            include_pad,
            None,
        )


def test_layer_norm_softmax_and_losses() -> None:
    x, w, b, g = _r(4, 6), _r(6, seed=1), _r(6, seed=2), _r(4, 6, seed=3)
    _check("aten.native_layer_norm.default", x, [6], w, b, 1e-5)
    _, mean, rstd = torch.ops.aten.native_layer_norm.default(x, [6], w, b, 1e-5)
    _check(
        "aten.native_layer_norm_backward.default", g, x, [6], mean, rstd, w, b, [True, True, True]
    )
    for name in ("_softmax", "_log_softmax"):
        _check(f"aten.{name}.default", x, 1, False)
        out = getattr(torch.ops.aten, name).default(x, 1, False)
        _check(f"aten.{name}_backward_data.default", g, out, 1, torch.float32)
    target = torch.tensor([0, 5, 2, -100])
    logp = torch.log_softmax(x, 1)
    for reduction in (0, 1, 2):
        _check("aten.nll_loss_forward.default", logp, target, None, reduction, -100)
        _, total = torch.ops.aten.nll_loss_forward.default(logp, target, None, reduction, -100)
        grad = _r(4, seed=6) if reduction == 0 else torch.tensor(0.7)
        _check("aten.nll_loss_backward.default", grad, logp, target, None, reduction, -100, total)


def test_embedding_and_indexing() -> None:
    weight, idx = _r(10, 3), torch.tensor([[1, 4, 4], [0, 9, 1]])
    _check("aten.embedding.default", weight, idx)
    _check("aten.embedding_dense_backward.default", _r(2, 3, 3, seed=1), idx, 10, 4, False)
    x = _r(3, 5)
    index = torch.tensor([[0, 4], [2, 2], [1, 3]])
    _check("aten.gather.default", x, 1, index)
    _check("aten.scatter.value", x, 1, index, 2.5)
    _check("aten.constant_pad_nd.default", x, [1, -2, 0, 1], 0.5)
    _check("aten.split_with_sizes.default", x, [2, 3], 1)
    _check("aten.var.correction", x, [1], correction=1, keepdim=True)


def test_elementwise_math_matches_torch() -> None:
    x, y = _r(5, 4), _r(5, 4, seed=1)
    _check("aten.gelu.default", x)
    _check("aten.gelu.default", x, approximate="tanh")
    _check("aten.gelu_backward.default", y, x)
    _check("aten.erf.default", x)
    _check("aten.lerp.Scalar", x, y, 0.9)
    _check("aten.where.self", x > 0, x, y)
    _check("aten.threshold_backward.default", y, x, 0)
    _check("aten.pow.Scalar", 0.9, torch.tensor(3.0))
    _check("aten.clamp.default", x, -0.5, 0.5)


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 9), k=st.integers(1, 40), n=st.integers(1, 9), panels=st.integers(1, 8))
def test_summa_panel_sum_equals_the_matmul(m: int, k: int, n: int, panels: int) -> None:
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    a, b = (
        rng.standard_normal((m, k)).astype(np.float32),
        rng.standard_normal((k, n)).astype(np.float32),
    )
    np.testing.assert_allclose(
        panel_matmul(a, b, panels), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4
    )


def test_counter_rng_is_deterministic_and_uniform() -> None:
    a = counter_uniform(seed=1, stream=7, step=3, shape=(200, 50))
    assert np.array_equal(a, counter_uniform(seed=1, stream=7, step=3, shape=(200, 50)))
    assert not np.array_equal(a, counter_uniform(seed=1, stream=7, step=4, shape=(200, 50)))
    assert 0 <= a.min() and a.max() < 1 and abs(a.mean() - 0.5) < 0.01


def test_dropout_keeps_the_expected_fraction_and_scales() -> None:
    dropout = kernel(
        "aten.native_dropout.default", rect=(0, 0, 1, 1), node_index=5, step_of=lambda: 2
    )
    out, mask = dropout(np.ones((100, 100), np.float32), 0.25, True)
    assert abs(mask.mean() - 0.75) < 0.02
    np.testing.assert_allclose(out[mask], 1 / 0.75, rtol=1e-6)
    assert (out[~mask] == 0).all()


def test_bernoulli_draws_ones_with_probability_p_per_step() -> None:
    def draw(step: int) -> np.ndarray:
        bernoulli = kernel(
            "aten.bernoulli.p", rect=(0, 0, 1, 1), seed=3, node_index=1, step_of=lambda: step
        )
        out: np.ndarray = bernoulli(np.zeros((200, 100), np.float32), 0.8)
        return out

    ones = draw(0)
    assert set(np.unique(ones)) <= {0.0, 1.0} and abs(ones.mean() - 0.8) < 0.02
    assert np.array_equal(ones, draw(0)) and not np.array_equal(ones, draw(1))


@pytest.mark.parametrize("keepdim", [False, True])
def test_max_and_min_along_a_dim_match_torch_values_and_indices(keepdim):
    from wse_sim.runtime.kernels.reductions import max_dim, min_dim

    x = np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32)
    for ours, theirs in ((max_dim, torch.max), (min_dim, torch.min)):
        values, idx = ours(x, 1, keepdim)
        t_values, t_idx = theirs(torch.from_numpy(x), 1, keepdim=keepdim)
        assert np.array_equal(values, t_values.numpy()) and np.array_equal(idx, t_idx.numpy())
        assert idx.dtype == np.int64


def test_cat_skips_a_1d_empty_tensor_as_torch_does() -> None:
    """torch.cat accepts a legacy empty tensor (shape (0,)) beside N-d ones (GPT-NeoX's rotary)."""
    import torch

    from wse_sim.runtime.kernels.shape import cat

    a, b = np.ones((2, 3, 4), np.float32), np.zeros((2, 1, 4), np.float32)
    empty = np.zeros((0,), np.float32)
    want = torch.cat([torch.from_numpy(a), torch.from_numpy(empty), torch.from_numpy(b)], dim=-2)
    np.testing.assert_array_equal(cat([a, empty, b], dim=-2), want.numpy())
