"""Turning a job spec into an nn.Module: a built-in family, a class from an uploaded file, or a
library's factory (`compiler.model_factory`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from compiler.builtins import BUILTIN_MODELS, builtin_kwargs
from compiler.errors import InvalidSpec
from compiler.model_factory import DEFAULT_FACTORY_PACKAGES, ModelCall, build_factory_model
from compiler.user_code import (
    load_batch_function,
    load_user_module,
    user_code_error,
    user_traceback,
)

__all__ = [
    "ModelCall",
    "build_model",
    "load_batch_function",
    "load_user_module",
    "user_traceback",
]


def build_model(
    spec: dict[str, Any],
    files: dict[str, str] | None = None,
    source_dir: Path | None = None,
    factory_packages: Sequence[str] = DEFAULT_FACTORY_PACKAGES,
) -> nn.Module:
    """`torch.manual_seed(seed); Net(**kwargs)` for the spec's model (a built-in, a user class,
    or `factory(**kwargs)` from one of `factory_packages` or the job's own project)."""
    model_spec = spec["model"]
    seed = int(spec.get("train", {}).get("seed", 0))
    if model_spec.get("factory"):
        built = build_factory_model(model_spec, seed, factory_packages, files, source_dir)
        return built.train()
    if model_spec.get("builtin"):
        cls: Any = BUILTIN_MODELS[model_spec["builtin"]]
        kwargs = builtin_kwargs(spec)
    else:
        module = load_user_module(files or {}, model_spec["file"], source_dir)
        class_name = model_spec.get("class") or model_spec.get("class_")
        cls = getattr(module, str(class_name), None)
        if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
            raise InvalidSpec(
                f"{model_spec['file']} defines no nn.Module subclass named {class_name!r}"
            )
        kwargs = dict(model_spec.get("kwargs") or {})
    torch.manual_seed(seed)
    try:
        model: nn.Module = cls(**kwargs)
    except Exception as exc:
        raise user_code_error(f"building {cls.__name__}(**{kwargs})", exc) from exc
    return model.train()
