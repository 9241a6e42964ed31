"""Batch frames on the pipe from a sandboxed make_batch: 4-byte header length, a JSON header
{"dtype", "shape"}, then the raw array bytes.

The writer runs inside the sandbox; the reader runs in the wafer worker and trusts nothing: it
bounds the header and the array size before allocating, checks the declared dtype and shape
against the job spec, and waits with a deadline while polling `should_stop` (cancel, time_limit),
so a make_batch that sends a header and then nothing cannot hold its region.
"""

from __future__ import annotations

import json
import math
import os
import select
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from compiler.errors import ModelError

MAX_HEADER_BYTES = 4096
DTYPES = {"<f4": np.float32, "<i8": np.int64}
_POLL_S = 0.25


class Stopped(Exception):
    """The consumer asked to stop (cancel, preemption, time_limit) while waiting for a frame."""


def write_array(stream: Any, array: np.ndarray) -> None:
    """Frame one array on a byte stream (the sandbox side)."""
    header = json.dumps({"dtype": array.dtype.str, "shape": list(array.shape)}).encode()
    stream.write(len(header).to_bytes(4, "little") + header)
    stream.write(np.ascontiguousarray(array).tobytes())


class FrameReader:
    """Reads validated frames from a pipe's file descriptor (the trusted side)."""

    def __init__(
        self, fd: int, max_bytes: int, timeout_s: float, should_stop: Callable[[], bool]
    ) -> None:
        self.fd, self.max_bytes, self.timeout_s = fd, max_bytes, timeout_s
        self.should_stop = should_stop
        self.deadline = 0.0

    def read(self, what: str, expect: Callable[[tuple[int, ...]], str | None]) -> np.ndarray:
        """One array; `expect(shape)` returns a complaint when the shape breaks the spec."""
        if not self.deadline:
            self.deadline = time.monotonic() + self.timeout_s
        size = int.from_bytes(self._read(4), "little")
        if not 0 < size <= MAX_HEADER_BYTES:
            raise ModelError(f"make_batch sent a malformed frame ({what} header of {size} bytes)")
        dtype, shape = _parse_header(bytes(self._read(size)), what)
        complaint = expect(shape)
        if complaint:
            raise ModelError(f"make_batch returned {what} of shape {list(shape)}: {complaint}")
        nbytes = math.prod(shape) * np.dtype(dtype).itemsize
        if nbytes > self.max_bytes:
            raise ModelError(
                f"make_batch's {what} would take {nbytes} bytes, more than the "
                f"{self.max_bytes} a batch may have"
            )
        data = self._read(nbytes)
        return np.frombuffer(data, dtype=dtype).reshape(shape)

    def batch_done(self) -> None:
        """The next batch gets a fresh deadline."""
        self.deadline = 0.0

    def _read(self, size: int) -> bytearray:
        buffer = bytearray(size)
        view, got = memoryview(buffer), 0
        while got < size:
            if self.should_stop():
                raise Stopped()
            if time.monotonic() > self.deadline:
                raise ModelError(
                    f"make_batch produced no batch within {self.timeout_s:g} s; "
                    "look for a blocking call in the data file"
                )
            ready, _, _ = select.select([self.fd], [], [], _POLL_S)
            if not ready:
                continue
            chunk = os.read(self.fd, min(size - got, 1 << 20))
            if not chunk:
                raise EOFError("batch stream ended")
            view[got : got + len(chunk)] = chunk
            got += len(chunk)
        return buffer


def _parse_header(raw: bytes, what: str) -> tuple[Any, tuple[int, ...]]:
    try:
        header = json.loads(raw)
        dtype = DTYPES[header["dtype"]]
        shape = tuple(header["shape"])
    except (ValueError, KeyError, TypeError):
        raise ModelError(
            f"make_batch sent a malformed {what} header; return float or int arrays"
        ) from None
    if len(shape) > 8 or not all(isinstance(d, int) and 0 <= d < 2**31 for d in shape):
        raise ModelError(f"make_batch sent {what} with an invalid shape {list(shape)[:9]}")
    return dtype, shape


def spec_checks(
    spec: dict[str, Any],
) -> tuple[Callable[[tuple[int, ...]], str | None], Callable[[tuple[int, ...]], str | None]]:
    """Shape checks for (inputs, targets) from the spec's batch_size and input_shape."""
    data = spec["data"]
    batch = int(data["batch_size"])
    input_shape = tuple(int(d) for d in data.get("input_shape") or ()) or None

    def inputs(shape: tuple[int, ...]) -> str | None:
        if not shape or shape[0] != batch:
            return f"the first dimension must be the batch size {batch}"
        if input_shape is not None and shape[1:] != input_shape:
            return f"data.input_shape says {list(input_shape)} per example"
        return None

    def targets(shape: tuple[int, ...]) -> str | None:
        if not shape or shape[0] != batch:
            return f"the first dimension must be the batch size {batch}"
        return None

    return inputs, targets


def check_target_values(spec: dict[str, Any], targets: np.ndarray) -> None:
    """Class labels must lie in [0, num_classes) when the spec names num_classes."""
    data = spec["data"]
    classes = data.get("num_classes")
    if data.get("task") != "classification" or not classes or targets.dtype != np.int64:
        return
    if targets.size and (targets.min() < 0 or targets.max() >= int(classes)):
        raise ModelError(
            f"make_batch returned class labels outside [0, {classes}) "
            f"(min {targets.min()}, max {targets.max()})"
        )
