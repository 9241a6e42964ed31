"""GPT-Neo (Hugging Face transformers), tiny config, random init.

Alternating global and local (sliding-window) causal attention layers, unscaled attention
scores, GELU (tanh form) MLPs.
"""

import torch
from torch import nn
from transformers import GPTNeoConfig, GPTNeoForCausalLM


class Net(nn.Module):
    def __init__(self, vocab_size: int = 64, context: int = 16, width: int = 32):
        super().__init__()
        config = GPTNeoConfig(
            vocab_size=vocab_size,
            max_position_embeddings=context,
            hidden_size=width,
            num_layers=2,
            attention_types=[[["global", "local"], 1]],
            num_heads=2,
            window_size=4,
            intermediate_size=2 * width,
            embed_dropout=0.0,
            attention_dropout=0.0,
            resid_dropout=0.0,
            use_cache=False,
        )
        self.model = GPTNeoForCausalLM(config)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids).logits
