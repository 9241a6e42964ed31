"""as_strided addresses storage; the wafer holds a tensor's own elements, row-major from 0. An
as_strided of a contiguous view inside the step (a slice) is compiled relative to the view, of a
dense one in another order (a transpose, or a product of one, which keeps its strides) through a
permute into storage order, and one the wafer cannot express (of an expand or a strided slice,
or reaching past the view) is refused at compile with the reason, instead of reading the wrong
elements."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from compiler.errors import UnsupportedOperator
from tests.compiler.opinfo_harness import run_on_wafer


def _on_wafer(fn, x: torch.Tensor) -> np.ndarray:
    outputs, missing = run_on_wafer(lambda t: [fn(t)], [x])
    assert not missing and outputs is not None
    return outputs[0]


def test_as_strided_of_a_slice_reads_the_elements_eager_reads() -> None:
    x = torch.arange(20.0)
    for fn in (
        lambda t: t[2:].as_strided((2, 2), (1, 2), 3),  # storage offset 3 = the slice's 1
        lambda t: t[4:].as_strided((3,), (2,)),  # no offset: the view's own
        lambda t: (t * 2).as_strided((3, 2), (2, 5), 1),
        lambda t: t.view(4, 5).t().as_strided((2, 2), (1, 2), 1),
        lambda t: (t.view(2, 2, 5).transpose(1, 2) * 1).as_strided((3, 2), (4, 1), 2),
    ):
        np.testing.assert_array_equal(_on_wafer(fn, x), fn(x).numpy())


@pytest.mark.parametrize(
    ("fn", "why"),
    [
        (lambda t: t.view(4, 5)[:, :1].expand(4, 3).as_strided((2,), (1,)), "gaps or repeats"),
        (lambda t: t[::2].as_strided((2, 2), (1, 2), 0), "gaps or repeats"),
        (lambda t: t[5:].as_strided((2, 2), (1, 2), 0), "outside the tensor"),
        (lambda t: t[:6].as_strided((3,), (3,), 0), "outside the tensor"),
    ],
)
def test_as_strided_the_wafer_cannot_express_is_refused_with_the_reason(fn, why: str) -> None:
    with pytest.raises(UnsupportedOperator) as info:
        _on_wafer(fn, torch.arange(20.0))
    (item,) = info.value.details["ops"]
    assert item["op"] == "aten.as_strided.default"
    assert why in item["suggestion"]


def test_an_in_place_update_of_a_transposed_product_matches_eager() -> None:
    # functionalization writes the update back through as_strided of the product, whose strides
    # are the transpose's: the wafer used to address it row-major (5.3 off eager)
    def step(h: torch.Tensor) -> torch.Tensor:
        h = h.view(8, 2, 5)
        g = h.transpose(1, 2) * 1
        g[:, 1:3] += h.transpose(1, 2)[:, :2]
        g.diagonal(dim1=1, dim2=2).mul_(2)
        return g.sum(-1)

    x = torch.randn(8, 10, generator=torch.Generator().manual_seed(0))
    np.testing.assert_allclose(_on_wafer(step, x), step(x).numpy(), rtol=1e-6)


def test_a_scan_written_into_a_buffer_laid_out_like_a_transpose_matches_eager() -> None:
    # RecurrentGemma's scan: zeros_like of a transposed product keeps its strides, and the
    # backward of each step written into it is an as_strided_scatter of that layout, whose
    # result has the buffer's shape (it had the permuted one: the artifact check refused it)
    def scan(x: torch.Tensor) -> torch.Tensor:
        h = x.view(4, 6, 5).transpose(1, 2) * 1  # [4, 5, 6], strides (30, 1, 5)
        out = torch.zeros_like(h)
        state = torch.zeros(4, 6)
        for t in range(h.shape[1]):
            state = 0.5 * state + h[:, t]
            out[:, t] = state
        return (out * torch.arange(6.0)).sum()

    x = torch.randn(4, 30, generator=torch.Generator().manual_seed(0))
    want = torch.func.grad(scan)(x).numpy()
    np.testing.assert_allclose(_on_wafer(torch.func.grad(scan), x), want, rtol=1e-6)
