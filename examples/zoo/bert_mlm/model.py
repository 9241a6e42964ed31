"""BERT for masked language modelling (Hugging Face transformers), tiny config, random init.

The model computes its own loss from `labels` (train.loss: model): token, position and segment
embeddings, post-LayerNorm encoder blocks with exact (erf) GELU, and the MLM prediction head.
"""

import torch
from torch import nn
from transformers import BertConfig, BertForMaskedLM


class Net(nn.Module):
    def __init__(self, vocab_size: int = 64, context: int = 16, width: int = 32, layers: int = 2):
        super().__init__()
        config = BertConfig(
            vocab_size=vocab_size,
            hidden_size=width,
            num_hidden_layers=layers,
            num_attention_heads=2,
            intermediate_size=2 * width,
            max_position_embeddings=context,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        )
        self.model = BertForMaskedLM(config)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, labels=labels).loss
