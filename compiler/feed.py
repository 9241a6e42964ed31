"""Readers a make_batch uses to feed real files the way a wafer's host does (docs/data.md).

Each reader opens its files once (inside the data sandbox, typically under /datasets/NAME) and
answers `batch(step, batch_size) -> (inputs, targets)`, a pure function of the step: batch k is
rows [k*B, (k+1)*B) of the data set, wrapping around at its end, so a resumed job sees the same
batches. The worker's loader runs make_batch ahead of the wafer (data_loading.prefetch_depth),
and the host time it takes is charged to the job (the report's `input` section).

- `NpyFeed(inputs, targets)`: two .npy files, memory-mapped (only the rows a batch needs are read);
- `CsvFeed(path, target_column=-1)`: a numeric CSV with a header row, parsed once;
- `ImageFolderFeed(root, size=(H, W))`: root/<class>/<image>, classes in sorted order; images
  decoded per batch with Pillow, as float32 [C, H, W] in [0, 1].
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp")


def _rows(step: int, batch_size: int, count: int) -> np.ndarray | slice:
    """Row indices of batch `step`: a slice while it does not wrap (a memmap reads it in one go)."""
    if count <= 0:
        raise ValueError("the data set has no rows")
    start = (step * batch_size) % count
    if start + batch_size <= count:
        return slice(start, start + batch_size)
    return (start + np.arange(batch_size)) % count


class NpyFeed:
    """Rows of memory-mapped .npy files: inputs [N, ...] and targets [N, ...] (or none)."""

    def __init__(self, inputs: str | Path, targets: str | Path | None = None) -> None:
        self.inputs = np.load(inputs, mmap_mode="r", allow_pickle=False)
        self.targets = (
            np.load(targets, mmap_mode="r", allow_pickle=False) if targets is not None else None
        )
        if self.targets is not None and len(self.targets) != len(self.inputs):
            raise ValueError(
                f"{inputs} has {len(self.inputs)} rows but {targets} has {len(self.targets)}"
            )

    def __len__(self) -> int:
        return len(self.inputs)

    def batch(self, step: int, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        rows = _rows(step, batch_size, len(self.inputs))
        inputs = np.asarray(self.inputs[rows])
        if self.targets is None:
            return inputs, np.zeros(batch_size, dtype=np.int64)
        return inputs, np.asarray(self.targets[rows])


class CsvFeed:
    """A numeric CSV (a header row, then one sample a row); one column is the target."""

    def __init__(
        self, path: str | Path, target_column: int | str = -1, *, integer_targets: bool = True
    ) -> None:
        with open(path, encoding="utf-8") as handle:
            header = handle.readline().strip().split(",")
            table = np.loadtxt(handle, delimiter=",", dtype=np.float64, ndmin=2)
        column = header.index(target_column) if isinstance(target_column, str) else target_column
        column %= table.shape[1]
        self.inputs = np.delete(table, column, axis=1).astype(np.float32)
        targets = table[:, column]
        self.targets = targets.astype(np.int64) if integer_targets else targets.astype(np.float32)

    def __len__(self) -> int:
        return len(self.inputs)

    def batch(self, step: int, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        rows = _rows(step, batch_size, len(self.inputs))
        return self.inputs[rows], self.targets[rows]


class ImageFolderFeed:
    """Images in root/<class name>/; the target is the class's index in sorted order."""

    def __init__(self, root: str | Path, size: tuple[int, int] = (28, 28), mode: str = "L") -> None:
        root = Path(root)
        self.classes = sorted(p.name for p in root.iterdir() if p.is_dir())
        self.samples: list[tuple[Path, int]] = [
            (image, label)
            for label, name in enumerate(self.classes)
            for image in sorted((root / name).iterdir())
            if image.suffix.lower() in _IMAGE_SUFFIXES
        ]
        if not self.samples:
            raise ValueError(f"no images under {root}/<class>/")
        self.size = size
        self.mode = mode

    def __len__(self) -> int:
        return len(self.samples)

    def _load(self, path: Path) -> np.ndarray:
        from PIL import Image

        with Image.open(path) as image:
            pixels = image.convert(self.mode).resize((self.size[1], self.size[0]))
            array: np.ndarray = np.asarray(pixels, dtype=np.float32) / 255.0
        return array[None] if array.ndim == 2 else np.transpose(array, (2, 0, 1))

    def batch(self, step: int, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        rows = np.arange(len(self.samples))[_rows(step, batch_size, len(self.samples))]
        picked = [self.samples[int(i)] for i in rows]
        inputs = np.stack([self._load(path) for path, _ in picked])
        return inputs, np.array([label for _, label in picked], dtype=np.int64)
