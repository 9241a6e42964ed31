"""The transformer zoo's ops on the wafer kernels, forward and backward, against torch.

Each case traces a small function and its gradient with the compiler's own decomposition table
(as the front end does), then runs every node of the graph on the runtime's kernel for its
target and compares outputs and gradients with torch autograd (float32).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import node_context
from torch.fx.experimental.proxy_tensor import make_fx
from torch.nn.attention import SDPBackend, sdpa_kernel

from compiler import ops
from wse_sim.runtime.kernels import KERNELS, NodeContext
from wse_sim.runtime.kernels.text import cumsum


def _ctx(node: torch.fx.Node, index: int) -> NodeContext:
    val = node.meta.get("val")
    single = isinstance(val, torch.Tensor)
    return node_context(
        str(node.target),
        name=node.name,
        dtype=str(val.dtype).removeprefix("torch.") if single else "float32",
        shape=tuple(val.shape) if single else None,
        node_index=index,
    )


def run_on_kernels(fn: Callable[..., Any], *inputs: torch.Tensor) -> list[np.ndarray]:
    """Trace fn like the front end (SAM's decompositions, functionalized) and run it node by node
    on the runtime's kernels; every target must be in SUPPORTED_OPS."""
    with sdpa_kernel([SDPBackend.MATH]):
        gm = make_fx(
            torch.func.functionalize(fn, remove="mutations"),
            decomposition_table=ops.decomposition_table(),
            tracing_mode="real",  # the cases close over real constants (masks, rotary tables)
        )(*inputs)
    env: dict[torch.fx.Node, Any] = {}
    placeholders = iter(inputs)

    def value(a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            return env[a]
        if isinstance(a, (list, tuple)):
            return [value(x) for x in a]
        if isinstance(a, torch.dtype):
            return str(a).removeprefix("torch.")
        return a

    for index, node in enumerate(gm.graph.nodes):
        if node.op == "placeholder":
            env[node] = next(placeholders).detach().numpy()
        elif node.op == "get_attr":
            env[node] = getattr(gm, str(node.target)).detach().numpy()
        elif node.op == "call_function":
            target = "getitem" if node.target.__name__ == "getitem" else str(node.target)
            assert target in ops.SUPPORTED_OPS, target
            kwargs = {
                k: value(v)
                for k, v in node.kwargs.items()
                if k not in ("device", "layout", "pin_memory")
            }
            out = KERNELS[target](_ctx(node, index))(*value(list(node.args)), **kwargs)
            env[node] = out
        elif node.op == "output":
            return [
                np.asarray(v) for v in value(list(torch.utils._pytree.tree_leaves(node.args[0])))
            ]
    raise AssertionError("graph without output")


def assert_matches_torch(fn: Callable[..., torch.Tensor], *inputs: torch.Tensor) -> None:
    """fn's output and the gradients of sum(fn * weights) wrt every float input match torch."""
    floats = [i for i, x in enumerate(inputs) if x.is_floating_point()]
    weights = torch.randn(fn(*inputs).shape, generator=torch.Generator().manual_seed(1))

    def with_grads(*xs: torch.Tensor) -> list[torch.Tensor]:
        def of_floats(*fs: torch.Tensor) -> torch.Tensor:
            given = dict(zip(floats, fs, strict=True))
            return fn(*[given.get(i, x) for i, x in enumerate(xs)])

        out, pullback = torch.func.vjp(of_floats, *[xs[i] for i in floats])
        return [out, *pullback(weights)]

    expected = with_grads(*[x.clone() for x in inputs])
    ours = run_on_kernels(with_grads, *[x.clone() for x in inputs])
    assert len(ours) == len(expected)
    for got, want in zip(ours, expected, strict=True):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-4, atol=1e-5)


def _randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_cumsum_forward_backward_and_integer_masks() -> None:
    assert_matches_torch(lambda x: torch.cumsum(x, dim=1), _randn(3, 7))
    mask = torch.tensor([[1, 1, 0, 1], [0, 1, 1, 1]])
    np.testing.assert_array_equal(cumsum(mask.numpy(), -1), torch.cumsum(mask, -1).numpy())
    flags = (mask != 1).numpy()
    got = cumsum(flags, 1)
    assert got.dtype == np.int64  # bool sums promote to int64, as in torch
    np.testing.assert_array_equal(got, torch.cumsum(mask != 1, 1).numpy())


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def test_rotary_embedding_forward_and_backward() -> None:
    positions = torch.arange(6, dtype=torch.float32)
    inv_freq = 1.0 / (10000 ** (torch.arange(0, 8, 2, dtype=torch.float32) / 8))
    angles = torch.cat([torch.outer(positions, inv_freq)] * 2, dim=-1)
    cos, sin = angles.cos(), angles.sin()
    assert_matches_torch(lambda q: q * cos + _rotate_half(q) * sin, _randn(2, 3, 6, 8))


def test_rms_norm_forward_and_backward() -> None:
    norm = torch.nn.RMSNorm(16, eps=1e-6)
    with torch.no_grad():
        norm.weight.copy_(_randn(16, seed=3))
    assert_matches_torch(
        lambda x, w: F.rms_norm(x, (16,), w, 1e-6), _randn(4, 5, 16), norm.weight.detach()
    )


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_variants_forward_and_backward(approximate: str) -> None:
    assert_matches_torch(lambda x: F.gelu(x, approximate=approximate), 3 * _randn(5, 9))


def test_gelu_new_written_out_as_gpt2_does() -> None:
    def gelu_new(x: torch.Tensor) -> torch.Tensor:
        return (
            0.5
            * x
            * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
        )

    assert_matches_torch(gelu_new, 3 * _randn(5, 9))


def test_causal_attention_forward_and_backward() -> None:
    q, k, v = _randn(2, 2, 6, 4, seed=1), _randn(2, 2, 6, 4, seed=2), _randn(2, 2, 6, 4, seed=3)
    assert_matches_torch(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), q, k, v
    )


