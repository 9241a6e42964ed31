"""grid_sampler_2d's backward kernel (F.grid_sample's gradients of the image and of the grid)
against torch's autograd in float64, for every interpolation and padding mode, with and without
align_corners; grid values reach past [-1, 1] so that padding and reflection are exercised."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from wse_sim.runtime.kernels.grid_sample import grid_sampler_2d_backward

MODES = list(itertools.product((0, 1, 2), (0, 1, 2), (False, True)))


def _case(
    seed: int, shape: tuple[int, ...], grid_shape: tuple[int, ...]
) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(shape, generator=gen, dtype=torch.float64) * 4 - 2
    grid = torch.rand(grid_shape, generator=gen, dtype=torch.float64) * 4 - 2
    return x, grid


@pytest.mark.parametrize(("mode", "padding", "align"), MODES)
@pytest.mark.parametrize(
    ("shape", "grid_shape"), [((2, 3, 5, 7), (2, 4, 6, 2)), ((1, 2, 1, 1), (1, 3, 3, 2))]
)
def test_gradients_match_torch(mode, padding, align, shape, grid_shape) -> None:
    x, grid = _case(sum(shape) + mode * 9 + padding * 3 + align, shape, grid_shape)
    x.requires_grad_()
    grid.requires_grad_()
    y = torch.grid_sampler_2d(x, grid, mode, padding, align)
    dy = torch.randn(y.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    want_x, want_grid = torch.autograd.grad(y, [x, grid], dy)
    got_x, got_grid = grid_sampler_2d_backward(
        dy.numpy().astype(np.float32),
        x.detach().numpy().astype(np.float32),
        grid.detach().numpy().astype(np.float32),
        mode,
        padding,
        align,
        [True, True],
    )
    assert got_x.dtype == np.float32 and got_x.shape == x.shape
    # float32 inputs against a float64 reference: the inputs' own rounding, nothing more
    np.testing.assert_allclose(got_x, want_x.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got_grid, want_grid.numpy(), rtol=1e-4, atol=1e-4)
    if mode == 1:  # nearest: the output is piecewise constant in the grid
        assert not got_grid.any()


def test_only_the_gradients_asked_for_are_computed() -> None:
    x, grid = _case(0, (1, 2, 4, 4), (1, 3, 3, 2))
    dy = np.ones((1, 2, 3, 3), np.float32)
    args = (dy, x.numpy().astype(np.float32), grid.numpy().astype(np.float32), 0, 0, False)
    got_x, got_grid = grid_sampler_2d_backward(*args, [False, True])
    assert got_x is None and got_grid is not None and got_grid.shape == (1, 3, 3, 2)
