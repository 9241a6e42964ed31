"""Every Core ATen op runs on the wafer with eager's forward values and gradients (one OpInfo
sample each), or is refused with a reason; `benchmarks/op_coverage.py` runs every sample."""

from __future__ import annotations

import pytest
import torch

from compiler.core_ops import REFUSED, core_op_names
from compiler.errors import UnsupportedOperator
from compiler.frontend import trace_training_step
from tests.compiler.conftest import linear_net, user_model_spec
from tests.compiler.opinfo_harness import (
    RANDOM_OPS,
    against_float64,
    check_on_wafer,
    core_ops_by_name,
    measure,
    run_eagerly,
    summary,
)

# Core ops whose gradients the wafer cannot compute yet: each names the missing kernel.
KNOWN_FAILING: set[str] = set()


@pytest.fixture(scope="module")
def coverage() -> dict:
    torch.set_num_threads(1)
    return measure(limit=1)


def test_every_core_op_matches_eager_or_is_refused_with_a_reason(coverage: dict) -> None:
    figures = summary(coverage)
    assert figures["core_ops"] == len({n.split(".")[1] for n in core_op_names()}) >= 150
    assert set(figures["failing"]) == KNOWN_FAILING, figures["failing"]
    for name, cov in coverage.items():
        if cov.refused:
            assert len(cov.refused) > 20, name  # a reason, not a bare "unsupported"
            continue
        if name in KNOWN_FAILING:
            continue
        assert cov.supported, (name, cov.why)
        if name in RANDOM_OPS:
            continue
        assert cov.samples >= 1, (name, cov.why)
        assert cov.fwd_match, (name, cov.why)
        assert cov.bwd_match or not cov.bwd_samples, (name, cov.why)
    differentiable = [c for c in coverage.values() if c.bwd_match]
    assert len(differentiable) >= 100


def test_a_refused_core_op_gives_its_reason_in_the_compile_error() -> None:
    source = linear_net(
        """        h = self.fc(x)
        return h + torch.randperm(10).float()
"""
    )
    with pytest.raises(UnsupportedOperator) as info:
        trace_training_step(user_model_spec(), {"model.py": source})
    (item,) = [op for op in info.value.details["ops"] if op["op"] == "aten.randperm.default"]
    assert item["suggestion"] == REFUSED["aten.randperm.default"]
    assert "make_batch" in info.value.message


def test_eager_fp32_rounding_is_not_held_against_the_wafer() -> None:
    # A layer norm over one element: x - mean is 0 exactly, so the weight's gradient is 0 (the
    # wafer's value); eager fp32 leaves a rounding residue that rstd = 1/sqrt(eps) scales up.
    from torch.testing._internal.opinfo.core import SampleInput

    weight = torch.tensor([2.0], requires_grad=True)
    sample = SampleInput(torch.tensor([7.1], requires_grad=True), args=((1,), weight, None))
    run = run_eagerly(torch.nn.functional.layer_norm, sample, set(core_ops_by_name()))
    assert abs(float(run.grads[1])) > 1e-5  # eager fp32's residue, above the harness's atol
    result = check_on_wafer(run)
    assert result.fwd and result.bwd and result.by_float64, result.why
    # float64 is an arbiter, not a pass: values off from both still fail
    wrong = [g.detach().numpy() + 1e-2 for g in run.grads]
    assert against_float64(result, wrong, run, 1) is not None