def test_padding_mask_attention_with_masked_fill_and_where() -> None:
    keep = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])[:, None, None, :]

    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = (q @ k.transpose(-1, -2)) / 2.0
        scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
        probs = torch.where(keep, scores.softmax(-1), torch.zeros(()))
        return probs @ v

    q, k, v = _randn(2, 2, 6, 4, seed=4), _randn(2, 2, 6, 4, seed=5), _randn(2, 2, 6, 4, seed=6)
    assert_matches_torch(attend, q, k, v)
    mask = torch.zeros(2, 1, 6, 6).masked_fill(~keep, float("-inf"))
    assert_matches_torch(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask), q, k, v
    )


def test_baddbmm_scores_forward_and_backward() -> None:
    bias = _randn(3, 5, 5, seed=7)
    assert_matches_torch(
        lambda a, b: torch.baddbmm(bias, a, b, beta=0.5, alpha=0.25),
        _randn(3, 5, 4),
        _randn(3, 4, 5, seed=8),
    )


def test_gather_and_index_select_backward_accumulate_repeats() -> None:
    index = torch.tensor([[0, 2, 2], [1, 1, 0]])
    assert_matches_torch(lambda x: torch.gather(x, 1, index), _randn(2, 4))
    assert_matches_torch(lambda x: torch.index_select(x, 0, torch.tensor([2, 0, 2])), _randn(3, 4))


def test_mask_grid_indexing_as_transformers_builds_masks() -> None:
    batch = torch.arange(2)[:, None, None, None]
    cols = torch.arange(5)[None, None, :, None]
    grid = torch.arange(10).reshape(2, 5)
    got = run_on_kernels(lambda g: [g[batch, cols]], grid)[0]
    np.testing.assert_array_equal(got, grid[batch, cols].numpy())


def test_prefix_sum_is_charged_a_row_carry_per_scanned_row() -> None:
    from wse_sim.runtime.timing import build_plan

    def plan_for(rows: int) -> list[str]:
        graph = {
            "inputs": [{"name": "x", "role": "input", "shape": [rows, 64], "dtype": "int64"}],
            "nodes": [
                {
                    "name": "n0",
                    "target": "aten.cumsum.default",
                    "args": [{"ref": "x"}, 1],
                    "kwargs": {},
                    "shape": [rows, 64],
                    "dtype": "int64",
                    "kernel": "k0",
                }
            ],
            "outputs": [{"role": "loss", "ref": "n0", "name": "loss"}],
        }
        kernels = [{"id": "k0", "rect": [0, 0, 4, 4], "flops": rows * 64, "nodes": ["n0"]}]
        plan = build_plan(graph, kernels, fp16=False, weight_streaming=False, region_shape=(4, 4))
        return [c.kind for c in plan.charges if c.kernel == "k0"]

    assert "reduce" in plan_for(8)
