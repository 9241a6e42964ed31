"""LLaMA (Hugging Face transformers LlamaForCausalLM), tiny config, random init.

RMSNorm, rotary position embeddings, a SiLU-gated MLP and grouped-query attention
(4 query heads sharing 2 key/value heads).
"""

import torch
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM


class Net(nn.Module):
    def __init__(self, vocab_size: int = 64, context: int = 16, width: int = 32, layers: int = 2):
        super().__init__()
        config = LlamaConfig(
            vocab_size=vocab_size,
            hidden_size=width,
            intermediate_size=2 * width,
            num_hidden_layers=layers,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=context,
            attention_dropout=0.0,
            use_cache=False,
        )
        self.model = LlamaForCausalLM(config)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids).logits
