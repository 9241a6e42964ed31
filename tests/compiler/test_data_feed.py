"""make_batch over real files: data sets bound read-only at /datasets/NAME in the data sandbox,
read with compiler.feed (memmapped .npy, CSV, a folder of images)."""

from __future__ import annotations

from itertools import islice
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from compiler.data import iter_batches
from compiler.errors import ModelError
from compiler.feed import CsvFeed, ImageFolderFeed, NpyFeed
from tests.compiler.conftest import file_spec

NPY_BATCH = """from compiler.feed import NpyFeed

FEED = None


def make_batch(step, batch_size):
    global FEED
    if FEED is None:
        FEED = NpyFeed("/datasets/digits/x.npy", "/datasets/digits/y.npy")
    return FEED.batch(step, batch_size)
"""

WRITE_BATCH = """import numpy as np


def make_batch(step, batch_size):
    open("/datasets/digits/x.npy", "wb").write(b"overwritten")
    return np.zeros((batch_size, 4), np.float32), np.zeros(batch_size, np.int64)
"""


def _npy_dataset(root: Path, rows: int = 10) -> Path:
    root.mkdir(parents=True)
    np.save(root / "x.npy", np.arange(rows * 4, dtype=np.float32).reshape(rows, 4))
    np.save(root / "y.npy", np.arange(rows, dtype=np.int64) % 3)
    return root


def test_make_batch_reads_a_memmapped_dataset_at_its_mount(tmp_path: Path) -> None:
    root = _npy_dataset(tmp_path / "ds")
    spec = file_spec(batch_size=4, task="classification", input_shape=[4], num_classes=3)
    batches = iter_batches(
        spec, {"data.py": NPY_BATCH}, start_step=1, workdir=tmp_path, datasets={"digits": root}
    )
    try:
        got = list(islice(batches, 3))
    finally:
        batches.close()  # type: ignore[attr-defined]
    # step 1 = rows 4..7, step 2 wraps: rows 8, 9, 0, 1
    np.testing.assert_array_equal(got[0][1], [1, 2, 0, 1])
    np.testing.assert_array_equal(got[1][1], [2, 0, 0, 1])
    assert got[0][0][0, 0] == 16.0


def test_the_dataset_is_read_only_inside_the_sandbox(tmp_path: Path) -> None:
    root = _npy_dataset(tmp_path / "ds")
    before = (root / "x.npy").read_bytes()
    spec = file_spec(batch_size=4, task="classification", input_shape=[4], num_classes=3)
    batches = iter_batches(
        spec, {"data.py": WRITE_BATCH}, workdir=tmp_path, datasets={"digits": root}
    )
    with pytest.raises(ModelError, match="Read-only file system|Permission denied"):
        next(batches)
    assert (root / "x.npy").read_bytes() == before


def test_a_job_without_the_dataset_does_not_see_it(tmp_path: Path) -> None:
    _npy_dataset(tmp_path / "ds")
    spec = file_spec(batch_size=4, task="classification", input_shape=[4], num_classes=3)
    batches = iter_batches(spec, {"data.py": NPY_BATCH}, workdir=tmp_path)
    with pytest.raises(ModelError, match="No such file"):
        next(batches)


def test_csv_feed_splits_the_target_column(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    path.write_text("a,b,label\n1,2,0\n3,4,1\n5,6,2\n")
    feed = CsvFeed(path, target_column="label")
    inputs, targets = feed.batch(1, 2)  # rows 2, 0
    np.testing.assert_array_equal(inputs, [[5, 6], [1, 2]])
    assert targets.tolist() == [2, 0] and targets.dtype == np.int64


def test_image_folder_feed_labels_by_sorted_class_folder(tmp_path: Path) -> None:
    for label, shade in (("cat", 0), ("dog", 255)):
        (tmp_path / label).mkdir()
        Image.new("L", (8, 8), shade).save(tmp_path / label / "a.png")
    feed = ImageFolderFeed(tmp_path, size=(4, 4))
    inputs, targets = feed.batch(0, 2)
    assert inputs.shape == (2, 1, 4, 4) and targets.tolist() == [0, 1]
    assert inputs[0].max() == 0.0 and inputs[1].min() == 1.0


def test_npy_feed_refuses_mismatched_files(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.zeros((4, 2), np.float32))
    np.save(tmp_path / "y.npy", np.zeros(3, np.int64))
    with pytest.raises(ValueError, match="has 4 rows but"):
        NpyFeed(tmp_path / "x.npy", tmp_path / "y.npy")


def test_a_feed_slower_than_the_wafer_reports_by_how_much() -> None:
    from sam_worker.prefetch import InputTimeline

    timeline = InputTimeline(depth=2, parallel=True)
    for _ in range(10):
        timeline.step(load_s=0.03, step_s=0.01)  # reading takes 3x the wafer's step
    summary = timeline.summary()
    assert summary["bound"] == "input-bound"
    assert summary["input_slowdown"] == pytest.approx(3.0, rel=0.1)
    fast = InputTimeline(depth=2, parallel=True)
    for _ in range(10):
        fast.step(load_s=0.001, step_s=0.01)
    assert fast.summary()["bound"] == "compute-bound"
    assert fast.summary()["input_slowdown"] == pytest.approx(1.0, abs=0.02)
