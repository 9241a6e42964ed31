"""`compile_options.max_activation_memory`: parse the budget a user writes into bytes.

The seed's meaning (cerebras_config.yaml): a per-job activation budget in GB. A bare number is
GB for the whole job (`24` = 24 GB, `0.5` = 512 MB in decimal GB: 1 GB = 1e9 bytes). A string with
a unit is a per-job budget too (`"64MB"`, `"1.5GiB"`), unless it ends in `/PE`: `"2KiB/PE"` keeps
SAM's older meaning, a cap on the activation bytes of every PE (which makes a kernel spread over
more PEs; it never changes the training step). A bare integer above LEGACY_PER_PE_ABOVE keeps
that older meaning too (docs/contract.md section 1 wrote the key as "per-PE bytes"): no wafer has that many GB
of SRAM (a WSE-3 has 44 GB), so such a number cannot be a per-job GB budget, while a per-PE cap
of 64 bytes or fewer could not hold a single activation row. Lowering a per-job budget below what the step
stashes makes the compiler split the batch into micro-batches with gradient accumulation.
This module is pure (no torch) so the API server can validate the spec with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*(/\s*pe)?\s*$", re.IGNORECASE)
GB = 10**9
LEGACY_PER_PE_ABOVE = (
    64  # a bare integer above this is the per-PE byte cap docs/contract.md first wrote
)


@dataclass(frozen=True)
class ActivationBudget:
    """A parsed budget: `per_job_bytes` (the seed's meaning) or `per_pe_bytes` (the older cap)."""

    per_job_bytes: int | None = None
    per_pe_bytes: int | None = None

    def describe(self) -> str:
        """'64000000 bytes per job' / '2048 bytes per PE', for messages and the compile summary."""
        if self.per_pe_bytes is not None:
            return f"{self.per_pe_bytes} bytes per PE"
        return f"{self.per_job_bytes} bytes per job"


def parse_activation_budget(value: object) -> ActivationBudget | None:
    """None -> None; a number up to 64 -> GB per job; an integer above 64 -> bytes per PE (the
    the first form in docs/contract.md); "64MB" -> bytes per job; "2KiB/PE" -> bytes per PE.

    Raises ValueError with the accepted forms for anything else (zero, negative, unknown unit).
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(_HELP)
    if isinstance(value, int | float):
        if not value > 0:
            raise ValueError(f"max_activation_memory must be positive; {_HELP}")
        if float(value).is_integer() and value > LEGACY_PER_PE_ABOVE:
            return ActivationBudget(per_pe_bytes=int(value))
        return ActivationBudget(per_job_bytes=max(1, int(round(float(value) * GB))))
    match = _PATTERN.match(str(value))
    if not match or match.group(2).lower() not in _UNITS:
        raise ValueError(f"max_activation_memory {value!r} is not understood; {_HELP}")
    number, unit, per_pe = float(match.group(1)), match.group(2).lower(), match.group(3)
    if number <= 0:
        raise ValueError(f"max_activation_memory must be positive; {_HELP}")
    size = max(1, int(round(number * _UNITS[unit])))
    if not unit and not per_pe:
        # A bare number in a string is GB, as the same number written without quotes.
        return ActivationBudget(per_job_bytes=max(1, int(round(number * GB))))
    return ActivationBudget(per_pe_bytes=size) if per_pe else ActivationBudget(per_job_bytes=size)


_HELP = (
    "write a per-job budget in GB as a number (24, 0.5) or with a unit ('512MB', '1.5GiB'), "
    "or a per-PE cap with '/PE' ('2KiB/PE'; an integer above 64 is read as bytes per PE)"
)
