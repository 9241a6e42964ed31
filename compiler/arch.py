"""Architecture constants the compiler needs, from `wse_sim.get_arch` when it is available.

The fallback table holds the documented WSE-2/WSE-3 numbers (wse-anchors.md section a) so that
the compiler works before (or without) the simulator package.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ArchInfo:
    """The per-PE and fabric constants used by sizing, memory planning and the cost model."""

    name: str
    rows: int
    cols: int
    sram_bytes: int
    sram_reserved_bytes: int
    fp32_flops_per_cycle: float
    fp16_flops_per_cycle: float
    clock_hz: float
    host_bytes_per_cycle: (
        float  # per host I/O channel (7 Gb/s at 850 MHz); one per 16 rows per edge
    )
    io_channels_per_edge: int = 60  # host channels on each of the East and West edges
    max_memcpy_channels: int = 16  # the most channels one transfer may use

    def host_channels(self, rows: int) -> int:
        """Host channels a rectangle `rows` high streams through (wse_sim's host link model)."""
        share = round(2 * rows * self.io_channels_per_edge / self.rows)
        return int(min(self.max_memcpy_channels, max(1, share)))


_FALLBACK = {
    # 48 KiB SRAM per PE; 6 KiB kept back for code, stack and memcpy runtime (as wse_sim assumes).
    "wse2": ArchInfo("wse2", 750, 994, 48 * 1024, 6144, 2.0, 8.0, 850e6, 1.03),
    "wse3": ArchInfo("wse3", 755, 1170, 48 * 1024, 6144, 2.0, 16.0, 850e6, 1.03),
}
_ALIASES = {"wse-2": "wse2", "wse2": "wse2", "wse-3": "wse3", "wse3": "wse3"}


def normalize_arch(name: str | None) -> str:
    """'WSE-2' / 'wse2' / None -> 'wse2'; an unknown name raises ValueError."""
    key = _ALIASES.get((name or "wse2").strip().lower())
    if key is None:
        raise ValueError(f"unknown architecture {name!r}; use WSE-2 or WSE-3")
    return key


def get_arch_info(name: str | None) -> ArchInfo:
    """The constants of `name`, taken from wse_sim when it exports `get_arch`."""
    key = normalize_arch(name)
    fallback = _FALLBACK[key]
    try:
        from wse_sim import get_arch  # type: ignore[attr-defined]

        sim = get_arch(key)
    except Exception:  # simulator not built yet, or a name it does not know
        return fallback
    return ArchInfo(
        name=key,
        rows=int(getattr(sim, "rows", fallback.rows)),
        cols=int(getattr(sim, "cols", fallback.cols)),
        sram_bytes=int(getattr(sim, "sram_bytes", fallback.sram_bytes)),
        sram_reserved_bytes=int(getattr(sim, "sram_reserved_bytes", fallback.sram_reserved_bytes)),
        fp32_flops_per_cycle=float(
            getattr(sim, "fp32_flops_per_cycle", fallback.fp32_flops_per_cycle)
        ),
        fp16_flops_per_cycle=float(
            getattr(sim, "fp16_flops_per_cycle", fallback.fp16_flops_per_cycle)
        ),
        clock_hz=float(getattr(sim, "clock_hz", fallback.clock_hz)),
        host_bytes_per_cycle=_host_bytes_per_cycle(sim, fallback),
        io_channels_per_edge=int(getattr(sim, "io_channels_per_edge", 60)),
        max_memcpy_channels=int(getattr(sim, "max_memcpy_channels", 16)),
    )


def _host_bytes_per_cycle(sim: object, fallback: ArchInfo) -> float:
    gbps = getattr(sim, "host_channel_gbps", None)
    clock = getattr(sim, "clock_hz", None)
    if not gbps or not clock:
        return fallback.host_bytes_per_cycle
    return float(gbps) * 1e9 / 8 / float(clock)
