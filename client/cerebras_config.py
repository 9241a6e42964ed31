"""The seed's `cerebras_config.yaml`, mapped onto the job spec's sections.

A config file holds the seed's flat keys (or the spec's own section names):

    target_device: wse3            # -> compile_options.target_device: WSE-3
    fp16_enabled: true             # -> compile_options
    num_epochs: 3                  # -> run_options
    prefetch_depth: 4              # -> data_loading
    batch_size: 32                 # -> data (also `Runner.batch_size`, docs/runner.md)

`sam submit job.yaml --config cerebras_config.yaml` merges it, and so does a `cerebras_config:`
key in job.yaml (a file name relative to job.yaml, or the keys inline). A key set in two places
must agree; a key the seed does not define is an error, like any unknown spec key.
"""

from __future__ import annotations

from collections.abc import Mapping

from client.errors import JobSpecError

TYPE_CHECKING = False  # typing's import is spared on `sam submit`'s path
if TYPE_CHECKING:
    from typing import Any

SECTION_OF: dict[str, str] = {
    "target_device": "compile_options",
    "fp16_enabled": "compile_options",
    "optimizer_state_offload": "compile_options",
    "max_activation_memory": "compile_options",
    "execution_mode": "compile_options",
    "num_epochs": "run_options",
    "steps_per_epoch": "run_options",
    "checkpoint_enabled": "run_options",
    "checkpoint_every": "run_options",
    "checkpoint_dir": "run_options",
    "log_level": "run_options",
    "stop_on_nan": "run_options",
    "prefetch_depth": "data_loading",
    "use_parallel_loader": "data_loading",
    "batch_size": "data",
}
SECTIONS = ("compile_options", "run_options", "data_loading")
_DEVICES = {"wse2": "WSE-2", "cs2": "WSE-2", "wse3": "WSE-3", "cs3": "WSE-3"}


def config_sections(config: Mapping[str, object], source: str) -> dict[str, dict[str, Any]]:
    """The config's keys grouped into the spec's sections, with the seed's spellings normalized
    (`wse3` -> `WSE-3`, `info` -> `INFO`)."""
    out: dict[str, dict[str, Any]] = {}
    for key, value in config.items():
        if key in SECTIONS and isinstance(value, dict):
            for inner, inner_value in value.items():
                _put(out, key, str(inner), inner_value, source)
        elif key in SECTION_OF:
            _put(out, SECTION_OF[key], key, value, source)
        else:
            known = ", ".join(sorted(SECTION_OF))
            raise JobSpecError(f"{source}: unknown key {key!r}; the config keys are: {known}")
    return out


def _put(
    out: dict[str, dict[str, Any]], section: str, key: str, value: object, source: str
) -> None:
    if key == "target_device" and isinstance(value, str):
        value = _DEVICES.get(value.lower().replace("-", "").replace("_", ""), value)
    if key == "log_level" and isinstance(value, str):
        value = value.upper()
    block = out.setdefault(section, {})
    if key in block and block[key] != value:
        raise JobSpecError(f"{source}: {key} is given twice ({block[key]!r} and {value!r})")
    block[key] = value


def merge_config(
    spec: Mapping[str, object], sections: dict[str, dict[str, Any]], source: str
) -> dict[str, object]:
    """`spec` with the config's sections merged in; a key both set to different values is an
    error naming both (nothing is silently overridden)."""
    merged = dict(spec)
    for section, values in sections.items():
        block = merged.get(section)
        if block is None:
            block = {}
        if not isinstance(block, dict):
            raise JobSpecError(f"{section} in the job file must be a mapping")
        block = dict(block)
        for key, value in values.items():
            if key in block and block[key] != value:
                raise JobSpecError(
                    f"{section}.{key} is {block[key]!r} in the job file but {value!r} in "
                    f"{source}; keep one"
                )
            block[key] = value
        merged[section] = block
    return merged
