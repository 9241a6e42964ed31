"""Free space with reservations blocked out, one layer per reservation (conservative backfill).

A job that would still run when a reservation starts must stay out of its rectangle; a job that
ends before may use it. With several reservations, sorted by start time, the reservations a job
must avoid are exactly those starting before it ends: a prefix. So each reservation gets a layer,
the free space with it and every earlier-starting one blocked, and a job looks at the last layer
that starts before its end. Layers share the `FreeSpace` of wafers they do not block (copy on
write), so a start occupies each distinct object once.
"""

from __future__ import annotations

from dataclasses import dataclass

from sam_domain.geometry import Rect
from sam_server.scheduling.geometry import FreeSpace
from sam_server.scheduling.placement import FitIndex


@dataclass
class Layer:
    """Free space as seen by jobs that would still run at `start`: every reservation starting
    at or before it is blocked out."""

    start: float
    spaces: list[FreeSpace | None]
    fit: FitIndex | None = None

    def index(self) -> FitIndex:
        """The fit index of this layer (rebuilt after a change)."""
        if self.fit is None:
            self.fit = FitIndex(self.spaces)
        return self.fit


def add_layer(
    layers: list[Layer], base: list[FreeSpace | None], wafer_index: int, rect: Rect, start: float
) -> None:
    """Block `rect` from `start` on: a new layer, and in every layer that starts later."""
    position = sum(1 for layer in layers if layer.start <= start)
    below = layers[position - 1].spaces if position > 0 else base
    layers.insert(position, Layer(start, list(below)))
    for layer in layers[position:]:
        space = layer.spaces[wafer_index]
        assert space is not None
        blocked = space.copy()  # copy on write: other layers may share this wafer's space
        blocked.occupy(rect, counts_as_used=False)
        layer.spaces[wafer_index] = blocked
        layer.fit = None


def occupy_everywhere(layers: list[Layer], base: FreeSpace, wafer_index: int, rect: Rect) -> None:
    """Take a started job's `rect` out of the base space and every layer (each object once)."""
    base.occupy(rect)
    done = {id(base)}
    for layer in layers:
        other = layer.spaces[wafer_index]
        if other is not None and id(other) not in done:
            done.add(id(other))
            other.occupy(rect)
        layer.fit = None
