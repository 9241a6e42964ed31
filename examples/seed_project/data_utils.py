"""Batches of scikit-learn's handwritten digits (1,797 images of 8x8 pixels, 10 classes), the
data set the package ships: SAM calls make_batch(step, batch_size) in the data sandbox."""

import numpy as np

_DIGITS = None


def digits():
    """(images float32 [N, 1, 8, 8] in [0, 1], labels int64 [N]), loaded once."""
    global _DIGITS
    if _DIGITS is None:
        from sklearn.datasets import load_digits

        found = load_digits()
        images = (found.images / 16.0).astype(np.float32)[:, None]
        _DIGITS = images, found.target.astype(np.int64)
    return _DIGITS


def make_batch(step: int, batch_size: int):
    """Batch `step`: the next batch_size digits in order, wrapping around (so a resumed job
    sees the same batches)."""
    images, labels = digits()
    rows = (step * batch_size + np.arange(batch_size)) % len(images)
    return images[rows], labels[rows]
