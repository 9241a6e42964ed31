"""The architecture facts the compiler needs: wse_sim's `Arch`, the one home of every hardware
number (fabric size, SRAM, clock, rates, host channels), under SAM's short names "wse2"/"wse3"."""

from __future__ import annotations

from wse_sim.arch import Arch, arch_key, get_arch

ArchInfo = Arch  # the compiler's name for it: sizing, memory planning and the cost model read it


def normalize_arch(name: str | None) -> str:
    """'WSE-2' / 'wse2' / None -> 'wse2'; an unknown name raises ValueError (UnknownArchError)."""
    return arch_key(name)


def get_arch_info(name: str | None) -> ArchInfo:
    """The constants of `name` (default WSE-2)."""
    return get_arch(normalize_arch(name))
