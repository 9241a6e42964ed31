"""scikit-learn's handwritten digits (8x8 pixels, 10 classes) as a map-style torch Dataset."""

import numpy as np
import torch
from torch.utils.data import Dataset


class DigitsDataset(Dataset):
    """The first `limit` digits: (image float32 [1, 8, 8] in [0, 1], label int64)."""

    def __init__(self, limit: int = 512):
        from sklearn.datasets import load_digits

        found = load_digits()
        self.images = torch.from_numpy((found.images[:limit] / 16.0).astype(np.float32)[:, None])
        self.labels = torch.from_numpy(found.target[:limit].astype(np.int64))

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        return self.images[index], self.labels[index]
