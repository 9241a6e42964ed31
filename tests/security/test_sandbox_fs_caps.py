"""Issue 29: every writable place of a sandbox is capped. A job wrote 3 GiB under /sam (the
root of bwrap's file system, a tmpfs without a cap) and 3 GiB into /dev/shm, the host's shared
memory. Now the root and /dev are read-only (EROFS), /tmp is a tmpfs of tmp_bytes and /dev/shm
one of shm_bytes (ENOSPC past them), and the job's error says so."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from compiler import compile_job
from compiler.errors import ModelError
from compiler.sandbox import SandboxLimits, stream_batches
from tests.compiler.conftest import file_spec, linear_net, user_model_spec

MiB = 1 << 20
LIMITS = SandboxLimits(
    cpu_seconds=60, memory_bytes=2 * 1024**3, wall_seconds=120.0, tmp_bytes=32 * MiB
)

PROBE = """import errno, json, os

def fill(path):
    chunk = b"x" * (1 << 20)
    written = 0
    try:
        with open(path, "wb") as handle:
            for _ in range(4096):
                handle.write(chunk)
                handle.flush()
                written += len(chunk)
    except OSError as exc:
        return [errno.errorcode.get(exc.errno, str(exc.errno)), written]
    return ["no error", written]

def make_batch(step, batch_size):
    found = {}
    for path in ("/sam/big", "/big", "/dev/big", "/usr/lib/big", "/job/big"):
        found[path] = fill(path)
    found["/tmp"] = fill("/tmp/big")
    found["/dev/shm"] = fill("/dev/shm/big")
    raise ValueError("REPORT" + json.dumps(found) + "REPORT")
"""

UNCAUGHT = """def make_batch(step, batch_size):
    with open("/tmp/scratch.bin", "wb") as handle:
        for _ in range(1024):
            handle.write(b"x" * (1 << 20))
"""


def _error(source: str) -> ModelError:
    batches = stream_batches(file_spec(), {"data.py": source}, 0, None, LIMITS)
    with pytest.raises(ModelError) as info:
        next(batches)
    batches.close()
    return info.value


def test_the_root_and_dev_are_read_only_and_tmp_and_shm_are_capped() -> None:
    shm_before = shutil.disk_usage("/dev/shm").used
    message = _error(PROBE).message
    found = json.loads(message.split("REPORT")[1])
    for path in ("/sam/big", "/big", "/dev/big", "/usr/lib/big", "/job/big"):
        assert found[path] == ["EROFS", 0], (path, found[path])
    code, written = found["/tmp"]
    assert code == "ENOSPC" and 30 * MiB <= written <= 32 * MiB, found["/tmp"]
    code, written = found["/dev/shm"]
    assert code == "ENOSPC" and 62 * MiB <= written <= 64 * MiB, found["/dev/shm"]
    # the host's shared memory holds nothing of it once the task is over
    assert shutil.disk_usage("/dev/shm").used <= shm_before + 8 * MiB


def test_a_job_that_fills_tmp_fails_with_a_clear_error() -> None:
    error = _error(UNCAUGHT)
    assert error.kind == "model_error"
    assert "No space left on device" in error.message, error.message
    assert "only /tmp and /dev/shm are writable" in error.message


def test_a_model_file_writing_under_sam_fails_its_compile_with_erofs(tmp_path: Path) -> None:
    """The compile sandbox is built the same way: issue 29's 3 GiB under /sam now stops at the
    first byte."""
    model = linear_net("        return self.fc(x)\n") + (
        '\n\nwith open("/sam/fill.bin", "wb") as handle:\n    handle.write(b"x")\n'
    )
    with pytest.raises(ModelError) as info:
        compile_job(user_model_spec(), {"model.py": model}, region=(8, 8), cache_dir=tmp_path)
    assert "Read-only file system" in info.value.message, info.value.message
    assert "only /tmp and /dev/shm are writable" in info.value.message
