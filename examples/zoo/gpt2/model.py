"""GPT-2 (Hugging Face transformers) from a tiny config: random init, nothing downloaded.

Learned position embeddings, pre-LayerNorm blocks, Conv1D projections, GELU (tanh form) and
causal attention; the LM head is tied to the token embedding.
"""

import torch
from torch import nn
from transformers import GPT2Config, GPT2LMHeadModel


class Net(nn.Module):
    def __init__(self, vocab_size: int = 64, context: int = 16, width: int = 32, layers: int = 2):
        super().__init__()
        config = GPT2Config(
            vocab_size=vocab_size,
            n_positions=context,
            n_embd=width,
            n_layer=layers,
            n_head=2,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            bos_token_id=0,  # GPT-2's own 50256 lies outside this tiny vocabulary
            eos_token_id=0,
            use_cache=False,
        )
        self.model = GPT2LMHeadModel(config)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids).logits
