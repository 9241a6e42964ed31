"""numpy and torch backends agree: integer clocks exactly, float data closely."""

from __future__ import annotations

import numpy as np
import pytest

import wse_sim as ws
from wse_sim import kernels as K

torch = pytest.importorskip("torch")


def run_kernels(backend):
    rng = np.random.default_rng(11)
    wafer = ws.Wafer(ws.get_arch("wse2", rows=20, cols=20), backend=backend)
    out = {}
    out["summa"] = K.summa(
        wafer.allocate("summa", 0, 0, 3, 3),
        rng.standard_normal((6, 9)),
        rng.standard_normal((9, 6)),
    )
    out["gemv"] = K.gemv(
        wafer.allocate("gemv", 4, 0, 2, 3), rng.standard_normal((4, 6)), rng.standard_normal(6)
    )
    out["stencil"] = K.stencil7(
        wafer.allocate("st", 8, 0, 4, 5), rng.standard_normal((4, 5, 3)).astype(np.float32)
    )
    out["life"] = K.game_of_life(
        wafer.allocate("life", 13, 0, 6, 6), (rng.random((6, 6)) < 0.4).astype(np.int8), 3
    )
    out["allreduce"] = K.allreduce_kernel(
        wafer.allocate("ar", 0, 10, 5, 4), rng.standard_normal((5, 4, 3))
    )
    region = wafer.allocate("ops", 8, 10, 6, 6)
    ws.transfer(region, (0, 0, 3, 3), (2, 4, 3, 3), 5)
    ws.reduce_row(region, None, 4, root=2, algorithm="tree")
    ws.broadcast_col(region, None, 3, root=1)
    return out, wafer


def test_numpy_and_torch_agree():
    np_out, np_wafer = run_kernels("numpy")
    torch_out, torch_wafer = run_kernels("torch")
    assert isinstance(torch_wafer.regions["ops"].clock, torch.Tensor)
    for name in np_out:
        assert np_out[name].cycles == torch_out[name].cycles
        np.testing.assert_allclose(np_out[name].value, torch_out[name].value, rtol=1e-5, atol=1e-5)
    for owner, region in np_wafer.regions.items():
        other = torch_wafer.regions[owner].counters()
        for name, array in region.counters().items():
            np.testing.assert_array_equal(array, other[name])
