"""DistilBERT for masked language modelling (Hugging Face transformers), tiny config.

Sinusoidal-free learned positions, post-LayerNorm blocks with GELU, a vocabulary projector tied
to the embedding; the network returns logits and SAM applies cross entropy.
"""

import torch
from torch import nn
from transformers import DistilBertConfig, DistilBertForMaskedLM


class Net(nn.Module):
    def __init__(self, vocab_size: int = 64, context: int = 16, width: int = 32):
        super().__init__()
        config = DistilBertConfig(
            vocab_size=vocab_size,
            max_position_embeddings=context,
            dim=width,
            n_layers=2,
            n_heads=2,
            hidden_dim=2 * width,
            dropout=0.0,
            attention_dropout=0.0,
            qa_dropout=0.0,
            seq_classif_dropout=0.0,
        )
        self.model = DistilBertForMaskedLM(config)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids).logits
