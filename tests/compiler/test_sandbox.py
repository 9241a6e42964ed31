"""User code that raises, loops, exhausts memory or reaches for the network fails its job with
model_error, and the calling process survives."""

from __future__ import annotations

import pytest

from compiler.errors import ModelError
from compiler.sandbox import SandboxLimits, run_trace
from tests.compiler.conftest import user_model_spec

TIGHT = SandboxLimits(cpu_seconds=40, memory_bytes=3 * 1024**3, wall_seconds=90.0)

CASES = {
    "raises": ("import torch\nraise ValueError('bad hidden size')\n", TIGHT, "ValueError"),
    "loops": (
        "while True:\n    pass\n",
        SandboxLimits(cpu_seconds=2, wall_seconds=60.0),
        "CPU seconds",
    ),
    "sleeps": (
        "import time\ntime.sleep(600)\n",
        SandboxLimits(cpu_seconds=8, wall_seconds=3.0),
        "wall time",
    ),
    "eats_memory": (
        "blocks = []\nwhile True:\n    blocks.append(bytearray(10**8))\n",
        SandboxLimits(cpu_seconds=60, memory_bytes=1200 * 1024**2, wall_seconds=90.0),
        "ran out of memory",
    ),
    "network": (
        "import socket\nsocket.create_connection(('10.1.2.3', 80), timeout=2)\n",
        TIGHT,
        "Network is unreachable",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_model_code_is_a_model_error(case: str) -> None:
    source, limits, expected = CASES[case]
    with pytest.raises(ModelError) as info:
        run_trace(user_model_spec(), {"model.py": source}, limits)
    assert info.value.kind == "model_error"
    assert expected in info.value.message
