"""The backward of grid sampling (F.grid_sample, aten.grid_sampler_2d): the gradients of the
input image and of the sampling grid.

The forward decomposes into gathers and elementwise ops (torch._decomp); its backward is one
kernel. Each output pixel reads a few taps of the input (1 nearest, 4 bilinear, 16 bicubic) at
positions its grid entry gives: the input's gradient adds each tap's weight times the output's
gradient at that tap (a scatter-add, routed to the PE that holds the input pixel), and the grid's
gradient is the sum over channels and taps of the tap's value times the derivative of its weight
along x and y, scaled by the derivative of the coordinate mapping (unnormalizing from [-1, 1], then
border clipping or reflection). Everything follows ATen's CPU kernel (GridSamplerKernel.cpp):
clipped or reflected coordinates carry no gradient at the border, nearest has no grid gradient,
bicubic pads each tap (not the coordinate) and uses the cubic convolution with A = -0.75.
Computed in float64 and rounded once to the input's dtype.
"""

from __future__ import annotations

import numpy as np

from wse_sim.runtime.kernels.registry import simple

_BILINEAR, _NEAREST, _BICUBIC = 0, 1, 2
_ZEROS, _BORDER, _REFLECTION = 0, 1, 2
_A = -0.75  # the cubic convolution's constant, as ATen's


def _unnormalize(coord: np.ndarray, size: int, align: bool) -> tuple[np.ndarray, float]:
    """[-1, 1] -> pixel coordinates, and d(pixel)/d(coord)."""
    if align:
        return (coord + 1) / 2 * (size - 1), (size - 1) / 2
    return ((coord + 1) * size - 1) / 2, size / 2


