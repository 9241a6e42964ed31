"""Model libraries see a static-graph trace: torch.compiler.is_compiling() is true while SAM
traces, so code that guards a data-dependent shortcut with it (as transformers' mask builders
do) traces instead of failing, and the flag is restored afterwards."""

from __future__ import annotations

import torch

from compiler.frontend import trace_training_step
from tests.compiler.conftest import linear_net, user_model_spec

GUARDED_MODEL = linear_net(
    """        mask = (x > -100).float()
        # transformers' pattern: a Python shortcut on tensor data, skipped when compiling
        if not torch.compiler.is_compiling() and bool((mask == 1).all()):
            return self.fc(x)
        return self.fc(x * mask)
"""
)


def test_is_compiling_guard_lets_a_data_dependent_shortcut_trace() -> None:
    traced = trace_training_step(user_model_spec(), {"model.py": GUARDED_MODEL})
    targets = {n["target"] for n in traced.graph["nodes"]}
    assert "aten.gt.Scalar" in targets  # the mask stayed in the graph: the static branch was traced
    assert not torch.compiler.is_compiling()
