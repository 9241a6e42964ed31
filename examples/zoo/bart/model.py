"""BART encoder-decoder (Hugging Face transformers), tiny config, random init.

The model computes its own loss (train.loss: model) and builds the decoder input by shifting
the labels right; learned positions, post-LayerNorm blocks, GELU, cross-attention.
"""

import torch
from torch import nn
from transformers import BartConfig, BartForConditionalGeneration


class Net(nn.Module):
    def __init__(self, vocab_size: int = 64, context: int = 16, width: int = 32):
        super().__init__()
        config = BartConfig(
            vocab_size=vocab_size,
            max_position_embeddings=context,
            d_model=width,
            encoder_layers=1,
            decoder_layers=1,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=2 * width,
            decoder_ffn_dim=2 * width,
            dropout=0.0,
            attention_dropout=0.0,
            activation_dropout=0.0,
            encoder_layerdrop=0.0,
            decoder_layerdrop=0.0,
            pad_token_id=1,
            bos_token_id=0,
            eos_token_id=2,
            decoder_start_token_id=2,
            use_cache=False,
        )
        self.model = BartForConditionalGeneration(config)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, labels=labels).loss
