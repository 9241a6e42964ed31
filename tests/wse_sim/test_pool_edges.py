"""Pooling kernels on torch's edge cases: a ceil_mode window hanging past the input (its
overhang is not counted in the average) and unbatched [C, H, W] inputs."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from wse_sim.runtime.kernels.pool import (
    avg_pool2d,
    max_pool2d_with_indices,
    max_pool2d_with_indices_backward,
)


def test_avg_pool_ceil_mode_divides_by_the_window_inside_the_input() -> None:
    x = torch.randn(1, 2, 1, 9, generator=torch.Generator().manual_seed(0))
    for padding in (0, 1):
        want = F.avg_pool2d(x, (1, 7), (1, 3), (0, padding), ceil_mode=True)
        got = avg_pool2d(x.numpy(), (1, 7), (1, 3), (0, padding), True, True)
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-6)


def test_max_pool_of_an_unbatched_input() -> None:
    x = torch.randn(3, 7, 6, generator=torch.Generator().manual_seed(1))
    values, index = max_pool2d_with_indices(x.numpy(), 3, 2, 1, 1, True)
    want_values, want_index = F.max_pool2d(x, 3, 2, 1, 1, True, return_indices=True)
    np.testing.assert_array_equal(index, want_index.numpy())
    np.testing.assert_allclose(values, want_values.numpy())
    grad = torch.randn_like(want_values)
    want_grad = torch.ops.aten.max_pool2d_with_indices_backward(
        grad, x, [3, 3], [2, 2], [1, 1], [1, 1], True, want_index
    )
    got = max_pool2d_with_indices_backward(grad.numpy(), x.numpy(), 3, 2, 1, 1, True, index)
    np.testing.assert_allclose(got, want_grad.numpy(), rtol=1e-6)
