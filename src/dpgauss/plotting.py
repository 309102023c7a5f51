"""Figures: maps of released values (node values on a road graph, an image of a 2-D grid,
regions, or a series over a 1-D grid), small multiples of a product domain, and the
experiments' figure helpers.

The maps are used by the release pipeline (the plot beside a release), ``dpgauss demo`` and
the taxi experiment.  They show the release's uncertainty, not only its values
(docs/release.md, "The plot"):

* every panel has its own robust colour scale (:func:`robust_scale`: the 2nd–98th
  percentile of what it draws, arrows on its colour bar where values go beyond), so neither
  the noise of the released panel nor a few hot spots wash out the others, and the ± panel
  (the interval's half-width) has its own; a constant map is drawn on a sane scale and says
  "constant" in its title (it never collapses to ``[0, 1e-12]``), and a map whose values
  all lie within a quarter of its typical error bar (``MapPanel.resolution``) is drawn on that
  error bar's scale and says "flat within its error bars" (shrunk noise never looks like
  hot spots);
* the keys that stand out beyond their error bars (:func:`stand_out`: the interval
  excludes the map's mean) are marked, cyan above and green below the mean;
* a product domain is drawn as small multiples (:func:`draw_small_multiples`: one map per
  value of its other parts, at most :data:`MAX_MULTIPLES`, the heading saying how many were
  left out);
* tick labels never carry an offset, and each figure is laid out to its panels' shapes.

Each graph panel colours every street segment by the mean of its two endpoint values.

The figure helpers (:func:`new_figure`, :func:`save`, :func:`method_curves` and
:data:`METHOD_STYLES`) draw the paper's figures for :mod:`dpgauss.experiments`.

matplotlib is the ``plot`` extra (``pip install 'dpgauss[plot]'``) and is imported only when
a plot is drawn, with the object-oriented API (``matplotlib.figure.Figure`` saved through the
Agg canvas): nothing touches pyplot's global state or the user's backend.  Without it every
drawing raises :class:`~dpgauss.errors.PlotUnavailableError` with the install hint.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ._optional import install_hint, optional, require
from .errors import PlotUnavailableError

__all__ = [
    "MARK_COLOURS",
    "MAX_MULTIPLES",
    "METHOD_STYLES",
    "SCALE_PERCENTILES",
    "ColourScale",
    "GraphGeometry",
    "GridGeometry",
    "MapPanel",
    "PlotUnavailableError",
    "RegionGeometry",
    "SeriesGeometry",
    "draw_graph_panels",
    "draw_grid_panels",
    "draw_maps",
    "draw_region_panels",
    "draw_series",
    "draw_small_multiples",
    "have_matplotlib",
    "map_figure",
    "method_curves",
    "new_figure",
    "pick_multiples",
    "require_matplotlib",
    "robust_scale",
    "save",
    "shared_scale",
    "small_multiples_figure",
    "stand_out",
]


#: The percentiles of a panel's robust colour scale (:func:`robust_scale`).
SCALE_PERCENTILES = (2.0, 98.0)
#: A panel whose values all lie within this fraction of its ``resolution`` (the median
#: half-width of its intervals) of each other is *flat within its error bars*
#: (:func:`robust_scale`).  Bias-aware intervals are at least 0.75 of the raw width, so a
#: trend-filter map of real structure can span less than one half-width (the taxi map at
#: ε = 1: 12.2 against ±16.8); shrunk noise spans a few hundredths of it (0.26 against ±15.5).
FLAT = 0.25
#: A product domain's small multiples draw at most this many maps.
MAX_MULTIPLES = 12
#: The colours of the keys that stand out (:func:`stand_out`): above the map's mean, below.
MARK_COLOURS = {1: "#00e5ff", -1: "#76ff03"}
#: Line width and opacity of the marks: above the mean drawn bold, below the mean light (on
#: a sparse count map most keys are below it, and the hot spots are what a reader seeks).
_MARK_STYLE = {1: (1.0, 1.0), -1: (0.45, 0.55)}
_DPI = 130


@dataclass(frozen=True)
class ColourScale:
    """A panel's colour limits ``[vmin, vmax]``; ``constant`` when every finite value is
    ``value`` (then the limits are ``value ± max(0.5, 5 % of |value|)``, never a collapsed
    ``[0, 1e-12]``); ``flat`` when the values span less than :data:`FLAT` of the panel's
    ``resolution`` (then the limits are ``value ± resolution``, ``value`` their median, and
    ``span`` is what they span)."""

    vmin: float
    vmax: float
    constant: bool = False
    value: float | None = None
    flat: bool = False
    span: float | None = None
    resolution: float | None = None


def robust_scale(
    values: object,
    percentiles: tuple[float, float] = SCALE_PERCENTILES,
    resolution: float | None = None,
) -> ColourScale:
    """The robust colour scale of one panel: the 2nd and 98th percentiles of its finite
    values; their minimum and maximum when the percentiles coincide (a map mostly 0 with a
    few hot spots); and for a constant map (every finite value within ``1e-9`` relative of
    the others) ``value ± max(0.5, 5 % of |value|)``, with ``constant`` set.  No finite value:
    ``[0, 1]``.

    ``resolution`` (e.g. the median half-width of the values' intervals): when every finite
    value lies within :data:`FLAT` of it of the others (``max − min < FLAT·resolution``), the
    map is
    *flat within its error bars* — its colours would draw differences its error bars cannot
    tell apart (James–Stein's shrunk noise as hot spots, issue #26) — and the scale is
    ``median ± resolution`` with ``flat`` set."""
    v = np.asarray(values, dtype=np.float64).ravel()
    v = v[np.isfinite(v)]
    if not v.size:
        return ColourScale(0.0, 1.0)
    lo, hi = (float(q) for q in np.percentile(v, percentiles))
    if not hi > lo:
        lo, hi = float(v.min()), float(v.max())
    if hi - lo <= 1e-9 * max(1.0, abs(lo), abs(hi)):
        c = float(np.median(v))
        h = max(0.5, 0.05 * abs(c))
        return ColourScale(c - h, c + h, True, c)
    span = float(v.max() - v.min())
    if resolution is not None and math.isfinite(resolution) and span < FLAT * resolution:
        c = float(np.median(v))
        return ColourScale(c - resolution, c + resolution, False, c, True, span, resolution)
    return ColourScale(lo, hi)


def shared_scale(panels: Sequence[Any], quantile: float = 0.995) -> float:
    """The top of a common colour scale ``[0, top]``: the ``quantile`` of the first panel's
    values (the reference, e.g. the true map), or of all panels if it is flat; at least
    1e-12.  For callers that pass ``vmax`` to put several maps on one scale; the maps' own
    default is :func:`robust_scale` per panel."""
    ref = np.asarray(_panel(panels[0]).values, dtype=np.float64)
    ref = ref[np.isfinite(ref)]
    top = float(np.quantile(ref, quantile)) if ref.size else 0.0
    if not top > 0:
        vals = np.concatenate(
            [np.asarray(_panel(p).values, dtype=np.float64).ravel() for p in panels]
        )
        vals = vals[np.isfinite(vals)]
        top = float(np.quantile(vals, quantile)) if vals.size else 1.0
    return max(top, 1e-12)


def stand_out(lower: object, upper: object, centre: float | None = None) -> np.ndarray:
    """Which keys stand out beyond their error bars: ``+1`` where the interval
    ``[lower, upper]`` lies above ``centre``, ``-1`` where it lies below, ``0`` elsewhere
    (and where a bound is not finite).  ``centre`` defaults to the mean of the intervals'
    midpoints (the map's mean when the intervals are centred on the denoised values; the
    release passes the denoised map's mean)."""
    lo = np.asarray(lower, dtype=np.float64)
    hi = np.asarray(upper, dtype=np.float64)
    if lo.shape != hi.shape:
        raise ValueError(f"lower and upper must have one shape; got {lo.shape} and {hi.shape}")
    if centre is None:
        mid = (lo + hi) / 2.0
        mid = mid[np.isfinite(mid)]
        centre = float(np.mean(mid)) if mid.size else 0.0
    out = np.zeros(lo.shape, dtype=np.int8)
    with np.errstate(invalid="ignore"):
        out[np.isfinite(lo) & (lo > centre)] = 1
        out[np.isfinite(hi) & (hi < centre)] = -1
    return out


@dataclass(frozen=True)
class MapPanel:
    """One panel of a figure: its ``name`` (the title), one value per key, and optionally
    ``marks`` (one ``-1``/``0``/``+1`` per key, as :func:`stand_out` gives: drawn as hollow
    markers or outlines), its colour map, its colour bar's ``label`` and, for a series, a
    ``band`` ``(lower, upper)`` to shade, and its ``resolution`` (the median half-width of
    its values' intervals: a panel whose values span less than :data:`FLAT` of it is drawn
    as *flat within its error bars*, :func:`robust_scale`).  A plain ``(name, values)``
    tuple is a panel too."""

    name: str
    values: Any
    marks: Any = None
    cmap: str | None = None
    label: str | None = None
    band: tuple[Any, Any] | None = None
    resolution: float | None = None


PanelLike = MapPanel | tuple[str, Any]


def _panel(p: PanelLike) -> MapPanel:
    if isinstance(p, MapPanel):
        return p
    name, values = p
    return MapPanel(str(name), values)


@dataclass(frozen=True)
class GraphGeometry:
    """Where a graph's keys are: node ``lat``/``lon`` (degrees) and its ``edges`` (m × 2)."""

    lat: Any
    lon: Any
    edges: Any

    def checked(self) -> GraphGeometry:
        lat, lon, edges = _check_graph(self.lat, self.lon, self.edges)
        return GraphGeometry(lat, lon, edges)

    @property
    def size(self) -> int:
        return int(np.size(self.lat))


@dataclass(frozen=True)
class RegionGeometry:
    """Where regions are: one Shapely polygon or multipolygon per key (lon/lat degrees)."""

    geoms: Sequence[Any]

    @property
    def size(self) -> int:
        return len(self.geoms)

    @functools.cached_property
    def paths(self) -> list[Any]:
        """One matplotlib path per region (every ring; holes drawn as holes)."""
        from matplotlib.path import Path as MPath

        def path_of(g: Any) -> Any:
            verts, codes = [], []
            for poly in getattr(g, "geoms", [g]):
                for ring in [poly.exterior, *poly.interiors]:
                    xy = np.asarray(ring.coords, dtype=np.float64)
                    verts.append(xy)
                    codes.append(
                        [MPath.MOVETO] + [MPath.LINETO] * (len(xy) - 2) + [MPath.CLOSEPOLY]
                    )
            return MPath(np.concatenate(verts), np.concatenate(codes))

        return [path_of(g) for g in self.geoms]


@dataclass(frozen=True)
class GridGeometry:
    """A ``(ny, nx)`` grid: its bins' lower edges on each axis (numbers or datetime64; the
    last bin as wide as the one before) and the axes' names."""

    x_edges: Any
    y_edges: Any
    x_label: str = "x"
    y_label: str = "y"

    @property
    def shape(self) -> tuple[int, int]:
        return (int(np.size(self.y_edges)), int(np.size(self.x_edges)))

    @property
    def size(self) -> int:
        return self.shape[0] * self.shape[1]


@dataclass(frozen=True)
class SeriesGeometry:
    """A 1-D grid: its keys (numbers or datetime64), one panel a series over them."""

    keys: Any
    label: str = "value"

    @property
    def size(self) -> int:
        return int(np.size(self.keys))


Geometry = GraphGeometry | RegionGeometry | GridGeometry | SeriesGeometry


def _figure(width: float, height: float) -> Any:
    mpl_figure = require("matplotlib.figure", "plot", "drawing plots", error=PlotUnavailableError)
    # "compressed": constrained layout for fixed-aspect axes (maps); plain "constrained"
    # let a panel's two-line title run into the figure's title once the aspect shrank it
    return mpl_figure.Figure(figsize=(width, height), layout="compressed")


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


def _no_offset(axis: Any) -> None:
    """Plain tick labels on a numeric axis: no ``1e3`` or ``+4.07e1`` offset text."""
    from matplotlib.ticker import ScalarFormatter

    fmt = ScalarFormatter(useOffset=False)
    fmt.set_scientific(False)
    axis.set_major_formatter(fmt)


def _extend(values: np.ndarray, scale: ColourScale) -> str:
    v = values[np.isfinite(values)]
    below = bool(v.size and v.min() < scale.vmin)
    above = bool(v.size and v.max() > scale.vmax)
    return {(True, True): "both", (True, False): "min", (False, True): "max"}.get(
        (below, above), "neither"
    )


def _marks_of(p: MapPanel, size: int) -> np.ndarray | None:
    if p.marks is None:
        return None
    m = np.asarray(p.marks).ravel()
    if m.size != size:
        raise ValueError(f"panel {p.name!r} has {m.size} marks; there are {size} keys")
    return m


def _title(p: MapPanel, scale: ColourScale, marks: np.ndarray | None) -> str:
    lines = [p.name]
    if scale.constant:
        lines.append(f"constant: every value is {scale.value:.4g}")
    elif scale.flat:
        # two lines: small multiples leave a title about 40 characters
        lines.append(
            f"flat within its error bars:\nvalues span {scale.span:.3g}, intervals "
            f"±{scale.resolution:.3g}"
        )
    if marks is not None:
        up, down = int(np.sum(marks > 0)), int(np.sum(marks < 0))
        lines.append(
            # two lines: three maps side by side leave a title about 40 characters
            f"{up + down} stand out beyond their intervals\n({up} above, {down} below the mean)"
            if up + down
            else "none stands out beyond its interval"
        )
    return "\n".join(lines)


def _graph_segments(geo: GraphGeometry) -> np.ndarray:
    lon, lat, edges = geo.lon, geo.lat, geo.edges
    return np.stack(
        [np.stack([lon[edges[:, j]], lat[edges[:, j]]], axis=1) for j in (0, 1)], axis=1
    )


def _stretch(lat: np.ndarray) -> float:
    """``1/cos(mean latitude)``: the aspect that keeps a lon/lat map undistorted."""
    if not lat.size:
        return 1.0
    return 1.0 / max(math.cos(math.radians(float(np.mean(lat)))), 1e-6)


def _box(geo: Geometry) -> tuple[float, float, float, float] | None:
    """``(x0, x1, y0, y1)`` of a map in degrees, or None for a grid/series."""
    if isinstance(geo, GraphGeometry):
        if not geo.size:
            return (0.0, 1.0, 0.0, 1.0)
        pad = 0.004
        return (
            float(geo.lon.min()) - pad,
            float(geo.lon.max()) + pad,
            float(geo.lat.min()) - pad,
            float(geo.lat.max()) + pad,
        )
    if isinstance(geo, RegionGeometry):
        xy = np.concatenate([p.vertices for p in _region_paths(geo)])
        return (
            float(xy[:, 0].min()),
            float(xy[:, 0].max()),
            float(xy[:, 1].min()),
            float(xy[:, 1].max()),
        )
    return None


def _panel_size(geo: Geometry, height: float) -> tuple[float, float]:
    """A panel's width and height in inches: a map as wide as its own shape (its colour
    bar below), so the figure uses its canvas; a grid or series a fixed shape."""
    box = _box(geo)
    if box is None:
        return (4.6, height) if isinstance(geo, GridGeometry) else (7.0, 3.2)
    x0, x1, y0, y1 = box
    aspect = _stretch(np.array([(y0 + y1) / 2.0]))
    ratio = (x1 - x0) / max((y1 - y0) * aspect, 1e-12)
    return (min(max(height * ratio, 2.2), 9.0) + 0.3, height + 1.0)


def _region_paths(geo: RegionGeometry) -> list[Any]:
    return geo.paths


def _grid_numbers(e: Any) -> tuple[np.ndarray, bool]:
    e = np.asarray(e)
    if e.dtype.kind == "M":  # timestamps: matplotlib's date numbers, date ticks
        from matplotlib.dates import date2num

        return np.asarray(date2num(e.astype("datetime64[us]")), np.float64), True
    return e.astype(np.float64), False


def _ends(e: np.ndarray) -> tuple[float, float]:
    w = e[-1] - e[-2] if e.size >= 2 else 1.0
    return float(e[0]), float(e[-1] + w)


def _centres(e: np.ndarray) -> np.ndarray:
    _, last = _ends(e)
    return (e + np.append(e[1:], last)) / 2.0


def _date_axis(axis: Any, maxticks: int = 5) -> None:
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter

    loc = AutoDateLocator(minticks=3, maxticks=maxticks)
    axis.set_major_locator(loc)
    axis.set_major_formatter(ConciseDateFormatter(loc))


def _draw_one(
    ax: Any, geo: Geometry, p: MapPanel, scale: ColourScale | None, cmap: str
) -> tuple[Any, str]:
    """Draw panel ``p`` on ``ax`` (on ``scale``, else its own robust scale); the mappable
    (None for a series) and its colour bar's ``extend`` (where values go beyond)."""
    values = np.asarray(p.values, dtype=np.float64).ravel()
    # the panel's own scale, once: it decides constant or flat, and the title says which
    own = robust_scale(values, resolution=p.resolution)
    marks = _marks_of(p, geo.size)
    legend: list[Any] = []
    if isinstance(geo, GraphGeometry):
        from matplotlib.collections import LineCollection

        v = np.nan_to_num(values, nan=0.0)
        on_edges = 0.5 * (v[geo.edges[:, 0]] + v[geo.edges[:, 1]])
        if scale is None:
            # constant or flat is decided on the node values (as the title says); the colours
            # of a map that is neither span its segments' values
            scale = (
                own if own.constant or own.flat else robust_scale(on_edges if on_edges.size else v)
            )
        order = np.argsort(on_edges, kind="stable")
        seg = _graph_segments(geo)
        mappable: Any = LineCollection(
            list(seg[order]), array=on_edges[order], cmap=cmap, linewidths=0.8
        )
        mappable.set_clim(scale.vmin, scale.vmax)
        ax.add_collection(mappable)
        box = _box(geo)
        assert box is not None
        ax.set_xlim(box[0], box[1])
        ax.set_ylim(box[2], box[3])
        ax.set_aspect(_stretch(geo.lat))
        ax.set_facecolor("0.15")
        ax.set_xticks([])
        ax.set_yticks([])
        if marks is not None:
            for sign, colour in MARK_COLOURS.items():
                idx = np.flatnonzero(marks == sign)
                if idx.size:
                    legend.append(
                        ax.scatter(
                            geo.lon[idx],
                            geo.lat[idx],
                            s=10,
                            facecolors="none",
                            edgecolors=colour,
                            linewidths=0.8 * _MARK_STYLE[sign][0],
                            alpha=_MARK_STYLE[sign][1],
                            zorder=3,
                            label=_mark_label(sign, idx.size),
                        )
                    )
        extend_of = on_edges
    elif isinstance(geo, RegionGeometry):
        from matplotlib.collections import PathCollection

        scale = own if scale is None else scale
        paths = _region_paths(geo)
        mappable = PathCollection(paths, cmap=cmap, edgecolor="0.6", linewidth=0.2)
        mappable.set_array(values)
        mappable.set_clim(scale.vmin, scale.vmax)
        ax.add_collection(mappable)
        box = _box(geo)
        assert box is not None
        ax.set_xlim(box[0], box[1])
        ax.set_ylim(box[2], box[3])
        ax.set_aspect(_stretch(np.array([(box[2] + box[3]) / 2.0])))
        ax.set_xticks([])
        ax.set_yticks([])
        if marks is not None:
            from matplotlib.lines import Line2D

            for sign, colour in MARK_COLOURS.items():
                idx = np.flatnonzero(marks == sign)
                if idx.size:
                    ax.add_collection(
                        PathCollection(
                            [paths[i] for i in idx],
                            facecolor="none",
                            edgecolor=colour,
                            linewidth=1.3 * _MARK_STYLE[sign][0],
                            alpha=_MARK_STYLE[sign][1],
                            zorder=3 if sign > 0 else 2.5,
                        )
                    )
                    legend.append(
                        Line2D(
                            [], [], color=colour, linewidth=1.1, label=_mark_label(sign, idx.size)
                        )
                    )
        extend_of = values
    elif isinstance(geo, GridGeometry):
        xe, xdate = _grid_numbers(geo.x_edges)
        ye, ydate = _grid_numbers(geo.y_edges)
        scale = own if scale is None else scale
        x0, x1 = _ends(xe)
        y0, y1 = _ends(ye)
        mappable = ax.imshow(
            values.reshape(geo.shape),
            origin="lower",
            extent=(x0, x1, y0, y1),
            aspect="auto",
            cmap=cmap,
            vmin=scale.vmin,
            vmax=scale.vmax,
            interpolation="nearest",
        )
        from matplotlib.ticker import MaxNLocator

        for axis, is_date in ((ax.xaxis, xdate), (ax.yaxis, ydate)):
            if is_date:
                _date_axis(axis)
            else:
                axis.set_major_locator(MaxNLocator(nbins=4 if axis is ax.xaxis else 6))
                _no_offset(axis)
        ax.set_xlabel(geo.x_label, fontsize=8)
        ax.set_ylabel(geo.y_label, fontsize=8)
        ax.tick_params(labelsize=7)
        if marks is not None:
            xc, yc = np.meshgrid(_centres(xe), _centres(ye))
            grid_marks = marks.reshape(geo.shape)
            for sign, colour in MARK_COLOURS.items():
                sel = grid_marks == sign
                if sel.any():
                    legend.append(
                        ax.scatter(
                            xc[sel],
                            yc[sel],
                            s=7,
                            marker="s",
                            facecolors="none",
                            edgecolors=colour,
                            linewidths=0.7 * _MARK_STYLE[sign][0],
                            alpha=_MARK_STYLE[sign][1],
                            label=_mark_label(sign, int(sel.sum())),
                        )
                    )
        extend_of = values
    else:
        _draw_series_panel(ax, geo, p, values, marks, scale)
        return None, "neither"
    if legend:
        ax.legend(handles=legend, fontsize=6, loc="best", framealpha=0.7)
    ax.set_title(_title(p, own, marks), fontsize=8)
    return mappable, _extend(extend_of, scale)


def _mark_label(sign: int, n: int) -> str:
    where = "above" if sign > 0 else "below"
    return f"interval {where} the mean ({n:,})"


def _series_x(keys: Any) -> tuple[np.ndarray, bool]:
    x = np.asarray(keys)
    if x.dtype.kind == "M":  # timestamps stay dates on the axis
        return x, True
    return x.astype(np.float64), False


def _draw_series_panel(
    ax: Any,
    geo: SeriesGeometry,
    p: MapPanel,
    values: np.ndarray,
    marks: np.ndarray | None,
    scale: ColourScale | None,
) -> None:
    x, is_date = _series_x(geo.keys)
    if p.band is not None:
        lo, hi = p.band
        ax.fill_between(x, lo, hi, color="tab:red", alpha=0.25, linewidth=0, label="95 % interval")
    ax.plot(x, values, color="tab:red", linewidth=1.2)
    own = robust_scale(values)
    if marks is not None:
        for sign, colour in ((1, "tab:blue"), (-1, "tab:green")):
            sel = marks == sign
            if sel.any():
                ax.scatter(
                    x[sel],
                    values[sel],
                    s=12,
                    color=colour,
                    zorder=3,
                    label=_mark_label(sign, int(sel.sum())),
                )
    if scale is not None:
        ax.set_ylim(scale.vmin, scale.vmax)
    if is_date:
        _date_axis(ax.xaxis, maxticks=9)
    else:
        _no_offset(ax.xaxis)
    _no_offset(ax.yaxis)
    ax.set_ylabel(geo.label, fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(True, alpha=0.3)
    if marks is not None and (marks != 0).any():
        ax.legend(fontsize=6)
    ax.set_title(_title(p, own, marks), fontsize=8)


def _colorbar(fig: Any, mappable: Any, axes: Any, label: str, extend: str) -> Any:
    from matplotlib.ticker import MaxNLocator

    cb = fig.colorbar(
        mappable,
        ax=axes,
        location="bottom",
        shrink=0.85,
        pad=0.01,
        aspect=30,
        extend=extend,
    )
    cb.set_label(label, fontsize=8)
    cb.ax.tick_params(labelsize=7)
    cb.ax.xaxis.set_major_locator(MaxNLocator(nbins=5))
    _no_offset(cb.ax.xaxis)
    return cb


def _check_panels(geo: Geometry, panels: Sequence[MapPanel]) -> None:
    if not panels:
        raise ValueError("panels must contain at least one (title, values) pair")
    for p in panels:
        if np.size(p.values) != geo.size:
            raise ValueError(
                f"panel {p.name!r} has {np.size(p.values)} values; there are {geo.size} keys"
            )


def map_figure(
    geometry: Geometry,
    panels: Sequence[PanelLike],
    *,
    label: str = "value",
    title: str | None = None,
    cmap: str = "magma",
    vmax: float | None = None,
    shared: bool = False,
    ncols: int | None = None,
    note: str | None = None,
) -> Any:
    """The figure :func:`draw_maps` saves (a ``matplotlib.figure.Figure``; its axes hold the
    panels in order, then their colour bars), for a caller that adds to it or inspects it."""
    if isinstance(geometry, GraphGeometry):
        geometry = geometry.checked()
    ps = [_panel(p) for p in panels]
    _check_panels(geometry, ps)
    n = len(ps)
    ncols = n if ncols is None else max(1, min(int(ncols), n))
    nrows = math.ceil(n / ncols)
    w, h = _panel_size(geometry, 5.4 if nrows == 1 else 3.6)
    fig = _figure(w * ncols + 0.3, h * nrows + (0.5 if title or note else 0.0))
    axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()
    common: ColourScale | None = None
    if vmax is not None:
        common = ColourScale(0.0, max(float(vmax), 1e-12))
    elif shared:
        pooled = [np.asarray(p.values, np.float64).ravel() for p in ps if p.cmap is None]
        res = [float(p.resolution) for p in ps if p.cmap is None and p.resolution is not None]
        if pooled:
            common = robust_scale(
                np.concatenate(pooled), resolution=float(np.median(res)) if res else None
            )
    last, extends = None, set()
    for ax, p in zip(axes, ps, strict=False):
        own = common if (common is not None and (p.cmap is None or vmax is not None)) else None
        mappable, extend = _draw_one(ax, geometry, p, own, p.cmap or cmap)
        if mappable is None:
            continue
        if own is None:
            _colorbar(fig, mappable, ax, p.label or label, extend)
        else:
            last = mappable
            extends.add(extend)
    for ax in axes[n:]:
        ax.set_visible(False)
    if last is not None:
        low = bool(extends & {"min", "both"})
        high = bool(extends & {"max", "both"})
        ext = {(True, True): "both", (True, False): "min", (False, True): "max"}
        _colorbar(fig, last, list(axes[:n]), label, ext.get((low, high), "neither"))
    heading = "\n".join(t for t in (title, note) if t)
    if heading:
        fig.suptitle(heading, fontsize=10)
    return fig


def draw_maps(
    path: str | Path,
    geometry: Geometry,
    panels: Sequence[PanelLike],
    *,
    label: str = "value",
    title: str | None = None,
    cmap: str = "magma",
    vmax: float | None = None,
    shared: bool = False,
    ncols: int | None = None,
    note: str | None = None,
) -> Path:
    """Draw each panel on ``geometry`` (a graph, regions, a grid or a series), a PNG.

    Colour scales: by default every panel has its own robust scale (:func:`robust_scale`:
    its 2nd–98th percentile, arrows on the colour bar where values go beyond), and its own
    colour bar; a constant panel is drawn on ``value ± max(0.5, 5 %)`` and says
    "constant" in its title.  ``shared=True`` puts every panel on one robust scale over all
    of them (the small multiples of one quantity, :func:`draw_small_multiples`; a panel
    with its own ``cmap`` keeps its own scale); ``vmax`` the old fixed ``[0, vmax]``.
    Marked keys (``MapPanel.marks``) are hollow markers (nodes, cells) or outlines
    (regions), cyan above and green below the map's mean, counted in the title.  Tick
    labels never carry an offset; the figure is laid out to its panels' own shapes
    (compressed layout, tight bounding box).  ``ncols`` panels per row (default: all in
    one row); ``note`` goes under the title.  Raises :class:`PlotUnavailableError` without
    matplotlib and ``ValueError`` for inconsistent inputs.
    """
    fig = map_figure(
        geometry,
        panels,
        label=label,
        title=title,
        cmap=cmap,
        vmax=vmax,
        shared=shared,
        ncols=ncols,
        note=note,
    )
    out = Path(path)
    fig.savefig(out, dpi=_DPI, format="png", bbox_inches="tight", pad_inches=0.08)
    return out


def pick_multiples(n: int, limit: int = MAX_MULTIPLES) -> np.ndarray:
    """The indices of the small multiples drawn out of ``n``: all if ``n ≤ limit``, else
    ``limit`` evenly spaced ones, the first and the last included."""
    if n <= limit:
        return np.arange(n)
    return np.unique(np.round(np.linspace(0, n - 1, limit)).astype(np.int64))


def small_multiples_figure(
    geometry: Geometry,
    maps: Sequence[PanelLike],
    *,
    total: int | None = None,
    what: str = "values",
    label: str = "value",
    title: str | None = None,
    ncols: int = 4,
) -> Any:
    """The figure :func:`draw_small_multiples` saves."""
    shown = len(maps)
    total = shown if total is None else int(total)
    note = (
        f"{shown} of {total} {what} drawn (evenly spaced); {total - shown} left out"
        if total > shown
        else f"one map per {what} ({shown})"
    )
    return map_figure(
        geometry,
        maps,
        label=label,
        title=title,
        shared=True,
        ncols=min(ncols, max(shown, 1)),
        note=note,
    )


def draw_small_multiples(
    path: str | Path,
    geometry: Geometry,
    maps: Sequence[PanelLike],
    *,
    total: int | None = None,
    what: str = "values",
    label: str = "value",
    title: str | None = None,
    ncols: int = 4,
) -> Path:
    """Small multiples: one map per value of a part (``maps``: the ones drawn, at most
    :data:`MAX_MULTIPLES` of them, e.g. by :func:`pick_multiples`) on one robust colour scale
    (their pooled 2nd–98th percentile), ``ncols`` a row.  ``total`` is how many values the
    part has: the heading says how many were left out (``12 of 24 values of hour drawn
    (evenly spaced); 12 left out``).  A PNG."""
    fig = small_multiples_figure(
        geometry, maps, total=total, what=what, label=label, title=title, ncols=ncols
    )
    out = Path(path)
    fig.savefig(out, dpi=_DPI, format="png", bbox_inches="tight", pad_inches=0.08)
    return out


def draw_graph_panels(
    path: str | Path,
    lat: np.ndarray,
    lon: np.ndarray,
    edges: np.ndarray,
    panels: Sequence[PanelLike],
    *,
    vmax: float | None = None,
    label: str = "value per node",
    title: str | None = None,
    cmap: str = "magma",
) -> Path:
    """Draw each ``(title, node values)`` panel on the graph's edges, side by side; a PNG.

    Segment colour = mean of its endpoints' values, on each panel's own robust scale
    (:func:`draw_maps`; ``vmax`` puts every panel on ``[0, vmax]``); busy segments are
    drawn last, on top.  Longitude is stretched by ``1/cos(mean latitude)`` so the map is
    not distorted.  Raises :class:`PlotUnavailableError` without matplotlib and
    ``ValueError`` for inconsistent inputs.
    """
    geo = GraphGeometry(*_check_graph(lat, lon, edges))
    return draw_maps(path, geo, panels, vmax=vmax, label=label, title=title, cmap=cmap)


def draw_grid_panels(
    path: str | Path,
    panels: Sequence[PanelLike],
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
    y bin, drawn bottom to top), each on its own robust scale (:func:`draw_maps`);
    ``x_edges``/``y_edges`` are the bins' lower edges (the last bin as wide as the one
    before).  A PNG."""
    if not panels:
        raise ValueError("panels must contain at least one grid")
    geo = GridGeometry(x_edges, y_edges, x_label, y_label)
    for p in map(_panel, panels):
        if np.shape(p.values) not in (geo.shape, (geo.size,)):
            raise ValueError(
                f"panel {p.name!r} has shape {np.shape(p.values)}; the grid is {geo.shape}"
            )
    return draw_maps(path, geo, panels, vmax=vmax, label=label, title=title)


def draw_region_panels(
    path: str | Path,
    geoms: Sequence[Any],
    panels: Sequence[PanelLike],
    *,
    vmax: float | None = None,
    label: str = "value",
    title: str | None = None,
) -> Path:
    """A choropleth per ``(name, values)`` panel: region ``i`` (a Shapely polygon or
    multipolygon, lon/lat degrees, holes drawn as holes) filled by ``values[i]``, each panel
    on its own robust scale (:func:`draw_maps`); longitude stretched by
    ``1/cos(mean latitude)``.  A PNG."""
    return draw_maps(path, RegionGeometry(list(geoms)), panels, vmax=vmax, label=label, title=title)


def draw_series(
    path: str | Path,
    keys: np.ndarray,
    series: Sequence[tuple[str, np.ndarray]],
    *,
    lower: np.ndarray | None = None,
    upper: np.ndarray | None = None,
    denoised_lower: np.ndarray | None = None,
    denoised_upper: np.ndarray | None = None,
    marks: np.ndarray | None = None,
    label: str = "value",
    title: str | None = None,
) -> Path:
    """Plot each ``(name, values)`` series against ``keys`` (a 1-D grid), with the band
    ``[lower, upper]`` (e.g. the released values' intervals) and the band
    ``[denoised_lower, denoised_upper]`` (the denoised values' intervals) shaded if given,
    and ``marks`` (:func:`stand_out`) as dots on the second series (the denoised one); a
    constant second series says so in the title.  No offset on the axes.  A PNG."""
    x, is_date = _series_x(keys)
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
    heading = [title] if title else []
    shown = np.asarray(series[min(1, len(series) - 1)][1], dtype=np.float64)
    scale = robust_scale(shown)
    if scale.constant:
        heading.append(
            f"{series[min(1, len(series) - 1)][0]}: constant, every value is {scale.value:.4g}"
        )
    if marks is not None:
        m = np.asarray(marks).ravel()
        if m.size != x.size:
            raise ValueError(f"marks has {m.size} values; keys has {x.size}")
        for sign, colour in ((1, "tab:cyan"), (-1, "tab:green")):
            sel = m == sign
            if sel.any():
                ax.scatter(
                    x[sel],
                    shown[sel],
                    s=14,
                    color=colour,
                    zorder=3,
                    label=_mark_label(sign, int(sel.sum())),
                )
    if is_date:
        _date_axis(ax.xaxis, maxticks=9)
    else:
        _no_offset(ax.xaxis)
    _no_offset(ax.yaxis)
    ax.set_ylabel(label)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    if heading:
        ax.set_title("\n".join(heading), fontsize=10)
    out = Path(path)
    fig.savefig(out, dpi=_DPI, format="png", bbox_inches="tight", pad_inches=0.08)
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
