"""Figures: heat maps of released values (node values on a road graph, an image of a 2-D
grid, regions, or a series over a 1-D grid) and the experiments' figure helpers.

The heat maps are used by the release pipeline (the plot beside a graph or range release),
``dpgauss demo`` and the taxi experiment.  Each graph panel colours every street segment by
the mean of its two endpoint values, all panels on one colour scale, so the true, released
and denoised maps can be compared at a glance.

The figure helpers (:func:`new_figure`, :func:`save`, :func:`method_curves` and
:data:`METHOD_STYLES`) draw the paper's figures for :mod:`dpgauss.experiments`.

matplotlib is the ``plot`` extra (``pip install 'dpgauss[plot]'``) and is imported only when
a plot is drawn, with the object-oriented API (``matplotlib.figure.Figure`` saved through the
Agg canvas): nothing touches pyplot's global state or the user's backend.  Without it every
drawing raises :class:`~dpgauss.errors.PlotUnavailableError` with the install hint.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ._optional import install_hint, optional, require
from .errors import PlotUnavailableError

__all__ = [
    "METHOD_STYLES",
    "PlotUnavailableError",
    "draw_graph_panels",
    "draw_grid_panels",
    "draw_region_panels",
    "draw_series",
    "have_matplotlib",
    "method_curves",
    "new_figure",
    "require_matplotlib",
    "save",
    "shared_scale",
]


def _figure(width: float, height: float) -> Any:
    mpl_figure = require("matplotlib.figure", "plot", "drawing plots", error=PlotUnavailableError)
    return mpl_figure.Figure(figsize=(width, height), layout="constrained")


def shared_scale(panels: Sequence[tuple[str, np.ndarray]], quantile: float = 0.995) -> float:
    """The top of a common colour scale: the ``quantile`` of the first panel's values
    (the reference, e.g. the true map), or of all panels if it is flat; at least 1e-12."""
    ref = np.asarray(panels[0][1], dtype=np.float64)
    ref = ref[np.isfinite(ref)]
    top = float(np.quantile(ref, quantile)) if ref.size else 0.0
    if not top > 0:
        vals = np.concatenate([np.asarray(v, dtype=np.float64).ravel() for _, v in panels])
        vals = vals[np.isfinite(vals)]
        top = float(np.quantile(vals, quantile)) if vals.size else 1.0
    return max(top, 1e-12)


def _check_graph(
    lat: np.ndarray, lon: np.ndarray, edges: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lat = np.asarray(lat, dtype=np.float64)
    lon = np.asarray(lon, dtype=np.float64)
    edges = np.asarray(edges)
    if lat.ndim != 1 or lat.shape != lon.shape:
        raise ValueError("lat and lon must be 1-D arrays of the same length (one per node)")
    if edges.ndim != 2 or edges.shape[1] != 2:
        raise ValueError(f"edges must be an (m, 2) array; got shape {edges.shape}")
    if edges.size and (edges.min() < 0 or edges.max() >= lat.size):
        raise ValueError(f"edges must index nodes 0 … {lat.size - 1}")
    return lat, lon, edges.astype(np.int64)


def draw_graph_panels(
    path: str | Path,
    lat: np.ndarray,
    lon: np.ndarray,
    edges: np.ndarray,
    panels: Sequence[tuple[str, np.ndarray]],
    *,
    vmax: float | None = None,
    label: str = "value per node",
    title: str | None = None,
    cmap: str = "magma",
) -> Path:
    """Draw each ``(title, node values)`` panel on the graph's edges, side by side; a PNG.

    Segment colour = mean of its endpoints' values, clipped to ``[0, vmax]`` (``vmax`` by
    :func:`shared_scale` if None); busy segments are drawn last, on top.  Longitude is
    stretched by ``1/cos(mean latitude)`` so the map is not distorted.  Raises
    :class:`PlotUnavailableError` without matplotlib and ``ValueError`` for inconsistent inputs.
    """
    lat, lon, edges = _check_graph(lat, lon, edges)
    if not panels:
        raise ValueError("panels must contain at least one (title, values) pair")
    for name, values in panels:
        if np.shape(values) != lat.shape:
            raise ValueError(
                f"panel {name!r} has {np.size(values)} values; the graph has {lat.size} nodes"
            )
    top = shared_scale(panels) if vmax is None else float(vmax)
    fig = _figure(3.6 * len(panels) + 1.2, 7.2)
    from matplotlib.collections import LineCollection

    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    seg = np.stack([np.stack([lon[edges[:, j]], lat[edges[:, j]]], axis=1) for j in (0, 1)], axis=1)
    aspect = 1.0 / math.cos(math.radians(float(np.mean(lat)))) if lat.size else 1.0
    coll = None
    for ax, (name, values) in zip(axes, panels, strict=True):
        v = np.nan_to_num(np.asarray(values, dtype=np.float64), nan=0.0)
        on_edges = 0.5 * (v[edges[:, 0]] + v[edges[:, 1]])
        order = np.argsort(on_edges, kind="stable")
        coll = LineCollection(list(seg[order]), array=on_edges[order], cmap=cmap, linewidths=0.8)
        coll.set_clim(0.0, top)
        ax.add_collection(coll)
        pad = 0.004
        ax.set_xlim(lon.min() - pad, lon.max() + pad)
        ax.set_ylim(lat.min() - pad, lat.max() + pad)
        ax.set_aspect(aspect)
        ax.set_facecolor("0.15")
        ax.set_title(name, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    assert coll is not None
    fig.colorbar(coll, ax=list(axes), shrink=0.6, label=label, extend="max")
    if title:
        fig.suptitle(title, fontsize=10)
    out = Path(path)
    fig.savefig(out, dpi=130, format="png")
    return out


def draw_series(
    path: str | Path,
    keys: np.ndarray,
    series: Sequence[tuple[str, np.ndarray]],
    *,
    lower: np.ndarray | None = None,
    upper: np.ndarray | None = None,
    denoised_lower: np.ndarray | None = None,
    denoised_upper: np.ndarray | None = None,
    label: str = "value",
    title: str | None = None,
) -> Path:
    """Plot each ``(name, values)`` series against ``keys`` (a 1-D grid), with the band
    ``[lower, upper]`` (e.g. the released values' intervals) and the band
    ``[denoised_lower, denoised_upper]`` (the denoised values' intervals) shaded if given;
    a PNG."""
    x = np.asarray(keys)
    if x.dtype.kind != "M":  # timestamps stay dates on the axis
        x = x.astype(np.float64)
    if x.ndim != 1 or not series:
        raise ValueError("keys must be 1-D and series must contain at least one series")
    fig = _figure(8.0, 3.8)
    ax = fig.subplots()
    bands = (
        (lower, upper, "tab:blue", 0.15, "the release"),
        (denoised_lower, denoised_upper, "tab:red", 0.25, "the denoised values"),
    )
    for lo, hi, color, alpha, what in bands:
        if lo is not None and hi is not None:
            ax.fill_between(
                x, lo, hi, color=color, alpha=alpha, linewidth=0, label=f"95 % interval of {what}"
            )
    styles = (
        {"color": "tab:blue", "linewidth": 0.8, "alpha": 0.7},
        {"color": "tab:red", "linewidth": 1.6},
        {"color": "black", "linewidth": 1.0},
    )
    for i, (name, values) in enumerate(series):
        if np.shape(values) != x.shape:
            raise ValueError(f"series {name!r} has {np.size(values)} values; keys has {x.size}")
        ax.plot(x, values, label=name, **styles[i % len(styles)])
    ax.set_ylabel(label)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title, fontsize=10)
    out = Path(path)
    fig.savefig(out, dpi=130, format="png")
    return out


def draw_grid_panels(
    path: str | Path,
    panels: Sequence[tuple[str, np.ndarray]],
    *,
    x_edges: np.ndarray,
    y_edges: np.ndarray,
    x_label: str = "x",
    y_label: str = "y",
    vmax: float | None = None,
    label: str = "value",
    title: str | None = None,
) -> Path:
    """One image per ``(name, values)`` panel of a ``(ny, nx)`` grid (row ``i`` = the ``i``-th
    y bin, drawn bottom to top), on one colour scale; ``x_edges``/``y_edges`` are the bins'
    lower edges (the last bin as wide as the one before).  A PNG."""
    if not panels:
        raise ValueError("panels must contain at least one grid")
    dates = {}

    def numbers(e: Any, axis: str) -> np.ndarray:
        e = np.asarray(e)
        if e.dtype.kind == "M":  # timestamps: matplotlib's date numbers, date ticks
            from matplotlib.dates import date2num

            dates[axis] = True
            return np.asarray(date2num(e.astype("datetime64[us]")), np.float64)
        return e.astype(np.float64)

    xe, ye = numbers(x_edges, "x"), numbers(y_edges, "y")
    shape = (ye.size, xe.size)
    for name, v in panels:
        if np.shape(v) != shape:
            raise ValueError(f"panel {name!r} has shape {np.shape(v)}; the grid is {shape}")

    def ends(e: np.ndarray) -> tuple[float, float]:
        w = e[-1] - e[-2] if e.size >= 2 else 1.0
        return float(e[0]), float(e[-1] + w)

    x0, x1 = ends(xe)
    y0, y1 = ends(ye)
    if vmax is None:
        vmax = shared_scale(panels)
    fig = _figure(4.2 * len(panels) + 0.8, 4.2)
    axes = np.atleast_1d(fig.subplots(1, len(panels)))
    image = None
    for ax, (name, v) in zip(axes, panels, strict=True):
        image = ax.imshow(
            np.asarray(v, np.float64),
            origin="lower",
            extent=(x0, x1, y0, y1),
            aspect="auto",
            cmap="magma",
            vmin=0.0,
            vmax=vmax,
            interpolation="nearest",
        )
        if "x" in dates:
            ax.xaxis_date()
        if "y" in dates:
            ax.yaxis_date()
        ax.set_title(name, fontsize=9)
        ax.set_xlabel(x_label, fontsize=8)
        ax.set_ylabel(y_label, fontsize=8)
        ax.tick_params(labelsize=7)
    fig.colorbar(image, ax=list(axes), shrink=0.85, label=label)
    if title:
        fig.suptitle(title, fontsize=10)
    out = Path(path)
    fig.savefig(out, dpi=130, format="png")
    return out


def draw_region_panels(
    path: str | Path,
    geoms: Sequence[Any],
    panels: Sequence[tuple[str, np.ndarray]],
    *,
    vmax: float | None = None,
    label: str = "value",
    title: str | None = None,
) -> Path:
    """A choropleth per ``(name, values)`` panel: region ``i`` (a Shapely polygon or
    multipolygon, lon/lat degrees, holes drawn as holes) filled by ``values[i]``, all panels
    on one colour scale; longitude stretched by ``1/cos(mean latitude)``.  A PNG."""
    from matplotlib.collections import PathCollection
    from matplotlib.path import Path as MPath

    def path_of(g: Any) -> Any:
        verts, codes = [], []
        for poly in getattr(g, "geoms", [g]):
            for ring in [poly.exterior, *poly.interiors]:
                xy = np.asarray(ring.coords, dtype=np.float64)
                verts.append(xy)
                codes.append([MPath.MOVETO] + [MPath.LINETO] * (len(xy) - 2) + [MPath.CLOSEPOLY])
        return MPath(np.concatenate(verts), np.concatenate(codes))

    paths = [path_of(g) for g in geoms]
    for name, v in panels:
        if np.size(v) != len(paths):
            raise ValueError(f"panel {name!r} has {np.size(v)} values; there are {len(paths)}")
    if vmax is None:
        vmax = shared_scale(panels)
    allxy = np.concatenate([p.vertices for p in paths])
    lat0 = float(np.mean(allxy[:, 1]))
    fig = _figure(4.6 * len(panels) + 0.8, 5.0)
    axes = np.atleast_1d(fig.subplots(1, len(panels)))
    coll = None
    for ax, (name, v) in zip(axes, panels, strict=True):
        coll = PathCollection(paths, cmap="magma", edgecolor="0.6", linewidth=0.2)
        coll.set_array(np.asarray(v, dtype=np.float64))
        coll.set_clim(0.0, vmax)
        ax.add_collection(coll)
        ax.set_xlim(allxy[:, 0].min(), allxy[:, 0].max())
        ax.set_ylim(allxy[:, 1].min(), allxy[:, 1].max())
        ax.set_aspect(1.0 / max(math.cos(math.radians(lat0)), 1e-6))
        ax.set_title(name, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.colorbar(coll, ax=list(axes), shrink=0.8, label=label)
    if title:
        fig.suptitle(title, fontsize=10)
    out = Path(path)
    fig.savefig(out, dpi=130, format="png")
    return out


# The experiments' figure helpers.


def have_matplotlib() -> bool:
    """Whether matplotlib can be imported."""
    return optional("matplotlib") is not None


def require_matplotlib() -> None:
    """Raise :class:`~dpgauss.errors.PlotUnavailableError` with the install hint if
    matplotlib is missing."""
    if not have_matplotlib():
        raise PlotUnavailableError(
            f"matplotlib is needed to draw the figures' PNGs; install it with: "
            f"{install_hint('plot')} "
            "(the CSVs and summary.md are written without it)"
        )


def new_figure(ncols: int, *, panel_width: float = 4.8, height: float = 4.0) -> tuple[Any, list]:
    """A ``matplotlib.figure.Figure`` with ``ncols`` panels side by side, and the axes."""
    require_matplotlib()
    from matplotlib.figure import Figure

    fig = Figure(figsize=(panel_width * ncols, height), layout="constrained")
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, list(axes)


def save(fig: Any, path: Path) -> None:
    """Write ``fig`` as a PNG at 150 dpi."""
    fig.savefig(path, dpi=150)


#: Label and line style of every method compared in figures 2, 3 and 4.
METHOD_STYLES: dict[str, dict[str, Any]] = {
    "laplace": {"label": "Laplace", "color": "tab:gray", "marker": "s", "linestyle": "-"},
    "classical": {
        "label": "classical Gaussian (cGM)",
        "color": "tab:red",
        "marker": "v",
        "linestyle": "--",
    },
    "analytic": {
        "label": "analytic Gaussian (aGM)",
        "color": "tab:blue",
        "marker": "o",
        "linestyle": "-",
    },
    "analytic+js": {
        "label": "aGM + James–Stein",
        "color": "tab:green",
        "marker": "^",
        "linestyle": "-",
    },
    "analytic+soft": {
        "label": "aGM + soft threshold",
        "color": "tab:orange",
        "marker": "D",
        "linestyle": "-",
    },
    "analytic+graph_wavelet": {
        "label": "aGM + tree wavelets",
        "color": "tab:brown",
        "marker": "P",
        "linestyle": "-",
    },
    "analytic+tf0": {
        "label": "aGM + trend filter k=0",
        "color": "tab:cyan",
        "marker": "<",
        "linestyle": "-",
    },
    "analytic+tf1": {
        "label": "aGM + trend filter k=1",
        "color": "tab:olive",
        "marker": ">",
        "linestyle": "-",
    },
    "analytic+auto": {
        "label": "aGM + auto (SURE)",
        "color": "tab:purple",
        "marker": "x",
        "linestyle": ":",
    },
}


def method_curves(
    ax: Any,
    rows: Iterable[Mapping[str, Any]],
    x: str,
    *,
    y: str = "mse",
    se: str | None = "mse_se",
    methods: Sequence[str] = tuple(METHOD_STYLES),
) -> None:
    """Plot ``y`` against ``x`` for every method (log-log), with a ±2 SE band if ``se``."""
    rows = list(rows)
    for method in methods:
        pts = sorted(
            (float(r[x]), float(r[y]), float(r[se]) if se else 0.0)
            for r in rows
            if r["method"] == method and math.isfinite(float(r[y]))
        )
        if not pts:
            continue
        xs = [p[0] for p in pts]
        ys = [p[1] for p in pts]
        style = METHOD_STYLES[method]
        ax.plot(xs, ys, markersize=4, linewidth=1.4, **style)
        if se:
            lo = [max(p[1] - 2 * p[2], p[1] * 1e-3) for p in pts]
            hi = [p[1] + 2 * p[2] for p in pts]
            ax.fill_between(xs, lo, hi, color=style["color"], alpha=0.15, linewidth=0)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.grid(True, which="major", alpha=0.3)
