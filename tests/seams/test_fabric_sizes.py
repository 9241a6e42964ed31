"""The cluster file's wafer sizes come from the simulator's architecture table (one source)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sam_server.config import WaferConfig
from wse_sim.arch import get_arch


@pytest.mark.parametrize("arch", ["wse2", "wse3"])
def test_a_wafer_without_a_size_gets_the_whole_fabric_of_its_arch(arch: str) -> None:
    wafer = WaferConfig(id="w0", arch=arch)
    full = get_arch(arch)
    assert (wafer.rows, wafer.cols) == (full.rows, full.cols)
    assert (WaferConfig(id="w1").rows, WaferConfig(id="w1").cols) == (750, 994)  # wse2 default


def test_a_wafer_larger_than_its_fabric_is_refused_with_both_sizes() -> None:
    with pytest.raises(ValidationError, match=r"wafer big: 751x994 exceeds the wse2 fabric"):
        WaferConfig(id="big", rows=751, cols=994)
    assert WaferConfig(id="ok", arch="wse3", rows=755, cols=1170).cols == 1170
