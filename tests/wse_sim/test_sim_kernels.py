"""Known-answer kernels: results against numpy, cycles against their analytic formulas, and
two jobs sharing one wafer."""

from __future__ import annotations

import numpy as np
import pytest

import wse_sim as ws
from wse_sim import kernels as K
from wse_sim.kernels.life import life_numpy
from wse_sim.kernels.stencil import stencil7_numpy

RAMPS = pytest.mark.parametrize(
    "ramp", [pytest.param(1, id="default-ramp"), pytest.param(0, id="ramp0")]
)


def region_of(rows, cols, at=(0, 0), arch="wse2", ramp=1):
    wafer = ws.Wafer(ws.get_arch(arch, rows=rows + at[0], cols=cols + at[1], ramp_latency=ramp))
    return wafer.allocate("job", at[0], at[1], rows, cols)


@RAMPS
@pytest.mark.parametrize("grid", [(1, 1), (1, 4), (3, 1), (4, 6)])
def test_gemv(grid, ramp):
    rng = np.random.default_rng(1)
    a, x = rng.standard_normal((12, 24)), rng.standard_normal(24)
    region = region_of(*grid, ramp=ramp)
    result = K.gemv(region, a, x)
    np.testing.assert_allclose(result.value, a @ x, rtol=1e-5, atol=1e-5)
    assert result.cycles == K.gemv_cycles(region, (12, 24), grid)


@RAMPS
@pytest.mark.parametrize("p", [1, 2, 4])
def test_summa(p, ramp):
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((8, 12)), rng.standard_normal((12, 16))
    region = region_of(p, p, ramp=ramp)
    result = K.summa(region, a, b)
    np.testing.assert_allclose(result.value, a @ b, rtol=1e-5, atol=1e-5)
    assert result.cycles == K.summa_cycles(region, (8, 12, 16), p)
    assert int(region.sram_hwm.max()) > 0 and int(region.sram_used.max()) == 0


def test_summa_on_wse3_uses_its_own_rate():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((4, 4)), rng.standard_normal((4, 4))
    region = region_of(2, 2, arch="wse3")
    assert K.summa(region, a, b).cycles == K.summa_cycles(region, (4, 4, 4), 2)


@RAMPS
@pytest.mark.parametrize("shape", [(5, 7, 6), (1, 4, 3), (4, 1, 2)])
def test_stencil7(shape, ramp):
    rng = np.random.default_rng(4)
    u = rng.standard_normal(shape).astype(np.float32)
    region = region_of(shape[0], shape[1], ramp=ramp)
    result = K.stencil7(region, u, sweeps=2)
    np.testing.assert_allclose(
        result.value, stencil7_numpy(stencil7_numpy(u)), rtol=1e-5, atol=1e-4
    )
    assert result.cycles == K.stencil7_cycles(region, shape[:2], shape[2], sweeps=2)


@RAMPS
def test_game_of_life_moves_a_glider_one_cell_diagonally_every_four_generations(ramp):
    board = np.zeros((10, 10), np.int8)
    board[1, 2] = board[2, 3] = board[3, 1] = board[3, 2] = board[3, 3] = 1
    region = region_of(10, 10, ramp=ramp)
    result = K.game_of_life(region, board, 8)
    expected = np.zeros_like(board)
    expected[3:, 2:] = board[1:-2, :-2]
    np.testing.assert_array_equal(result.value, expected)
    assert result.cycles == K.life_cycles(region, (10, 10), 8)


def test_game_of_life_matches_numpy_on_random_boards():
    board = (np.random.default_rng(5).random((7, 9)) < 0.35).astype(np.int8)
    expected = board
    for _ in range(5):
        expected = life_numpy(expected)
    np.testing.assert_array_equal(K.game_of_life(region_of(7, 9), board, 5).value, expected)


