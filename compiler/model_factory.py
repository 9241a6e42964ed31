"""Library models without a wrapper class, and how a batch is passed to a model.

`model: {factory: torchvision.models.googlenet, kwargs: {...}}` names a callable in an allowed
package (the server's `model_factory_packages`: torchvision, timm, transformers, torchaudio by
default) or in the job's own project; `factory(**kwargs)` must return an nn.Module. With
`model.config` the factory is a transformers model class: `factory(factory.config_class(**config),
**kwargs)`. Like a model file, the factory only runs inside the compile sandbox.

`ModelCall` is the calling convention: the batch's inputs positionally or under a keyword
(`model.inputs`, by default a transformers model's `main_input_name`), with `train.loss: model`
the targets too (`model.targets`, by default `labels` beside a keyword input), and which tensor
of a structured output (a transformers ModelOutput, torchvision's GoogLeNetOutputs) is used:
`.loss` with train.loss model, else `.logits` or the first element.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch import nn

from compiler.errors import InvalidSpec, ModelError
from compiler.user_code import importable_sources, user_code_error

DEFAULT_FACTORY_PACKAGES = ("torchvision", "timm", "transformers", "torchaudio")


def resolve_factory(
    path: str,
    packages: Sequence[str] = DEFAULT_FACTORY_PACKAGES,
    files: dict[str, str] | None = None,
    source_dir: Path | None = None,
) -> Callable[..., Any]:
    """The callable `path` names (`package.module.name`), imported: refused with InvalidSpec
    when its package is neither allowed nor the job's own, when it cannot be imported, or when
    the name is private or defined outside that package (`torchvision.os.system`)."""
    parts = path.split(".")
    top = parts[0]
    if len(parts) < 2 or not all(p.isidentifier() for p in parts):
        raise InvalidSpec(
            f"model.factory {path!r} is not a dotted name such as torchvision.models.resnet18"
        )
    if any(p.startswith("_") for p in parts):
        raise InvalidSpec(f"model.factory {path!r} names a private object; name a public callable")
    folder = importable_sources(files or {}, source_dir)
    own = (folder / f"{top}.py").is_file() or (folder / top).is_dir()
    if top not in packages and not own:
        raise InvalidSpec(
            f"model.factory {path!r}: {top!r} is not a package models may be built from "
            f"(allowed: {', '.join(packages)}, or a module of the job's own project); "
            "wrap the model in a class in your model file instead"
        )
    target = _walk(parts)
    if own and not _inside(getattr(sys.modules.get(top), "__file__", None), folder):
        raise InvalidSpec(f"model.factory {path!r}: {top!r} is not the job's own module")
    if isinstance(target, ModuleType):
        raise InvalidSpec(f"model.factory {path!r} is a module; name the callable in it")
    defined_in = str(getattr(target, "__module__", None) or "")
    if defined_in.split(".")[0] != top:
        raise InvalidSpec(
            f"model.factory {path!r} is not defined in {top!r} (it comes from "
            f"{defined_in or 'nowhere'}); name the library's own model constructor"
        )
    if not callable(target):
        raise InvalidSpec(f"model.factory {path!r} is not callable")
    return target  # type: ignore[no-any-return]


def _walk(parts: list[str]) -> Any:
    """The object parts names: attributes first (torchvision.models.googlenet is the function
    the package exports, not its module), submodules where no attribute has the name."""
    target = _import(parts[0], parts[0])
    for end in range(2, len(parts) + 1):
        name = parts[end - 1]
        if hasattr(target, name):
            target = getattr(target, name)
        elif isinstance(target, ModuleType):
            target = _import(".".join(parts[:end]), ".".join(parts))
        else:
            where = ".".join(parts[: end - 1])
            raise InvalidSpec(f"model.factory {'.'.join(parts)!r}: {where} has no {name!r}")
    return target


def _import(name: str, path: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:  # the module exists but one of its own imports is missing
            raise user_code_error(f"importing {name}", exc) from exc
        if "." not in name:
            raise InvalidSpec(
                f"model.factory names package {name!r}, which is not installed where jobs "
                "compile; use an installed library (torchvision, timm, transformers) or your "
                "project's module"
            ) from None
        parent, _, last = name.rpartition(".")
        raise InvalidSpec(f"model.factory {path!r}: {parent} has no {last!r}") from None
    except Exception as exc:
        raise user_code_error(f"importing {name}", exc) from exc


def _inside(filename: str | None, folder: Path) -> bool:
    if not filename:
        return False
    return Path(folder).resolve() in Path(filename).resolve().parents


def build_factory_model(
    model_spec: dict[str, Any],
    seed: int,
    packages: Sequence[str] = DEFAULT_FACTORY_PACKAGES,
    files: dict[str, str] | None = None,
    source_dir: Path | None = None,
) -> nn.Module:
    """`torch.manual_seed(seed); factory(**kwargs)` (a config object first with model.config)."""
    path = str(model_spec["factory"])
    factory = resolve_factory(path, packages, files, source_dir)
    kwargs = dict(model_spec.get("kwargs") or {})
    args: tuple[Any, ...] = ()
    config = model_spec.get("config")
    if config is not None:
        config_class = getattr(factory, "config_class", None)
        if not callable(config_class):
            raise InvalidSpec(
                f"model.config is for a model class with a config_class (a transformers "
                f"model); {path} has none: give its arguments in model.kwargs"
            )
        try:
            args = (config_class(**config),)
        except Exception as exc:
            raise user_code_error(f"building {config_class.__name__}(**{config})", exc) from exc
    torch.manual_seed(seed)
    try:
        model = factory(*args, **kwargs)
    except Exception as exc:
        raise user_code_error(f"calling {path}(**{kwargs})", exc) from exc
    if not isinstance(model, nn.Module):
        raise InvalidSpec(
            f"model.factory {path} returned a {type(model).__name__}, not an nn.Module; "
            "name a callable that builds the model"
        )
    return model


@dataclass(frozen=True)
class ModelCall:
    """How one batch is passed to the model and which tensor of its output is used."""

    inputs: str | None = None  # keyword of the batch's inputs; None: the first argument
    targets: str | None = None  # keyword of the targets (train.loss model); None: the second
    with_targets: bool = False  # train.loss: model (forward(inputs, targets) returns the loss)

    @classmethod
    def for_spec(cls, spec: dict[str, Any], model: nn.Module) -> ModelCall:
        """The spec's convention (model.inputs / model.targets); a factory's transformers model
        takes its main_input_name and `labels` unless the spec says otherwise."""
        model_spec = spec.get("model") or {}
        with_targets = (spec.get("train") or {}).get("loss", "cross_entropy") == "model"
        inputs, targets = model_spec.get("inputs"), model_spec.get("targets")
        if model_spec.get("factory"):
            main = getattr(model, "main_input_name", None)
            inputs = inputs or (main if isinstance(main, str) else None)
            if with_targets and inputs:
                targets = targets or "labels"
        if with_targets and inputs and not targets:
            raise InvalidSpec(
                "model.inputs is a keyword, so the targets need one too: set model.targets "
                "(e.g. labels)"
            )
        return cls(inputs, targets if with_targets else None, with_targets)

    def arguments(
        self, inputs: torch.Tensor, targets: torch.Tensor
    ) -> tuple[tuple[torch.Tensor, ...], dict[str, torch.Tensor]]:
        """(args, kwargs) of the model's call on one batch."""
        args: list[torch.Tensor] = []
        kwargs: dict[str, torch.Tensor] = {}
        for name, value, wanted in (
            (self.inputs, inputs, True),
            (self.targets, targets, self.with_targets),
        ):
            if not wanted:
                continue
            if name:
                kwargs[name] = value
            else:
                args.append(value)
        return tuple(args), kwargs

    def __call__(self, model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor) -> Any:
        """model's output tensor on one batch (eager: the reference and tests)."""
        args, kwargs = self.arguments(inputs, targets)
        return self.output(model(*args, **kwargs))

    def output(self, out: object) -> torch.Tensor:
        """The tensor the loss is computed from: the output itself, or `.loss` (train.loss
        model) / `.logits` (otherwise), else the first element, of a structured output."""
        if isinstance(out, torch.Tensor):
            return out
        key = "loss" if self.with_targets else "logits"
        value = out.get(key) if isinstance(out, dict) else getattr(out, key, None)
        if value is None and isinstance(out, tuple | list) and out:
            value = out[0]
        if not isinstance(value, torch.Tensor):
            raise ModelError(
                f"the model returned a {type(out).__name__} without a tensor .{key} or first "
                f"element; return the {'loss' if self.with_targets else 'logits'} tensor"
                + ("" if self.with_targets else ", or use train.loss: model with labels")
            )
        return value
