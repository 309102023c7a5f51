"""The heat maps' former home, kept because ``examples/manhattan_denoise.py`` teaches it:
they live in :mod:`dpgauss.plotting`."""

from __future__ import annotations

from .plotting import (
    PlotUnavailableError,
    draw_graph_panels,
    draw_grid_panels,
    draw_region_panels,
    draw_series,
    shared_scale,
)

__all__ = [
    "PlotUnavailableError",
    "draw_graph_panels",
    "draw_grid_panels",
    "draw_region_panels",
    "draw_series",
    "shared_scale",
]
