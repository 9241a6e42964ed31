"""Unsupported operators fail with one error that lists every op with its source line."""

from __future__ import annotations

import pytest

from compiler.errors import UnsupportedOperator
from compiler.frontend import trace_training_step
from tests.compiler.conftest import linear_net, user_model_spec

SORTING_MODEL = linear_net(
    """        h = self.fc(x)
        ordered, _ = torch.sort(h, dim=1)
        top, _ = torch.topk(h, 3, dim=1)
        return ordered + top.sum(1, keepdim=True)
"""
)

NONZERO_MODEL = linear_net(
    """        h = self.fc(x)
        keep = torch.nonzero(h > 0)
        ordered, _ = torch.sort(h, dim=1)
        return ordered * keep.shape[0]
"""
)


def _error_for(source: str) -> UnsupportedOperator:
    with pytest.raises(UnsupportedOperator) as info:
        trace_training_step(user_model_spec(), {"model.py": source})
    return info.value


def test_every_unsupported_op_is_listed_with_its_line() -> None:
    error = _error_for(SORTING_MODEL)
    assert error.kind == "unsupported_op"
    found = {(op["op"].split(".")[1], op["source"]) for op in error.details["ops"]}
    assert ("sort", "model.py:12 in forward") in found
    assert ("topk", "model.py:13 in forward") in found
    assert "model.py:12" in error.message and "model.py:13" in error.message
    forward_ops = [op for op in error.details["ops"] if op["source"].startswith("model.py")]
    assert [op["input_shapes"] for op in forward_ops] == [[[8, 10]], [[8, 10]]]


def test_data_dependent_op_is_reported_even_though_tracing_stops() -> None:
    error = _error_for(NONZERO_MODEL)
    found = {(op["op"].split(".")[1], op["source"]) for op in error.details["ops"]}
    assert ("nonzero", "model.py:12 in forward") in found
    assert ("sort", "model.py:13 in forward") in found
    nonzero = next(op for op in error.details["ops"] if "nonzero" in op["op"])
    assert "torch.where" in nonzero["suggestion"]


BRANCHING_MODEL = linear_net(
    """        h = self.fc(x)
        if h.sum() > 0:
            h = h * 2
        return h
"""
)


def test_data_dependent_control_flow_names_the_branch_line() -> None:
    error = _error_for(BRANCHING_MODEL)
    lines = {op["source"] for op in error.details["ops"]}
    assert "model.py:12 in forward" in lines
    assert "torch.where" in error.message


SHAPE_BUG_MODEL = linear_net("        return self.fc(x)\n", in_features=100)


def test_shape_bug_is_a_model_error_pointing_at_the_users_line() -> None:
    from compiler.errors import ModelError

    with pytest.raises(ModelError) as info:
        trace_training_step(user_model_spec(), {"model.py": SHAPE_BUG_MODEL})
    assert "model.py:11 in forward" in info.value.details["traceback"]
    assert "model.py:11 in forward" in info.value.message


def test_a_boolean_mask_index_is_refused_at_its_line_with_the_masked_alternative() -> None:
    # the selected count depends on the mask's values: refused by name at compile (it used to
    # end in an internal error on the unknown size, or blame a size query of sum's backward)
    error = _error_for(
        linear_net(
            """        h = self.fc(x)
        return h[h > 0].sum() + h.sum(1, keepdim=True)
"""
        )
    )
    (item,) = error.details["ops"]
    assert item["op"] == "aten.index.Tensor"
    assert item["source"] == "model.py:12 in forward"
    assert "boolean mask" in item["suggestion"] and "torch.where(mask, x, 0)" in item["suggestion"]
