"""The transformer zoo (examples/zoo: transformers and timm models) trains like PyTorch eager.

Each folder is compiled by the real compiler (the sandboxed front end, op check, planner), run
for its steps on a simulated wafer region and compared, loss by loss, with plain PyTorch eager
on the same synthetic batches by the shared harness (tests/zoo/harness.py, the one
benchmarks/model_zoo.py uses). A match counts only when training moves eager's losses by more
than the tolerance against the same steps at learning rate 0, so a wrong or missing update
cannot pass. A model that cannot run must fail at compile with `unsupported_op` naming the op;
BLOCKED lists those (none today).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

if not os.getenv("CI"):  # in CI the zoo extra is installed, and a missing library must fail
    pytest.importorskip("transformers", reason="the model zoo needs the `zoo` extra")
    pytest.importorskip("timm", reason="the model zoo needs the `zoo` extra")
import torch  # noqa: E402

from tests.zoo.harness import RTOL, load_zoo_job, run_zoo_model  # noqa: E402

TEXT_MODELS = [
    "gpt2",
    "bert_mlm",
    "t5",
    "bart",
    "llama",
    "mistral",
    "qwen2",
    "gpt_neo",
    "opt",
    "distilbert",
    "vit_tiny",
    "deit_tiny",
    "mlp_mixer",
]
BLOCKED: dict[str, str] = {}  # model -> the op that stops it (it must fail with unsupported_op)
_CACHE = Path(tempfile.mkdtemp(prefix="sam-zoo-text-"))


@pytest.mark.parametrize("name", TEXT_MODELS)
def test_zoo_model_trains_with_pytorch_losses(name: str) -> None:
    job = load_zoo_job(name)
    assert job.spec["train"]["optimizer"]["name"] == "sgd" and job.steps >= 5
    torch.set_num_threads(1)
    result = run_zoo_model(name, _CACHE)
    if name in BLOCKED:
        assert result.verdict == "unsupported" and BLOCKED[name] in (result.blocking_op or "")
        return
    assert result.verdict == "train_match", (
        f"{name}: {result.verdict} {result.message} max rel error {result.max_rel_error} "
        f"(rtol {RTOL}); training moves eager's losses by {result.training_effect} against lr 0 "
        f"(must exceed rtol)\nsim   {result.sim_losses}\ntorch {result.torch_losses}"
    )
    assert result.training_effect is not None and result.training_effect > RTOL
