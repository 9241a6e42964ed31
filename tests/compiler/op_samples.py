"""Samples for core ops that no OpInfo sample dispatches on the CPU (ops OpInfo reaches only
through another overload, or has no entry for): each calls the core overload directly."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.testing._internal.opinfo.core import SampleInput

aten = torch.ops.aten


def _t(*shape: int, grad: bool = True, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=gen).requires_grad_(grad)


def _samples() -> dict[str, list[tuple[Callable[..., Any], SampleInput]]]:
    x4 = _t(2, 3, 5, 5)
    return {
        "alias": [(aten.alias.default, SampleInput(_t(3, 4)))],
        "copy": [
            (
                aten.copy.default,
                SampleInput(_t(3, 4, grad=False), args=(_t(3, 4, grad=False, seed=1),)),
            )
        ],
        "_native_batch_norm_legit_no_training": [
            (
                aten._native_batch_norm_legit_no_training.default,
                SampleInput(
                    x4,
                    args=(
                        _t(3, seed=1),
                        _t(3, seed=2),
                        _t(3, grad=False, seed=3),
                        _t(3, grad=False, seed=4).abs() + 0.5,
                        0.1,
                        1e-5,
                    ),
                ),
            )
        ],
        "adaptive_avg_pool1d": [
            (aten.adaptive_avg_pool1d.default, SampleInput(_t(2, 3, 8), args=([3],)))
        ],
        "avg_pool1d": [(aten.avg_pool1d.default, SampleInput(_t(2, 3, 8), args=([3], [2], [1])))],
        "col2im": [
            (
                aten.col2im.default,
                SampleInput(_t(2, 12, 9), args=([4, 4], [2, 2], [1, 1], [0, 0], [1, 1])),
            )
        ],
        "reflection_pad1d": [
            (aten.reflection_pad1d.default, SampleInput(_t(2, 3, 6), args=([2, 1],)))
        ],
        "reflection_pad2d": [
            (aten.reflection_pad2d.default, SampleInput(x4, args=([1, 2, 2, 1],)))
        ],
        "replication_pad2d": [
            (aten.replication_pad2d.default, SampleInput(x4, args=([1, 2, 2, 1],)))
        ],
        "upsample_nearest2d": [
            (aten.upsample_nearest2d.vec, SampleInput(x4, args=(None, [2.0, 2.0])))
        ],
        "upsample_bilinear2d": [
            (aten.upsample_bilinear2d.vec, SampleInput(x4, args=(None, False, [2.0, 2.0])))
        ],
        "native_dropout": [(aten.native_dropout.default, SampleInput(_t(4, 6), args=(0.5, True)))],
    }


def extra_samples(name: str) -> Iterator[tuple[Callable[..., Any], SampleInput]]:
    """Direct samples of core op `name` (none for most ops: OpInfo covers them)."""
    yield from _samples().get(name, [])