@RAMPS
@pytest.mark.parametrize("grid,k", [((4, 5), 3), ((1, 6), 8), ((6, 1), 2), ((1, 1), 4)])
def test_allreduce(grid, k, ramp):
    values = np.random.default_rng(6).standard_normal((*grid, k))
    region = region_of(*grid, ramp=ramp)
    result = K.allreduce_kernel(region, values)
    np.testing.assert_allclose(
        result.value, np.broadcast_to(values.sum((0, 1)), values.shape), rtol=1e-5, atol=1e-5
    )
    assert result.cycles == K.allreduce_cycles(grid, k, region.arch)
    if ramp == 1:
        assert result.cycles == K.allreduce_cycles(grid, k)  # WSE-2's constants by default


def test_with_free_ramps_the_kernel_formulas_are_the_pre_ramp_ones():
    """ramp_latency=0 reproduces the older model's numbers: each formula written out as it
    was before the RAMP crossings were charged (one cycle per hop, nothing else)."""
    rate = 2  # fp32 FLOPs per cycle

    def ceil(a, b):
        return -(-a // b)

    free = region_of(6, 6, ramp=0)
    # gemv 12x24 on 4x6: (h + n - 2) + ceil(2 m n / rate) + (w + m - 2), m = 3, n = 4
    assert K.gemv_cycles(free, (12, 24), (4, 6)) == (4 + 4 - 2) + ceil(2 * 3 * 4, rate) + (
        6 + 3 - 2
    )
    # summa 8x12x16 on 4x4: m, k, n = 2, 3, 4; D_s = 3, 2, 2, 3; two barriers of 4 (P - 1)
    summa = sum(
        (d + 6 - 1) + (d + 12 - 1) + 2 * 4 * 3 + ceil(2 * 2 * 3 * 4, rate) for d in (3, 2, 2, 3)
    )
    assert K.summa_cycles(free, (8, 12, 16), 4) == summa
    assert K.stencil7_cycles(free, (5, 7), 6, sweeps=2) == 2 * (4 * 6 + ceil(13 * 6, rate))
    assert K.life_cycles(free, (10, 10), 8) == 8 * (2 * 1 + 2 * 3 + ceil(10, rate))
    assert K.allreduce_cycles((4, 5), 3, free.arch) == 2 * (5 + 3 - 2) + 2 * (4 + 3 - 2)
    # ... and the default constants charge strictly more wherever a wavelet crosses the fabric
    paid = region_of(6, 6)
    assert K.gemv_cycles(paid, (12, 24), (4, 6)) > K.gemv_cycles(free, (12, 24), (4, 6))
    assert K.allreduce_cycles((4, 5), 3) > K.allreduce_cycles((4, 5), 3, free.arch)


def test_two_jobs_on_one_wafer_get_exactly_what_they_get_alone():
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((8, 8)), rng.standard_normal((8, 8))
    board = (rng.random((6, 6)) < 0.4).astype(np.int8)

    def matmul_job(region):
        return K.summa(region, a, b)

    def life_job(region):
        return K.game_of_life(region, board, 3)

    alone_mm = matmul_job(region_of(4, 4))
    alone_life = life_job(region_of(6, 6))
    wafer = ws.Wafer(ws.get_arch("wse2", rows=12, cols=12))
    wafer.allocate("mm", 0, 0, 4, 4)
    wafer.allocate("life", 5, 6, 6, 6)
    together = ws.run_together(wafer, {"mm": matmul_job, "life": life_job})
    np.testing.assert_array_equal(together["mm"].value, alone_mm.value)
    np.testing.assert_array_equal(together["life"].value, alone_life.value)
    assert together["mm"].cycles == alone_mm.cycles and together["life"].cycles == alone_life.cycles
    assert wafer.regions["mm"].cycles == alone_mm.cycles


def test_summa_without_barriers_overlaps_steps_but_keeps_the_answer():
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((16, 16)), rng.standard_normal((16, 16))
    synced = region_of(4, 4)
    free = region_of(4, 4)
    with_barriers = K.summa(synced, a, b)
    flowing = K.summa(free, a, b, sync=False)
    np.testing.assert_allclose(flowing.value, a @ b, rtol=1e-5, atol=1e-5)
    compute_only = 4 * (2 * 4 * 4 * 4) // 2
    assert compute_only < flowing.cycles < with_barriers.cycles
