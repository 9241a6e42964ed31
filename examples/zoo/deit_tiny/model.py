"""timm's deit_tiny_distilled_patch16_224 at 32 x 32 pixels with 8 x 8 patches, random init.

DeiT with its distillation token: a second token and head beside the class token; in training
mode (without distilled_training) the model averages the two heads' logits.
"""

import timm
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, num_classes: int = 10, depth: int = 2):
        super().__init__()
        self.model = timm.create_model(
            "deit_tiny_distilled_patch16_224",
            pretrained=False,
            img_size=32,
            patch_size=8,
            depth=depth,
            num_classes=num_classes,
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.model(images)
