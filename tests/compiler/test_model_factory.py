"""Library models without a wrapper class: `model.factory` (a callable of an allowed package or
of the job's own project) trains on the wafer like eager, a transformers model takes the batch
as its main input and `labels` with train.loss: model, and a bad factory is refused saying why."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.data import synthetic_batch
from compiler.errors import InvalidSpec, ModelError
from compiler.frontend import trace_training_step
from compiler.model_factory import ModelCall, resolve_factory
from compiler.model_source import build_model
from tests.compiler.conftest import make_spec
from tests.compiler.test_frontend_equivalence import eager_reference
from tests.compiler.wafer_runner import wafer_steps

STEPS = 3
BERT = {
    "vocab_size": 32,
    "hidden_size": 16,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "intermediate_size": 32,
    "max_position_embeddings": 8,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
}
NETS_PY = """from torch import nn


def build(width=16):
    return nn.Sequential(nn.Linear(784, width), nn.Tanh(), nn.Linear(width, 10))
"""


def factory_spec(factory: str, **model: object) -> dict:
    spec = make_spec(None, train={"optimizer": {"name": "adam", "lr": 1e-2}})
    spec["model"] = {"factory": factory, "kwargs": {}, **model}
    spec["data"].update({"input_shape": [784], "num_classes": 10, "batch_size": 4})
    return spec


def assert_trains_like_eager(spec: dict, files: dict | None = None) -> None:
    traced = trace_training_step(spec, files)
    batches = [synthetic_batch(spec, k) for k in range(STEPS)]
    losses, state = wafer_steps(traced, spec, batches)
    want_losses, want_params = eager_reference(spec, files, STEPS)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-3)
    assert losses[-1] != losses[0]
    for name, value in want_params.items():
        np.testing.assert_allclose(state[name], value, rtol=1e-3, atol=1e-5, err_msg=name)


def test_a_torchvision_factory_trains_like_eager() -> None:
    spec = factory_spec(
        "torchvision.ops.MLP", kwargs={"in_channels": 784, "hidden_channels": [16, 10]}
    )
    # the final state compared by the library's own parameter names (0.weight), no wrapper prefix
    assert_trains_like_eager(spec)


def test_a_transformers_model_takes_input_ids_and_labels_and_returns_its_loss() -> None:
    spec = factory_spec("transformers.BertForMaskedLM", config=BERT)
    spec["train"]["loss"] = "model"
    spec["data"].update({"task": "language_model", "input_shape": [8], "num_classes": 32})
    model = build_model(spec)
    call = ModelCall.for_spec(spec, model)
    assert (call.inputs, call.targets) == ("input_ids", "labels")
    assert_trains_like_eager(spec)


def test_a_factory_of_the_jobs_own_module() -> None:
    spec = factory_spec("nets.build", kwargs={"width": 8})
    assert_trains_like_eager(spec, {"nets.py": NETS_PY})


@pytest.mark.parametrize(
    ("factory", "packages", "says"),
    [
        ("os.system", None, "'os' is not a package models may be built from"),
        ("torchvision.models.resnet.nn.Linear", None, "is not defined in 'torchvision'"),
        ("torchvision.models.no_such_net", None, "has no 'no_such_net'"),
        ("samnopkg.models.net", ("samnopkg",), "which is not installed"),
        ("torchvision.models._utils.handle_legacy_interface", None, "private"),
    ],
)
def test_a_factory_that_cannot_be_used_is_refused(factory, packages, says) -> None:
    with pytest.raises(InvalidSpec, match=says):
        resolve_factory(factory, *([packages] if packages else []))


def test_a_name_the_package_exports_is_its_callable_not_its_module() -> None:
    from torchvision.models import googlenet

    assert resolve_factory("torchvision.models.googlenet") is googlenet
    with pytest.raises(InvalidSpec, match="is a module; name the callable"):
        resolve_factory("torchvision.models.resnet")


def test_a_factory_that_returns_no_module_is_refused() -> None:
    with pytest.raises(InvalidSpec, match="returned a list, not an nn.Module"):
        build_model(factory_spec("torchvision.models.list_models"))
    with pytest.raises(InvalidSpec, match="has none: give its arguments in model.kwargs"):
        build_model(factory_spec("torchvision.ops.MLP", config={"x": 1}))
    with pytest.raises(ModelError, match="calling torchvision.ops.MLP"):
        build_model(factory_spec("torchvision.ops.MLP", kwargs={"no_such_arg": 1}))


def test_only_the_allowed_packages_are_importable_in_the_sandbox_trace() -> None:
    spec = factory_spec("torchvision.ops.MLP", kwargs={"in_channels": 784, "hidden_channels": [10]})
    with pytest.raises(InvalidSpec, match="allowed: timm"):
        trace_training_step(spec, factory_packages=("timm",))


def test_a_structured_output_gives_its_logits_or_loss() -> None:
    import torch
    from torchvision.models import GoogLeNetOutputs

    logits = torch.ones(2, 3)
    out = GoogLeNetOutputs(logits, None, None)
    assert ModelCall().output(out) is logits
    assert ModelCall(with_targets=True).output({"loss": logits.sum()}).dim() == 0
    with pytest.raises(ModelError, match="return the logits tensor"):
        ModelCall().output({"hidden": logits})
