"""Qwen2 (Hugging Face transformers Qwen2ForCausalLM), tiny config, random init.

LLaMA-style blocks whose query/key/value projections carry biases; tied embeddings.
"""

import torch
from torch import nn
from transformers import Qwen2Config, Qwen2ForCausalLM


class Net(nn.Module):
    def __init__(self, vocab_size: int = 64, context: int = 16, width: int = 32):
        super().__init__()
        config = Qwen2Config(
            vocab_size=vocab_size,
            hidden_size=width,
            intermediate_size=2 * width,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=context,
            tie_word_embeddings=True,
            attention_dropout=0.0,
            use_cache=False,
        )
        self.model = Qwen2ForCausalLM(config)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids).logits
