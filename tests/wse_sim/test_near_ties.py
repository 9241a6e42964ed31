"""max / argmax / max pooling pick the first of values tied within rounding, as eager's CPU
kernels pick the first of an exact tie: an exact tie in eager (repeated values) reaches the wafer
as a near-tie once its arithmetic rounds differently. Rounding is a few ulps of the tied values
themselves: values that differ by more are not ties, whatever the rest of the tensor holds."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from wse_sim.runtime.kernels.pool import max_pool2d_with_indices
from wse_sim.runtime.kernels.reductions import argmax, argmin, max_dim, min_dim
from wse_sim.runtime.kernels.vision import adaptive_max_pool2d


def _ties_and_rounded() -> tuple[torch.Tensor, np.ndarray]:
    """ReLU output with many exact zeros, and the same values moved by an ulp or so (the zeros
    stay exact: the wafer's ReLU gives exact zeros too)."""
    x = torch.relu(torch.randn(2, 3, 9, 9, generator=torch.Generator().manual_seed(0)))
    x[0, 0, :3, :3] = 1.5  # ties away from zero too
    noise = np.random.default_rng(1).uniform(0, 1e-7, x.shape).astype(np.float32)
    return x, x.numpy() + noise * x.numpy()


def test_max_pool_picks_the_first_of_near_ties_like_eager() -> None:
    x, rounded = _ties_and_rounded()
    values, index = max_pool2d_with_indices(rounded, 3, 2, 1, 1, True)
    want_values, want_index = F.max_pool2d(x, 3, 2, 1, 1, True, return_indices=True)
    np.testing.assert_array_equal(index, want_index.numpy())
    np.testing.assert_allclose(values, want_values.numpy(), rtol=1e-6, atol=1e-7)


def test_max_pool_picks_the_true_maximum_of_values_close_to_each_other() -> None:
    """GoogLeNet's pools: two values near 1.34 that differ by 1.7e-6 (10 ulps) in a tensor whose
    largest value is 5 are not a tie; eager routes the gradient to the larger, and so must the
    wafer (a tolerance relative to the tensor's largest value took the first, 5e-2 off eager's
    losses after 5 steps)."""
    x = torch.zeros(1, 1, 4, 4)
    x[0, 0, 0, 0], x[0, 0, 0, 1], x[0, 0, 3, 3] = 1.3388805, 1.3388822, 5.0
    values, index = max_pool2d_with_indices(x.numpy(), 2, 2)
    want_values, want_index = F.max_pool2d(x, 2, 2, return_indices=True)
    np.testing.assert_array_equal(index, want_index.numpy())
    np.testing.assert_array_equal(values, want_values.numpy())
    _, adaptive = adaptive_max_pool2d(x.numpy(), 2)
    np.testing.assert_array_equal(adaptive, F.adaptive_max_pool2d(x, 2, True)[1].numpy())
    row = np.float32([[1.3388822, 1.3388805, 5.0, 1.3388822]])
    assert int(argmax(-row[:, :2], 1)[0]) == int(torch.tensor(-row[:, :2]).argmax(1)) == 1


def test_adaptive_max_pool_picks_the_first_of_near_ties() -> None:
    x, rounded = _ties_and_rounded()
    _, index = adaptive_max_pool2d(rounded, 4)
    np.testing.assert_array_equal(index, F.adaptive_max_pool2d(x, 4, True)[1].numpy())


def test_max_argmax_along_a_dim_pick_the_first_of_near_ties() -> None:
    flat = torch.tensor([[0.5, 2.0, 2.0, 1.0], [0.25, 0.25, 0.25, -1.0], [3.0, -3.0, 3.0, -3.0]])
    # rounding moved the later tied value up (or, negated, down) by an ulp or two
    rounded = flat.numpy() + np.float32([[0, 0, 4e-7, 0], [0, 3e-8, 6e-8, 0], [0, 0, 5e-7, 0]])
    np.testing.assert_array_equal(max_dim(rounded, 1)[1], flat.max(1).indices.numpy())
    np.testing.assert_array_equal(argmax(rounded, 1), flat.argmax(1).numpy())
    np.testing.assert_array_equal(min_dim(-rounded, 1)[1], (-flat).min(1).indices.numpy())
    np.testing.assert_array_equal(argmin(-rounded, 1), (-flat).argmin(1).numpy())
    assert int(argmax(rounded[2:])) == int(flat[2:].argmax()) == 0


def test_distinct_values_and_nan_still_pick_the_true_maximum() -> None:
    x = np.float32([[0.1, 0.5, 0.4999], [1.0, np.nan, 2.0]])
    np.testing.assert_array_equal(argmax(x, 1), [1, 1])
    np.testing.assert_array_equal(max_dim(x, 1)[1], torch.tensor(x).max(1).indices.numpy())
