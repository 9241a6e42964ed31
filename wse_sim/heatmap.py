"""A per-PE heatmap as a picture a person can read: axes in PE coordinates, a colour bar, and a
colour scale fitted to the data.

A fixed 0..1 scale made a job whose busiest PE is 12.6 % utilized look uniformly dark; here the
top of the scale is the data's maximum (the colour bar says which value that is), and the bottom
is 0, so colours compare PEs within one picture and the bar's labels compare pictures. PEs with
no value (NaN: outside every region on a wafer map) are grey. Written with Pillow only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont, PngImagePlugin

# Viridis' published anchor colours (perceptually uniform, readable in grey and by people with
# the common colour-vision deficiencies); values in between are interpolated linearly.
RAMP = np.array(
    [
        (68, 1, 84),
        (59, 82, 139),
        (33, 145, 140),
        (94, 201, 98),
        (253, 231, 37),
    ],
    dtype=np.float64,
)
NO_VALUE = (128, 128, 128)
BACKGROUND = (255, 255, 255)
INK = (20, 20, 20)
FONT_PX = 12
BAR_WIDTH = 18


@dataclass(frozen=True)
class Scale:
    """The colour scale: `vmin` maps to the ramp's first colour, `vmax` to its last."""

    vmin: float
    vmax: float

    @classmethod
    def fitted(cls, grid: np.ndarray) -> Scale:
        """0 .. the grid's largest finite value (1 when there is none above 0).

        grid: float [rows, cols], NaN where there is no value.
        """
        finite = grid[np.isfinite(grid)]
        top = float(finite.max()) if finite.size else 0.0
        return cls(0.0, top if top > 0 else 1.0)

    def unit_interval(self, grid: np.ndarray) -> np.ndarray:
        """float [rows, cols] in [0, 1] (NaN stays NaN)."""
        return np.clip((grid - self.vmin) / (self.vmax - self.vmin), 0.0, 1.0)


@dataclass(frozen=True)
class Rendering:
    """Where things are in the written picture (pixel boxes x0, y0, x1, y1, end-exclusive)."""

    path: Path
    scale: Scale
    plot: tuple[int, int, int, int]
    colour_bar: tuple[int, int, int, int]
    pixels_per_pe: int


def colours(unit: np.ndarray) -> np.ndarray:
    """uint8 [..., 3]: the ramp's colour of each value in [0, 1]; grey for NaN."""
    v = np.nan_to_num(unit, nan=0.0) * (len(RAMP) - 1)
    low = np.clip(np.floor(v).astype(int), 0, len(RAMP) - 2)
    frac = (v - low)[..., None]
    rgb = RAMP[low] * (1 - frac) + RAMP[low + 1] * frac
    rgb[np.isnan(unit)] = NO_VALUE
    pixels: np.ndarray = np.rint(rgb).astype(np.uint8)
    return pixels


