"""make_batch streams: a sandboxed child writes frames on a pipe, the wafer worker validates."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from compiler.errors import ModelError
from compiler.sandbox import frames, launcher, options
from compiler.sandbox.jobdir import child_argv, dataset_binds, mounts
from compiler.sandbox.limits import DATA_LIMITS, SandboxLimits
from compiler.sandbox.runner import output_error, prepare, read_result


def max_frame_bytes() -> int:
    """The largest array a make_batch may send (the sandbox.max_frame_bytes setting)."""
    return options.current().max_frame_bytes


def stream_batches(
    spec: dict[str, Any],
    files: dict[str, str],
    start_step: int,
    workdir: Path | None = None,
    limits: SandboxLimits | None = None,
    should_stop: Callable[[], bool] | None = None,
    datasets: dict[str, Path] | None = None,
    project: Path | None = None,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """make_batch(step, batch_size) for step = start_step, ... from a sandboxed child. The
    pipe's buffer bounds how far it runs ahead. The stream ends (StopIteration) as soon as
    `should_stop()` is true, even while waiting for a frame; closing it kills the sandbox and
    every process make_batch started. `datasets` ({name: host path}) are bound read-only at
    /datasets/NAME: only this sandbox sees them (never the compile's). The job's `project`
    folder is bound read-only at /job/src."""
    limits = limits or DATA_LIMITS
    payload = {"spec": spec, "start_step": int(start_step)}
    scratch = prepare("batches", payload, files, workdir)
    read_fd, write_fd = os.pipe()
    running = None
    guard = None
    try:
        with open(scratch / "stderr.txt", "wb") as stderr:
            binds = mounts(scratch, project) + dataset_binds(datasets or {})
            running = launcher.start(child_argv(), binds, limits, write_fd, stderr)
        os.close(write_fd)
        write_fd = -1
        guard = launcher.OutputGuard(running, scratch / "out", limits)
        reader = frames.FrameReader(
            read_fd, max_frame_bytes(), limits.wall_seconds, should_stop or (lambda: False)
        )
        yield from _frames(reader, spec, running, guard, scratch, limits)
    finally:
        if write_fd >= 0:
            os.close(write_fd)
        os.close(read_fd)
        if guard is not None:
            guard.stop()
        if running is not None:
            running.close()
        shutil.rmtree(scratch, ignore_errors=True)


def _frames(
    reader: frames.FrameReader,
    spec: dict[str, Any],
    running: launcher.Running,
    guard: launcher.OutputGuard,
    scratch: Path,
    limits: SandboxLimits,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    check_inputs, check_targets = frames.spec_checks(spec)
    while True:
        try:
            inputs = reader.read("inputs", check_inputs)
            targets = reader.read("targets", check_targets)
        except frames.Stopped:
            return
        except EOFError:
            try:  # the child is exiting; let it finish writing its result, then say why
                running.wait(10)
            except subprocess.TimeoutExpired:
                pass
            problem = guard.stop()
            running.kill()
            if problem is not None:
                raise output_error(problem, limits) from None
            read_result(scratch, running.proc.wait(), limits, running.was_built())
            raise ModelError("make_batch stopped producing batches") from None
        frames.check_target_values(spec, targets)
        reader.batch_done()
        yield inputs, targets
