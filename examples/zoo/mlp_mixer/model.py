"""timm's MlpMixer (the Mixer-S/16 block design) at 32 x 32 pixels, random init.

Built with timm's own MlpMixer constructor: `mixer_s16_224` fixes patch size, depth and width,
so the zoo keeps S/16's token/channel MLP ratios (0.5, 4) at a width and depth a CPU test can
afford. Token-mixing and channel-mixing MLPs with GELU, LayerNorm, global average pooling.
"""

import torch
from timm.models.mlp_mixer import MlpMixer
from torch import nn


class Net(nn.Module):
    def __init__(self, num_classes: int = 10, num_blocks: int = 2, embed_dim: int = 64):
        super().__init__()
        self.model = MlpMixer(
            num_classes=num_classes,
            img_size=32,
            patch_size=8,
            num_blocks=num_blocks,
            embed_dim=embed_dim,
            mlp_ratio=(0.5, 4.0),
            drop_rate=0.0,
            proj_drop_rate=0.0,
            drop_path_rate=0.0,
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.model(images)
