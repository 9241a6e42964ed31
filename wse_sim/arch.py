"""Architecture constants of the Cerebras WSE-2 and WSE-3, each tagged with its source.

Tags: "doc" = stated in vendor docs, code or papers; "derived" = arithmetic on doc numbers;
"assume" = a modelling default with no public source. Sources are the [S#] keys of
docs/architecture.md ("Hardware constants and their sources").
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, overload

from wse_sim.errors import UnknownArchError


@dataclass(frozen=True)
class Arch:
    """One wafer generation. Rates are per PE per cycle; an FMAC counts as 2 FLOPs."""

    name: str
    rows: int  # usable program rectangle with memcpy: fabric minus (7, 2)
    cols: int
    sram_bytes: int
    sram_reserved_bytes: int  # code, stack and memcpy runtime area, not for job data
    clock_hz: float
    fp32_flops_per_cycle: float
    fp16_flops_per_cycle: float
    hop_latency: int = 1  # cycles per fabric link (router to neighbouring router)
    ramp_latency: int = 1  # cycles per RAMP crossing: PE -> its router, and router -> PE
    link_words_per_cycle: int = 1
    wavelet_bits: int = 32
    router_ports: tuple[str, ...] = ("N", "S", "E", "W", "RAMP")
    routable_colors: int = 24
    io_channels_per_edge: int = 60
    max_memcpy_channels: int = 16
    host_channel_gbps: float = 7.0
    host_txn_overhead_s: float = 200e-6
    fabric_rows: int = 0
    fabric_cols: int = 0
    sources: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        for name, low in (("hop_latency", 1), ("ramp_latency", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(
                    f"{name} must be an integer number of cycles >= {low}, got {value!r}"
                )

    @overload
    def path_latency(self, hops: int) -> int: ...
    @overload
    def path_latency(self, hops: Any) -> Any: ...
    def path_latency(self, hops: Any) -> Any:
        """Cycles a wavelet takes from one PE to a PE `hops` >= 1 fabric links away: the RAMP
        out of the sender, `hops` links, the RAMP into the receiver (works on arrays too)."""
        return 2 * self.ramp_latency + hops * self.hop_latency

    @property
    def key(self) -> str:
        """The short name SAM stores and compares: "wse2" for WSE-2, "wse3" for WSE-3."""
        return self.name.lower().replace("-", "")

    @property
    def host_bytes_per_cycle(self) -> float:
        """Bytes one host I/O channel moves per fabric cycle (host_channel_gbps at clock_hz)."""
        return self.host_channel_gbps * 1e9 / 8 / self.clock_hz

    def host_channels(self, rows: int) -> int:
        """Host channels a rectangle `rows` high streams through: its share of the East and West
        edges' channels, at least one and at most what one transfer may use."""
        share = round(2 * rows * self.io_channels_per_edge / self.rows)
        return int(min(self.max_memcpy_channels, max(1, share)))

    @property
    def sram_limit_bytes(self) -> int:
        """Bytes per PE a job may allocate: capacity minus the reserved runtime area."""
        return self.sram_bytes - self.sram_reserved_bytes

    @property
    def pes(self) -> int:
        """Number of usable PEs."""
        return self.rows * self.cols

    def flops_per_cycle(self, dtype: str) -> float:
        """FLOPs per PE per cycle for "float32"/"fp32" or "float16"/"fp16"/"bfloat16"/"cb16"."""
        if dtype in ("float32", "fp32"):
            return self.fp32_flops_per_cycle
        if dtype in ("float16", "fp16", "bfloat16", "bf16", "cb16"):
            return self.fp16_flops_per_cycle
        raise ValueError(f"unknown dtype {dtype!r}; use 'float32' or 'float16'")


_COMMON_SOURCES = {
    "rows/cols": "doc [S8] single-tile-matvec: usable rectangle = fabric - (7, 2) with memcpy",
    "sram_bytes": "doc [S1][S12][S23] 48 KB per PE",
    "sram_reserved_bytes": "assume: 6 KiB for code, stack and memcpy runtime (anchors b.6)",
    "clock_hz": "doc [S8] bandwidth-test/run.py converts cycles at 850 MHz",
    "fp32_flops_per_cycle": "assume: 1 FMAC (2 FLOP) per cycle [S22]",
    "fp16_flops_per_cycle": "doc [S22] FP16 SIMD width x 2 FLOP per FMAC",
    "hop_latency": "doc [S1] one neighbour hop per cycle",
    "ramp_latency": (
        "doc [S12]/[S1]: RAMP is one of the five router ports, one wavelet per cycle; "
        "latency of a crossing (PE -> router, router -> PE) = assume 1"
    ),
    "link_words_per_cycle": "doc [S1] one 32-bit wavelet per cycle per link direction",
    "router_ports": "doc [S12][S1] N, S, E, W, RAMP",
    "io_channels_per_edge": "doc [S4] host channels on the East and West edges",
    "host_channel_gbps": "doc [S8] bandwidth-test: about 7 Gb/s per I/O channel",
    "host_txn_overhead_s": "doc [S8] bandwidth-test: about 200 us TCP overhead per transaction",
}

WSE2 = Arch(
    name="WSE-2",
    rows=750,
    cols=994,
    fabric_rows=757,
    fabric_cols=996,
    sram_bytes=48 * 1024,
    sram_reserved_bytes=6 * 1024,
    clock_hz=850e6,
    fp32_flops_per_cycle=2.0,
    fp16_flops_per_cycle=8.0,
    routable_colors=24,
    io_channels_per_edge=60,
    sources={**_COMMON_SOURCES, "fabric": "doc [S9] --fabric-dims=757,996"},
)

WSE3 = replace(  # what differs from WSE-2
    WSE2,
    name="WSE-3",
    rows=755,
    cols=1170,
    fabric_rows=762,
    fabric_cols=1172,
    fp16_flops_per_cycle=16.0,
    io_channels_per_edge=62,
    sources={
        **_COMMON_SOURCES,
        "fabric": "doc [S10] --fabric-dims=762,1172",
        "clock_hz": "assume: WSE-3 clock not published; same 850 MHz default",
        "io_channels_per_edge": "doc [S4] 62 channels per edge on WSE-3",
    },
)

_BY_NAME = {
    "wse2": WSE2,
    "wse-2": WSE2,
    "cs2": WSE2,
    "cs-2": WSE2,
    "wse3": WSE3,
    "wse-3": WSE3,
    "cs3": WSE3,
    "cs-3": WSE3,
}


def arch_key(name: str | None) -> str:
    """'WSE-2' / 'wse2' / 'CS-2' / None -> 'wse2'; an unknown name raises UnknownArchError."""
    return get_arch(name or "wse2").key


def get_arch(name: str, **overrides: Any) -> Arch:
    """Return the constants of `name` ("wse2", "WSE-2", "wse3", "WSE-3"), with fields overridden.

    Example: ``get_arch("wse2", rows=8, cols=8)`` for a small test fabric.
    """
    arch = _BY_NAME.get(name.strip().lower())
    if arch is None:
        raise UnknownArchError(
            f"unknown architecture {name!r}; use one of 'wse2', 'WSE-2', 'wse3', 'WSE-3'"
        )
    known = {f.name for f in fields(Arch)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise UnknownArchError(f"unknown Arch fields {unknown}; valid fields: {sorted(known)}")
    if not overrides:
        return arch
    tagged = {**arch.sources, **{k: "override (config)" for k in overrides}}
    return replace(arch, **overrides, sources=tagged)
