"""The login node's side of a runner job's data sets (docs/runner.md, "Data sets"): the names
Runner(datasets=...) gives, the local copies it maps them to, and the names the script asked
`sam.dataset_path` for (each must be named by the job). Torch-free, as the whole package."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .result import RunnerError

NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")  # as `sam data put` takes it
# {name: local folder} given as Runner(datasets={...}); every name dataset_path() was asked for
local_copies: dict[str, Path] = {}
asked: set[str] = set()


def names_of(datasets: Any) -> list[str]:
    """The data set names of Runner(datasets=...): a list of names, or {name: local folder}."""
    if datasets is None:
        return []
    if isinstance(datasets, str) or not isinstance(datasets, (list, tuple, dict)):
        raise RunnerError(
            "Runner(datasets=...) takes a list of data set names (`sam data put NAME ...`), "
            "or {name: the folder of its copy on this machine}"
        )
    names = [str(n) for n in datasets]
    bad = [n for n in names if not NAME.match(n)]
    if bad:
        raise RunnerError(
            f"data set names {bad} are not valid: letters, digits, '_', '-', '.' "
            "(at most 64, not starting with '.')"
        )
    return list(dict.fromkeys(names))
