"""Bounded numbers for what clients send.

Every integer a request carries fits the column that stores it and every float is finite, so a
number out of range is a 422 that names the field, never an OverflowError or a database
DataError (a 500) further in. `check_tree` does the same for free-form JSON/YAML values (model
kwargs): finite numbers, no NUL characters, nesting at most `MAX_DEPTH` deep.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import Field

INT32_MAX = 2**31 - 1  # an Integer column (PostgreSQL int4)
INT64_MAX = 2**63 - 1  # a BigInteger column (PostgreSQL int8)

# A job's time limit: at most a year (Slurm's longest limits are days to weeks).
MAX_TIME_LIMIT_S = 366 * 86400
# Steps of a whole job (num_epochs x steps_per_epoch): stored in an int4 column.
MAX_TOTAL_STEPS = 1_000_000_000
# Nesting of any JSON body or YAML spec: a job spec needs ~5 levels, model kwargs a few more.
MAX_DEPTH = 32

# An integer stored in an Integer column.
Int32 = Annotated[int, Field(ge=-INT32_MAX - 1, le=INT32_MAX)]
# A positive count or size stored in an Integer column.
PositiveInt32 = Annotated[int, Field(ge=1, le=INT32_MAX)]
# A count that may be 0, stored in an Integer column.
Count32 = Annotated[int, Field(ge=0, le=INT32_MAX)]
# A positive integer stored in a BigInteger column.
PositiveInt64 = Annotated[int, Field(ge=1, le=INT64_MAX)]
# A float that is a real number (JSON's Infinity/NaN and 1e999 are refused).
Finite = Annotated[float, Field(allow_inf_nan=False)]


class TreeError(ValueError):
    """A free-form value that SAM refuses; `field` is its dotted path."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field or "body"
        self.message = message


def _join(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


def check_tree(value: object, path: str = "", *, max_depth: int = MAX_DEPTH) -> None:
    """Raise `TreeError` for a non-finite float, a NUL character in a string or key, or nesting
    deeper than `max_depth`, anywhere in a parsed JSON/YAML `value` (walked without recursion)."""
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth >= max_depth:
                raise TreeError(where, f"nested deeper than {max_depth} levels")
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in pairs:
                if isinstance(key, str) and "\x00" in key:
                    raise TreeError(where, f"the key {key!r} contains a NUL character")
                stack.append((child, _join(where, key), depth + 1))
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise TreeError(where, f"{item} is not a finite number")
        elif isinstance(item, str):
            if "\x00" in item:
                raise TreeError(where, "text may not contain a NUL character (\\u0000)")
