"""The op classes have one home, the simulator's `wse_sim.ops`: the compiler and the timing plan
classify every op the same way."""

from __future__ import annotations

import pytest

from compiler import ops
from wse_sim import ops as sim_ops
from wse_sim.runtime import timing


def test_the_compiler_takes_its_reductions_from_the_simulator() -> None:
    assert ops.REDUCTION_OPS is sim_ops.REDUCTION_OPS
    assert ops.ANCHOR_CLASSES == frozenset(sim_ops.ANCHOR_OPS)


@pytest.mark.parametrize("family", sorted(sim_ops.ANCHOR_OPS))
def test_each_family_member_is_kept_whole_and_classed_as_its_family(family: str) -> None:
    for target in sim_ops.ANCHOR_OPS[family]:
        assert target in ops.KEPT_WHOLE
        assert ops.op_class(target) == family


def test_every_op_the_timing_plan_charges_a_collective_is_supported() -> None:
    charged = timing.REDUCING_TARGETS | sim_ops.MATMUL_OPS | sim_ops.CONV_OPS
    assert charged <= ops.SUPPORTED_OPS
    for target in sim_ops.REDUCTION_OPS:
        assert ops.op_class(target) == "reduction"
    # Sum-like reductions are charged a row reduction; ops that return positions are not.
    assert sim_ops.SUM_LIKE_REDUCTIONS <= timing.REDUCING_TARGETS
    assert not sim_ops.SELECTING_REDUCTIONS & timing.REDUCING_TARGETS
