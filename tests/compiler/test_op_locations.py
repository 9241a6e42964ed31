"""Errors name the PyTorch call and the line that called it (a library's line, then the user's
line that reached it), backward ops included, and offer an alternative only on the user's line."""

from __future__ import annotations

import pytest

from compiler import opcheck
from compiler.errors import ModelError, UnsupportedOperator
from compiler.frontend import trace_training_step
from tests.compiler.conftest import user_model_spec
from tests.compiler.test_core_opset import ROLL
from tests.compiler.test_unsupported_ops import SORTING_MODEL

TIMM_VIT = """import timm
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = timm.create_model(
            "vit_tiny_patch16_224", img_size=16, patch_size=8, embed_dim=16, depth=1,
            num_heads=2, num_classes=10, patch_drop_rate=0.5,
        )

    def forward(self, x):
        return self.net(x)
"""

TORCHVISION_VIDEO = """from torch import nn
from torchvision.models.video import s3d


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = s3d(num_classes=10)

    def forward(self, x):
        return self.net(x)
"""

TORCHVISION_SQUEEZENET = """from torch import nn
from torchvision.models import squeezenet1_1


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = squeezenet1_1(num_classes=10)

    def forward(self, x):
        return self.net(x)
"""


def _unsupported(source: str, data: dict) -> UnsupportedOperator:
    with pytest.raises(UnsupportedOperator) as info:
        trace_training_step(user_model_spec(data=data), {"model.py": source})
    return info.value


def test_a_refused_op_in_timm_names_the_library_call_then_the_users_line() -> None:
    error = _unsupported(TIMM_VIT, {"input_shape": [3, 16, 16], "batch_size": 2})
    by_op = {op["op"]: op for op in error.details["ops"]}
    sort = by_op["aten.sort.default"]
    assert sort["where"].startswith("torch.argsort at timm/layers/patch_dropout.py:")
    assert sort["where"].endswith(", from model.py:14 in forward")
    assert sort["source"] == "model.py:14 in forward"
    assert "torch.randn at timm/layers/patch_dropout.py:" in by_op["aten.randn.default"]["where"]
    assert "torch.argsort at timm/layers/patch_dropout.py:" in error.message
    # the reason, but no rewrite the user cannot make inside timm
    assert sort["suggestion"] == "sorting has no wafer kernel"
    assert "make_batch" not in error.message


def test_a_refused_op_on_the_users_line_gets_the_alternative() -> None:
    error = _unsupported(SORTING_MODEL, {})
    sort = next(op for op in error.details["ops"] if op["op"] == "aten.sort.default")
    assert sort["where"] == "torch.sort at model.py:12 in forward"
    assert "make_batch" in sort["suggestion"]


def test_a_refused_op_in_torchvision_names_its_functional_call() -> None:
    error = _unsupported(TORCHVISION_VIDEO, {"input_shape": [3, 4, 32, 32], "batch_size": 1})
    pools = [op for op in error.details["ops"] if "pool3d" in op["op"]]
    assert pools
    for op in pools:
        assert op["where"].startswith(
            (
                "F.max_pool3d at torchvision/models/video/s3d.py:",
                "F.avg_pool3d at torchvision/models/video/s3d.py:",
            )
        )
        assert op["where"].endswith(", from model.py:11 in forward")
        assert op["suggestion"] == "3-D pooling has no wafer kernel"


def test_backward_ops_carry_their_forward_call() -> None:
    traced = trace_training_step(
        user_model_spec(data={"input_shape": [1, 28, 28], "batch_size": 2}), {"model.py": ROLL}
    )
    where = {n["target"]: n.get("where") for n in traced.graph["nodes"]}
    assert where["aten.gelu_backward.default"] == "the backward of F.gelu at model.py:15 in forward"
    assert (
        where["aten.convolution_backward.default"]
        == "the backward of F.conv2d at model.py:14 in forward"
    )
    sources = {n["source"] for n in traced.graph["nodes"] if n["target"] == "aten.fmod.Scalar"}
    assert sources == {"model.py:14 in forward", "model.py:15 in forward"}


def test_an_unsupported_backward_op_in_a_library_is_located(monkeypatch) -> None:
    """A backward op without a kernel names the forward call inside torchvision it belongs to."""
    missing = "aten.max_pool2d_with_indices_backward.default"
    monkeypatch.setattr(opcheck, "SUPPORTED_OPS", opcheck.SUPPORTED_OPS - {missing})
    error = _unsupported(TORCHVISION_SQUEEZENET, {"input_shape": [3, 32, 32], "batch_size": 2})
    ops = [op for op in error.details["ops"] if op["op"] == missing]
    assert ops
    for op in ops:
        assert op["where"].startswith("the backward of F.max_pool2d at torchvision/models/")
        assert op["where"].endswith(", from model.py:11 in forward")
        assert op["source"] == "model.py:11 in forward"


def test_a_failure_inside_a_library_names_the_library_line_and_the_users() -> None:
    spec = user_model_spec(data={"input_shape": [1, 32, 32], "batch_size": 2})  # 1 channel, not 3
    with pytest.raises(ModelError) as info:
        trace_training_step(spec, {"model.py": TORCHVISION_SQUEEZENET})
    message = info.value.message
    assert "expected input[2, 1, 32, 32] to have 3 channels" in message
    assert "(at F.conv2d at torchvision/models/squeezenet.py:" in message
    assert message.endswith(", from model.py:11 in forward)")
