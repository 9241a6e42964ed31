"""Built-in model families for demos and tests: `mlp`, `cnn` and `gpt`, ordinary nn.Modules.

Each is built as `torch.manual_seed(seed); Cls(**kwargs)` exactly like a user's class, so the
same front end traces them. Only supported operators are used.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


class MLP(nn.Module):
    """Fully connected classifier: x [B, in_features] -> logits [B, num_classes]."""

    def __init__(
        self,
        in_features: int = 784,
        hidden: int = 128,
        num_classes: int = 10,
        depth: int = 2,
        activation: str = "relu",
    ) -> None:
        super().__init__()
        sizes = [in_features] + [hidden] * (depth - 1) + [num_classes]
        self.layers = nn.ModuleList(
            nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:], strict=False)
        )
        activations: dict[str, Callable[..., torch.Tensor]] = {
            "relu": F.relu,
            "gelu": F.gelu,
            "tanh": torch.tanh,
            "sigmoid": torch.sigmoid,
        }
        self.activation = activations[activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(1)
        for layer in self.layers[:-1]:
            x = self.activation(layer(x))
        y: torch.Tensor = self.layers[-1](x)
        return y


class CNN(nn.Module):
    """Small convnet: images [B, C, H, W] -> logits [B, num_classes] (two conv+pool stages)."""

    def __init__(
        self,
        in_channels: int = 1,
        image_size: int = 28,
        channels: int = 8,
        num_classes: int = 10,
        hidden: int = 64,
    ) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, 2 * channels, 3, padding=1)
        side = image_size // 4
        self.fc1 = nn.Linear(2 * channels * side * side, hidden)
        self.fc2 = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.avg_pool2d(F.relu(self.conv2(x)), 2)
        logits: torch.Tensor = self.fc2(F.relu(self.fc1(x.flatten(1))))
        return logits


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention written with matmuls (no fused SDPA kernel)."""

    def __init__(self, d_model: int, n_heads: int, max_len: int, dropout: float) -> None:
        super().__init__()
        self.n_heads = n_heads
        # No qkv bias: the key bias has an exactly-zero true gradient (softmax is shift
        # invariant), so Adam would only amplify rounding noise in it.
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.proj = nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(dropout)
        mask = torch.tril(torch.ones(max_len, max_len, dtype=torch.bool))
        self.register_buffer("causal_mask", mask, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.n_heads, d // self.n_heads).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.n_heads))
        # a registered buffer: nn.Module's __getattr__ types it as Tensor | Module
        mask: torch.Tensor = self.causal_mask  # type: ignore[assignment]
        scores = scores.masked_fill(~mask[:t, :t], float("-inf"))
        attn = self.drop(F.softmax(scores, dim=-1))
        y = (attn @ v).transpose(1, 2).reshape(b, t, d)
        out: torch.Tensor = self.drop(self.proj(y))
        return out


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(ln(x)), then x + mlp(ln(x)) with GELU."""

    def __init__(self, d_model: int, n_heads: int, max_len: int, dropout: float) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_heads, max_len, dropout)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.out = nn.Linear(4 * d_model, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        out: torch.Tensor = x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)))))
        return out


class GPT(nn.Module):
    """Decoder-only transformer: tokens [B, T] int64 -> logits [B, T, vocab_size]."""

    def __init__(
        self,
        vocab_size: int = 64,
        max_len: int = 32,
        d_model: int = 32,
        n_heads: int = 2,
        n_layers: int = 2,
        dropout: float = 0.0,
        tie_weights: bool = True,
    ) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(
            Block(d_model, n_heads, max_len, dropout) for _ in range(n_layers)
        )
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        if tie_weights:
            self.head.weight = self.tok.weight

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits: torch.Tensor = self.head(self.ln_f(x))
        return logits


BUILTIN_MODELS: dict[str, type[nn.Module]] = {"mlp": MLP, "cnn": CNN, "gpt": GPT}


def builtin_kwargs(spec: dict[str, Any]) -> dict[str, object]:
    """Net(**kwargs) for a built-in: the data spec's shapes fill in what the user left out."""
    name = spec["model"]["builtin"]
    data = spec.get("data") or {}
    shape = list(data.get("input_shape") or [])
    classes = data.get("num_classes")
    kwargs = dict(spec["model"].get("kwargs") or {})
    if name == "mlp" and shape:
        kwargs.setdefault("in_features", int(math.prod(shape)))
    if name == "cnn" and len(shape) == 3:
        kwargs.setdefault("in_channels", shape[0])
        kwargs.setdefault("image_size", shape[1])
    if name == "gpt" and shape:
        kwargs.setdefault("max_len", shape[0])
    if classes:
        kwargs.setdefault("vocab_size" if name == "gpt" else "num_classes", int(classes))
    if name != "gpt" and data.get("task") == "regression":
        kwargs.setdefault("num_classes", int(classes or 1))
    return kwargs
