"""The vision zoo's wafer kernels against torch: batch norm (training statistics and running
updates), hard activations, adaptive pooling, grouped/depthwise and transposed convolution,
forward and backward."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import kernel


def _kernel(target: str):
    return kernel(target, rect=(0, 0, 1, 1))


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _close(ours, theirs, tol: float = 1e-5) -> None:
    theirs = theirs.detach().numpy() if isinstance(theirs, torch.Tensor) else theirs
    np.testing.assert_allclose(np.asarray(ours), theirs, rtol=tol, atol=tol)


@pytest.mark.parametrize("shape", [(6, 4, 5, 5), (8, 3), (4, 3, 7)])
def test_batch_norm_training_matches_torch_and_updates_running_stats(shape) -> None:
    x = _rand(*shape) * 3 + 1
    c = shape[1]
    weight, bias = _rand(c, seed=1), _rand(c, seed=2)
    rm, rv = _rand(c, seed=3), np.abs(_rand(c, seed=4)) + 0.5
    y, mean, invstd, new_rm, new_rv = _kernel("aten._native_batch_norm_legit_functional.default")(
        x, weight, bias, rm, rv, True, 0.1, 1e-5
    )
    t_rm, t_rv = torch.tensor(rm), torch.tensor(rv)
    tx = torch.tensor(x, requires_grad=True)
    tw, tb = torch.tensor(weight, requires_grad=True), torch.tensor(bias, requires_grad=True)
    ty = F.batch_norm(tx, t_rm, t_rv, tw, tb, training=True, momentum=0.1, eps=1e-5)
    _close(y, ty)
    _close(new_rm, t_rm, 1e-6)  # torch updated its buffers in place; ours come back as outputs
    _close(new_rv, t_rv, 1e-6)
    grad = _rand(*shape, seed=5)
    ty.backward(torch.tensor(grad))
    gx, gw, gb = _kernel("aten.native_batch_norm_backward.default")(
        grad, x, weight, rm, rv, mean, invstd, True, 1e-5, [True, True, True]
    )
    _close(gx, tx.grad, 1e-4)
    _close(gw, tw.grad, 1e-4)
    _close(gb, tb.grad, 1e-4)


def test_batch_norm_backward_honours_output_mask_and_no_affine() -> None:
    x, grad = _rand(4, 3, 2, 2), _rand(4, 3, 2, 2, seed=1)
    y, mean, invstd, _, _ = _kernel("aten._native_batch_norm_legit_functional.default")(
        x, None, None, np.zeros(3, np.float32), np.ones(3, np.float32), True, 0.1, 1e-5
    )
    tx = torch.tensor(x, requires_grad=True)
    ty = F.batch_norm(tx, None, None, training=True)
    _close(y, ty)
    ty.backward(torch.tensor(grad))
    gx, gw, gb = _kernel("aten.native_batch_norm_backward.default")(
        grad, x, None, None, None, mean, invstd, True, 1e-5, [True, False, False]
    )
    _close(gx, tx.grad, 1e-4)
    assert gw is None and gb is None


def test_batch_norm_eval_mode_saves_no_statistics_as_torch() -> None:
    x, c = _rand(4, 3, 5), 3
    weight, bias = _rand(c, seed=1), _rand(c, seed=2)
    rm, rv = _rand(c, seed=3), np.abs(_rand(c, seed=4)) + 0.5
    y, mean, invstd, new_rm, new_rv = _kernel("aten._native_batch_norm_legit_functional.default")(
        x, weight, bias, rm, rv, False, 0.1, 1e-5
    )
    want = torch.ops.aten._native_batch_norm_legit(
        *map(torch.tensor, (x, weight, bias, rm, rv)), False, 0.1, 1e-5
    )
    _close(y, want[0])
    assert mean.shape == tuple(want[1].shape) == (0,)
    assert invstd.shape == tuple(want[2].shape) == (0,)
    np.testing.assert_array_equal(new_rm, rm)  # eval mode leaves the running statistics
    np.testing.assert_array_equal(new_rv, rv)


@pytest.mark.parametrize(
    ("name", "fn"),
    [("hardswish", F.hardswish), ("hardsigmoid", F.hardsigmoid)],
)
def test_hard_activations_forward_and_backward(name: str, fn) -> None:
    # values on and around the branch points -3 and 3, where torch's choices matter
    x = np.concatenate([_rand(200) * 4, np.array([-3, 3, -3.0001, 2.9999, 0], np.float32)])
    grad = _rand(x.size, seed=1)
    tx = torch.tensor(x, requires_grad=True)
    ty = fn(tx)
    ty.backward(torch.tensor(grad))
    _close(_kernel(f"aten.{name}.default")(x), ty)
    _close(_kernel(f"aten.{name}_backward.default")(grad, x), tx.grad)


@pytest.mark.parametrize("out", [(1, 1), (2, 3), (3, 3)])
def test_adaptive_pooling_forward_and_backward(out) -> None:
    x = _rand(2, 3, 7, 5)
    tx = torch.tensor(x, requires_grad=True)
    tv, ti = F.adaptive_max_pool2d(tx, out, return_indices=True)
    values, index = _kernel("aten.adaptive_max_pool2d.default")(x, list(out))
    _close(values, tv)
    np.testing.assert_array_equal(index, ti.numpy())
    grad = _rand(*tv.shape, seed=1)
    tv.backward(torch.tensor(grad))
    _close(_kernel("aten.adaptive_max_pool2d_backward.default")(grad, x, index), tx.grad)
    tx.grad = None
    ta = F.adaptive_avg_pool2d(tx, out)
    _close(_kernel("aten._adaptive_avg_pool2d.default")(x, list(out)), ta)
    ta.backward(torch.tensor(grad))
    _close(_kernel("aten._adaptive_avg_pool2d_backward.default")(grad, x), tx.grad)


def _conv_case(transposed: bool, groups: int, stride: int, out_pad: int = 0):
    x = _rand(2, 4, 6, 5)
    cin, cout = 4, 8
    w = _rand(cin, cout // groups, 3, 3, seed=1) if transposed else _rand(cout, cin // groups, 3, 3)
    b = _rand(cout, seed=2)
    tx, tw, tb = (torch.tensor(v, requires_grad=True) for v in (x, w, b))
    if transposed:
        ty = F.conv_transpose2d(tx, tw, tb, stride, 1, out_pad, groups)
    else:
        ty = F.conv2d(tx, tw, tb, stride, 1, 1, groups)
    args = ([stride] * 2, [1, 1], [1, 1], transposed, [out_pad] * 2, groups)
    return x, w, b, tx, tw, tb, ty, args


@pytest.mark.parametrize(
    ("transposed", "groups", "stride", "out_pad"),
    [(False, 2, 1, 0), (False, 4, 2, 0), (True, 1, 2, 1), (True, 2, 1, 0), (True, 1, 1, 0)],
)
def test_grouped_depthwise_and_transposed_convolution(transposed, groups, stride, out_pad) -> None:
    x, w, b, tx, tw, tb, ty, args = _conv_case(transposed, groups, stride, out_pad)
    _close(_kernel("aten.convolution.default")(x, w, b, *args), ty, 1e-4)
    grad = _rand(*ty.shape, seed=3)
    ty.backward(torch.tensor(grad))
    gx, gw, gb = _kernel("aten.convolution_backward.default")(
        grad, x, w, [b.size], *args, [True, True, True]
    )
    _close(gx, tx.grad, 1e-4)
    _close(gw, tw.grad, 1e-4)
    _close(gb, tb.grad, 1e-4)


def test_as_strided_and_its_scatter_match_torch() -> None:
    base = _rand(4, 6)
    size, stride, offset = [3, 2], [5, 2], 1  # overlapping, strided windows of the storage
    tb = torch.tensor(base)
    _close(
        _kernel("aten.as_strided.default")(base, size, stride, offset),
        tb.as_strided(size, stride, offset),
    )
    src = _rand(3, 2, seed=1)
    ours = _kernel("aten.as_strided_scatter.default")(base, src, size, stride, offset)
    _close(ours, torch.as_strided_scatter(tb, torch.tensor(src), size, stride, offset))
    _close(base, tb)  # the input is left as it was