def _clip(x: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Clipped to [0, size - 1]; gradient 1 strictly inside, 0 on and past the border."""
    grad = ((x > 0) & (x < size - 1)).astype(np.float64)
    return np.minimum(np.maximum(x, 0), size - 1), grad


def _reflect(x: np.ndarray, size: int, align: bool) -> tuple[np.ndarray, np.ndarray]:
    """Reflected into the input's extent (its pixel centres, or its edges without align), and
    the gradient's sign (+1 or -1)."""
    twice_low, twice_high = (0, 2 * (size - 1)) if align else (-1, 2 * size - 1)
    if twice_low == twice_high:
        return np.zeros_like(x), np.zeros_like(x)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    d = x - low
    sign = np.where(d < 0, -1.0, 1.0)
    d = np.abs(d)
    extra, flips = np.fmod(d, span), np.floor(d / span)
    even = flips % 2 == 0
    return np.where(even, extra + low, span - extra + low), np.where(even, sign, -sign)


def _pad(x: np.ndarray, size: int, padding: int, align: bool) -> tuple[np.ndarray, np.ndarray]:
    """ATen's compute_coordinates: the padding mode applied to pixel coordinates, with its
    gradient."""
    if padding == _BORDER:
        return _clip(x, size)
    if padding == _REFLECTION:
        reflected, sign = _reflect(x, size, align)
        clipped, inside = _clip(reflected, size)
        return clipped, sign * inside
    return x, np.ones_like(x)


def _cubic(t: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The four cubic convolution weights of taps -1, 0, 1, 2 at fraction t, and their
    derivatives along t."""

    def near(x: np.ndarray) -> np.ndarray:  # |x| <= 1
        return np.asarray(((_A + 2) * x - (_A + 3)) * x * x + 1)

    def d_near(x: np.ndarray) -> np.ndarray:
        return np.asarray((3 * (_A + 2) * x - 2 * (_A + 3)) * x)

    def far(x: np.ndarray) -> np.ndarray:  # 1 < |x| < 2
        return np.asarray(((_A * x - 5 * _A) * x + 8 * _A) * x - 4 * _A)

    def d_far(x: np.ndarray) -> np.ndarray:
        return np.asarray((3 * _A * x - 10 * _A) * x + 8 * _A)

    weights = [far(t + 1), near(t), near(1 - t), far(2 - t)]
    slopes = [d_far(t + 1), d_near(t), -d_near(1 - t), -d_far(2 - t)]
    return weights, slopes


# A tap: (x, y, weight, d weight / dx, d weight / dy), each (N, H_out, W_out).
_Tap = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _taps(
    gx: np.ndarray, gy: np.ndarray, shape: tuple[int, int], mode: int, padding: int, align: bool
) -> tuple[list[_Tap], float | np.ndarray, float | np.ndarray]:
    """The taps each output pixel reads, and d(pixel x)/d(grid x), d(pixel y)/d(grid y)."""
    height, width = shape
    x, mult_x = _unnormalize(gx, width, align)
    y, mult_y = _unnormalize(gy, height, align)
    if mode == _BICUBIC:  # padding applies to each tap, not to the coordinate
        x0, y0 = np.floor(x), np.floor(y)
        wx, sx = _cubic(x - x0)
        wy, sy = _cubic(y - y0)
        xs = [_pad(x0 - 1 + i, width, padding, align)[0] for i in range(4)]
        ys = [_pad(y0 - 1 + j, height, padding, align)[0] for j in range(4)]
        taps = [
            (xs[i], ys[j], wx[i] * wy[j], sx[i] * wy[j], wx[i] * sy[j])
            for i in range(4)
            for j in range(4)
        ]
        return taps, mult_x, mult_y
    x, grad_x = _pad(x, width, padding, align)
    y, grad_y = _pad(y, height, padding, align)
    if mode == _NEAREST:  # round half to even, as nearbyint; no gradient along the grid
        zero = np.zeros_like(x)
        return [(np.rint(x), np.rint(y), np.ones_like(x), zero, zero)], 0.0, 0.0
    x0, y0 = np.floor(x), np.floor(y)
    fx, fy = x - x0, y - y0
    taps = [
        (x0, y0, (1 - fx) * (1 - fy), -(1 - fy), -(1 - fx)),
        (x0 + 1, y0, fx * (1 - fy), 1 - fy, -fx),
        (x0, y0 + 1, (1 - fx) * fy, -fy, 1 - fx),
        (x0 + 1, y0 + 1, fx * fy, fy, fx),
    ]
    return taps, mult_x * grad_x, mult_y * grad_y


@simple("aten.grid_sampler_2d_backward.default")
def grid_sampler_2d_backward(
    grad: np.ndarray,
    x: np.ndarray,
    grid: np.ndarray,
    interpolation_mode: int,
    padding_mode: int,
    align_corners: bool,
    output_mask: list[bool],
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(grad_input, grad_grid) of grid_sampler_2d (None where output_mask is false)."""
    grad, x, grid = np.asarray(grad), np.asarray(x), np.asarray(grid)
    dtype = x.dtype
    n, c, height, width = x.shape
    # channels last: every tap gathers and scatters whole channel vectors
    image = x.astype(np.float64).transpose(0, 2, 3, 1).reshape(n, height * width, c)
    g = grad.astype(np.float64).transpose(0, 2, 3, 1)  # (N, H_out, W_out, C)
    g64 = grid.astype(np.float64)
    taps, mult_x, mult_y = _taps(
        g64[..., 0], g64[..., 1], (height, width), interpolation_mode, padding_mode, align_corners
    )
    batch = np.arange(n).reshape(n, 1, 1)
    grad_image = np.zeros_like(image)
    along_x = np.zeros(g.shape[:3])
    along_y = np.zeros(g.shape[:3])
    for tx, ty, weight, slope_x, slope_y in taps:
        inside = (tx >= 0) & (tx <= width - 1) & (ty >= 0) & (ty <= height - 1)
        flat = np.where(inside, ty * width + tx, 0).astype(np.int64)
        np.add.at(grad_image, (batch, flat), g * (weight * inside)[..., None])
        value_dot_grad = (image[batch, flat] * g).sum(axis=-1) * inside
        along_x += value_dot_grad * slope_x
        along_y += value_dot_grad * slope_y
    grad_input = None
    if output_mask[0]:
        grad_input = grad_image.reshape(n, height, width, c).transpose(0, 3, 1, 2).astype(dtype)
    grad_grid = None
    if output_mask[1]:
        grad_grid = np.stack([along_x * mult_x, along_y * mult_y], axis=-1).astype(dtype)
    return grad_input, grad_grid