def nice_ticks(lo: float, hi: float, most: int = 6) -> list[float]:
    """At most `most` round values (1, 2, 2.5 or 5 x 10^k apart) within [lo, hi]."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(1, most - 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    count = int(math.floor((hi - first) / step + 1e-9)) + 1
    return [round(first + i * step, 12) for i in range(count)]


def _label(value: float) -> str:
    return f"{value:.4g}"


def _pe_ticks(origin: int, count: int, pixels: int, room: int) -> list[tuple[int, int]]:
    """(PE index, offset of its centre in pixels) for round PE coordinates along one axis."""
    most = max(2, min(8, (count * pixels) // room))
    ticks = nice_ticks(origin, origin + count - 1, most)
    return [
        (int(t), int((t - origin + 0.5) * pixels))
        for t in ticks
        if float(t).is_integer() and origin <= t < origin + count
    ]


def render(
    grid: np.ndarray,
    path: str | Path,
    *,
    title: str,
    unit: str,
    origin: tuple[int, int] = (0, 0),
    min_side: int = 256,
    max_side: int = 1024,
) -> Rendering:
    """Write grid (float [rows, cols], NaN = no value) as a PNG with axes in PE coordinates
    (`origin`: the wafer row and column of grid[0, 0]) and a colour bar labelled in `unit`.

    The PE cells are scaled up by a whole number so the short side reaches `min_side` pixels
    while the long side stays within `max_side` (at least one pixel per PE).
    """
    grid = np.asarray(grid, dtype=np.float64)
    rows, cols = grid.shape
    scale = Scale.fitted(grid)
    px = max(1, min(min_side // max(1, min(rows, cols)), max_side // max(1, rows, cols)))
    font = ImageFont.load_default(FONT_PX)
    left, top, right_gap, bottom = 58, 30, 16, 44
    plot_w, plot_h = cols * px, rows * px
    bar_x0 = left + plot_w + right_gap
    label_w = max(int(font.getlength(_label(t))) for t in [*nice_ticks(0, scale.vmax), scale.vmax])
    width = max(
        bar_x0 + BAR_WIDTH + 6 + label_w + 8,  # the colour bar's labels
        bar_x0 - 4 + int(font.getlength(unit)) + 8,  # its unit, under it
        left + int(font.getlength(title)) + 8,
    )
    height = top + max(plot_h, 120) + bottom
    image = Image.new("RGB", (width, height), BACKGROUND)
    draw = ImageDraw.Draw(image)

    cells = Image.fromarray(colours(scale.unit_interval(grid)), mode="RGB")
    if px > 1:
        cells = cells.resize((plot_w, plot_h), Image.Resampling.NEAREST)
    image.paste(cells, (left, top))
    plot = (left, top, left + plot_w, top + plot_h)
    draw.rectangle((plot[0] - 1, plot[1] - 1, plot[2], plot[3]), outline=INK)
    draw.text((left, 8), title, fill=INK, font=font)

    for pe, offset in _pe_ticks(origin[1], cols, px, 70):  # columns along the bottom
        x = left + offset
        draw.line((x, plot[3], x, plot[3] + 4), fill=INK)
        draw.text((x, plot[3] + 6), str(pe), fill=INK, font=font, anchor="ma")
    draw.text(
        ((plot[0] + plot[2]) // 2, plot[3] + 24), "column (PE)", fill=INK, font=font, anchor="ma"
    )
    for pe, offset in _pe_ticks(origin[0], rows, px, 40):  # rows down the left side
        y = top + offset
        draw.line((left - 5, y, left - 1, y), fill=INK)
        draw.text((left - 7, y), str(pe), fill=INK, font=font, anchor="rm")
    axis = Image.new("RGB", (int(font.getlength("row (PE)")) + 4, FONT_PX + 4), BACKGROUND)
    ImageDraw.Draw(axis).text((2, 1), "row (PE)", fill=INK, font=font)
    axis = axis.rotate(90, expand=True)
    image.paste(axis, (2, top + max(0, (plot_h - axis.height) // 2)))

    bar_h = plot_h if plot_h >= 120 else 120
    ramp = np.linspace(1.0, 0.0, bar_h)[:, None].repeat(BAR_WIDTH, axis=1)  # top = vmax
    image.paste(Image.fromarray(colours(ramp), mode="RGB"), (bar_x0, top))
    bar = (bar_x0, top, bar_x0 + BAR_WIDTH, top + bar_h)
    draw.rectangle((bar[0] - 1, bar[1] - 1, bar[2], bar[3]), outline=INK)
    for value in nice_ticks(scale.vmin, scale.vmax):
        y = bar[3] - 1 - int(round((value - scale.vmin) / (scale.vmax - scale.vmin) * (bar_h - 1)))
        if value < scale.vmax and y - bar[1] < FONT_PX:  # keep clear of the max label
            continue
        draw.line((bar[2], y, bar[2] + 4, y), fill=INK)
        draw.text((bar[2] + 6, y), _label(value), fill=INK, font=font, anchor="lm")
    if nice_ticks(scale.vmin, scale.vmax)[-1] != scale.vmax:
        draw.line((bar[2], bar[1], bar[2] + 4, bar[1]), fill=INK)
        draw.text((bar[2] + 6, bar[1]), _label(scale.vmax), fill=INK, font=font, anchor="lm")
    draw.text((bar[0] - 4, bar[3] + 6), unit, fill=INK, font=font)

    info = PngImagePlugin.PngInfo()
    info.add_text("Title", title)
    info.add_text("sam:unit", unit)
    info.add_text("sam:scale_min", repr(scale.vmin))
    info.add_text("sam:scale_max", repr(scale.vmax))
    info.add_text("sam:origin", f"{origin[0]},{origin[1]}")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    image.save(out, format="PNG", pnginfo=info)
    return Rendering(out, scale, plot, bar, px)
