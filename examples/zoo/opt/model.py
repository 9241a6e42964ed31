"""OPT (Hugging Face transformers OPTForCausalLM), tiny config, random init.

Learned positions offset by 2, pre-LayerNorm decoder blocks with ReLU MLPs, causal attention.
"""

import torch
from torch import nn
from transformers import OPTConfig, OPTForCausalLM


class Net(nn.Module):
    def __init__(self, vocab_size: int = 64, context: int = 16, width: int = 32):
        super().__init__()
        config = OPTConfig(
            vocab_size=vocab_size,
            hidden_size=width,
            num_hidden_layers=2,
            ffn_dim=2 * width,
            num_attention_heads=2,
            max_position_embeddings=context,
            word_embed_proj_dim=width,
            dropout=0.0,
            attention_dropout=0.0,
            activation_dropout=0.0,
            layerdrop=0.0,
            pad_token_id=1,
            use_cache=False,
        )
        self.model = OPTForCausalLM(config)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids).logits
