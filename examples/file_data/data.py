"""A file data source: SAM calls make_batch(step, batch_size) for step = 0, 1, 2, ... in a
sandboxed process. Return (inputs, targets) as numpy arrays or torch tensors."""

import numpy as np

FEATURES = 8


def make_batch(step: int, batch_size: int):
    rng = np.random.default_rng(1000 + step)  # deterministic per step, so restarts resume exactly
    x = rng.uniform(-1.0, 1.0, size=(batch_size, FEATURES)).astype(np.float32)
    # Regression target: a fixed smooth function of the inputs.
    y = (np.sin(x[:, :1] * 3.0) + 0.5 * x[:, 1:2] * x[:, 2:3]).astype(np.float32)
    return x, y
