"""T5 encoder-decoder (Hugging Face transformers), tiny config, random init.

The model computes its own loss (train.loss: model): the decoder input is the labels shifted
right, attention uses T5's bucketed relative position bias, norms are T5's RMS LayerNorm.
"""

import torch
from torch import nn
from transformers import T5Config, T5ForConditionalGeneration


class Net(nn.Module):
    def __init__(self, vocab_size: int = 64, width: int = 32, layers: int = 2):
        super().__init__()
        config = T5Config(
            vocab_size=vocab_size,
            d_model=width,
            d_kv=16,
            d_ff=2 * width,
            num_layers=layers,
            num_heads=2,
            relative_attention_num_buckets=8,
            relative_attention_max_distance=16,
            dropout_rate=0.0,
            decoder_start_token_id=0,
            pad_token_id=0,
            use_cache=False,
        )
        self.model = T5ForConditionalGeneration(config)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, labels=labels).loss
