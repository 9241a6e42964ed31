"""Mistral (Hugging Face transformers MistralForCausalLM), tiny config, random init.

Like LLaMA (RMSNorm, rotary embeddings, SiLU-gated MLP, grouped-query attention) plus a
sliding attention window shorter than the context.
"""

import torch
from torch import nn
from transformers import MistralConfig, MistralForCausalLM


class Net(nn.Module):
    def __init__(self, vocab_size: int = 64, context: int = 16, width: int = 32):
        super().__init__()
        config = MistralConfig(
            vocab_size=vocab_size,
            hidden_size=width,
            intermediate_size=2 * width,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=context,
            sliding_window=8,
            attention_dropout=0.0,
            use_cache=False,
        )
        self.model = MistralForCausalLM(config)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids).logits
