"""Rectangles of processing elements, as every layer writes them."""

from __future__ import annotations

Rect = tuple[int, int, int, int]
"""(row, col, rows, cols): a rectangle of PEs; on a wafer for the scheduler, region-relative in
the simulator (where None means the whole region)."""
